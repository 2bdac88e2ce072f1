"""Check that sharded index builds are exact: a killed build resumed, and workers + merge, equal one build.

    python scripts/bench/check_resume_build.py [--passages 20000] [--embedder minilm] [--shard-size 1000]
        [--check resume workers] [--queries 100] [--workdir DIR]

The corpus is the distinct context paragraphs of the bundled HotpotQA, 2WikiMultihopQA and MuSiQue samples,
repeated with new ids (`<id>#copy<n>`) up to --passages and written as a FlashRAG JSONL that
`python build_index.py corpus=<file>` streams. Each build runs as its own process (as users run it);
its peak resident memory is the kernel's high-water mark for it (VmHWM). Checks:

- resume: a reference build; then a second build SIGKILLed once half its shards are done, and run
  again: it must resume (not re-encode the finished shards) and end with the same ids and vectors.
- workers: `shard=0/2` and `shard=1/2` (one after the other: on one machine they would compete for its
  cores; the point is what they write), then `merge=true`: the same ids and vectors as the reference.

"The same" is checked on the stored vectors (bit for bit) and on the top-10 of --queries real questions
(ids and scores). --embedder is a conf/embedder name: `hashing` for plumbing at scale (1M passages in
minutes), `minilm` for the real encoder (slow on CPU: ~36 passages/s on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np
from hydra.utils import instantiate

from hoprag.data import pool_corpus, write_corpus
from hoprag.data.bench_corpus import bundled_examples, repeated
from hoprag.paths import PROJECT_ROOT
from hoprag.scripts import compose_config, offline_defaults

GIB = 2**30


class Build:
    """`python build_index.py` over the corpus file into one cache directory."""

    def __init__(self, workdir: Path, corpus: Path, embedder: str, shard_size: int) -> None:
        self.workdir, self.corpus, self.embedder, self.shard_size = workdir, corpus, embedder, shard_size

    def start(self, cache: str, *overrides: str) -> subprocess.Popen:
        args = [f"corpus={self.corpus}", f"embedder={self.embedder}", f"shards.size={self.shard_size}", *overrides]
        env = {**os.environ, "HOPRAG_CACHE": str(self.workdir / cache)}
        log = open(self.workdir / f"{cache}.log", "a")  # noqa: SIM115 (closed with the process)
        run_dir = self.workdir / "runs" / f"{cache}-{time.monotonic_ns()}"
        cmd = [sys.executable, "build_index.py", *args, f"hydra.run.dir={run_dir}"]
        return subprocess.Popen(
            cmd, cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def run(self, cache: str, *overrides: str) -> dict:
        """Run to the end; its wall time and peak RSS: the kernel's high-water mark of the build's own
        memory (VmHWM), polled, since `ru_maxrss` of a child also counts this process's memory at fork."""
        started = time.perf_counter()
        proc = self.start(cache, *overrides)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, high_water_kib(proc.pid))
            time.sleep(0.05)
        if proc.returncode != 0:
            raise SystemExit(f"build failed ({cache} {overrides}); see {self.workdir / cache}.log")
        return {"seconds": round(time.perf_counter() - started, 1), "peak_rss_gib": round(peak * 1024 / GIB, 3)}

    def kill_halfway(self, cache: str, num_shards: int) -> int:
        """Start a build and SIGKILL it once half its shards are done (stamped); the number done."""
        proc = self.start(cache)
        shards = self.workdir / cache / "indexes" / "dense-shards"
        while proc.poll() is None and len(list(shards.glob("*/shard-*.stamp.json"))) < num_shards // 2:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return len(list(shards.glob("*/shard-*.stamp.json")))


def high_water_kib(pid: int) -> int:
    """The process's peak resident memory so far (Linux /proc VmHWM, KiB); 0 once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def index_of(workdir: Path, cache: str) -> tuple[faiss.Index, list[str]]:
    (directory,) = (workdir / cache / "indexes" / "dense").iterdir()
    ids = json.loads((directory / "ids.json").read_text(encoding="utf-8"))
    return faiss.read_index(str(directory / "index.faiss")), ids


def compare(workdir: Path, cache: str, query_vectors: np.ndarray) -> dict:
    """Ids, vectors and top-10 of `cache`'s index against the reference build's."""
    (ref, ref_ids), (got, got_ids) = index_of(workdir, "reference"), index_of(workdir, cache)
    same_vectors = all(
        np.array_equal(
            ref.reconstruct_n(s, min(65536, ref.ntotal - s)), got.reconstruct_n(s, min(65536, got.ntotal - s))
        )
        for s in range(0, ref.ntotal, 65536)
    )
    (ref_d, ref_i), (got_d, got_i) = ref.search(query_vectors, 10), got.search(query_vectors, 10)
    return {
        "same_ids": ref_ids == got_ids,
        "same_vectors": ref.ntotal == got.ntotal and same_vectors,
        "same_top10": bool(np.array_equal(ref_i, got_i) and np.array_equal(ref_d, got_d)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=20_000)
    parser.add_argument("--embedder", default="minilm", help="a conf/embedder name (hashing: cheap, deterministic)")
    parser.add_argument("--shard-size", type=int, default=1000)
    parser.add_argument("--check", nargs="+", choices=["resume", "workers"], default=["resume", "workers"])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--workdir", help="keep corpus, caches and logs here (default: a temporary directory)")
    args = parser.parse_args()
    offline_defaults()

    with tempfile.TemporaryDirectory(prefix="hoprag-resume-") as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        examples = bundled_examples()
        corpus = write_corpus(repeated(pool_corpus(examples), args.passages), workdir / "corpus.jsonl")
        build = Build(workdir, corpus, args.embedder, args.shard_size)
        num_shards = -(-args.passages // args.shard_size)
        report: dict = {"passages": args.passages, "embedder": args.embedder, "shards": num_shards}
        report["reference"] = build.run("reference")

        cfg = compose_config("build_index", [f"embedder={args.embedder}"])
        questions = [ex.question for ex in examples][: args.queries]
        query_vectors = instantiate(cfg.embedder).encode_queries(questions)

        if "resume" in args.check:
            published = build.kill_halfway("resumed", num_shards)
            resumed = build.run("resumed")
            log = (workdir / "resumed.log").read_text()
            report["resume"] = {
                "shards_on_disk_when_killed": published,
                "resumed_at_first_missing_shard": f"resuming at shard {published}:" in log,
                **resumed,
                **compare(workdir, "resumed", query_vectors),
            }
        if "workers" in args.check:
            runs = [build.run("workers", f"shard={i}/2") for i in range(2)] + [build.run("workers", "merge=true")]
            report["workers"] = {
                "seconds": [r["seconds"] for r in runs],
                "peak_rss_gib": [r["peak_rss_gib"] for r in runs],
                **compare(workdir, "workers", query_vectors),
            }
    print(json.dumps(report, indent=2))
    checks = [
        v
        for part in ("resume", "workers")
        if part in report
        for k, v in report[part].items()
        if k.startswith(("same", "resumed"))
    ]
    raise SystemExit(0 if all(checks) else 1)


if __name__ == "__main__":
    main()
