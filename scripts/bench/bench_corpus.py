"""The corpus store at scale: its build rate, id lookups, and eval.py's peak memory as the corpus grows.

    python scripts/bench/bench_corpus.py [--sizes 500000 2500000] [--questions 20] [--index flat]
        [--retrievers dense bm25] [--lookups 1000] [--kill-check] [--workdir DIR]

For each size the bench corpus (hoprag/data/bench_corpus.py: the bundled paragraphs repeated with new ids) is
written as a FlashRAG JSONL; `build_index.py corpus=<file>` builds its store and the hashing embedder's index
(BM25 too with `--retrievers bm25`), then `eval.py +method=standard_rag llm=scripted embedder=hashing data=hotpotqa
data.corpus=<file> limit=<questions>` answers over it once per retriever. Every build and run is its own process
(as users run them); its peak resident memory is the kernel's high-water mark for it (VmHWM, polled). Printed:

- the store's build rate (passages per second of the store's own build, from its manifest);
- `--lookups` random ids looked up and read (id -> row -> passage) in this process, twice (fresh ids each time);
- eval.py's peak memory per size and retriever, the growth in GiB per million passages between the first and
  last size, and its projection to wiki-18's 21,015,324 passages;
- with `--kill-check`, a store build SIGKILLed once two parts are on disk and run again: it must resume there and
  end with the fingerprint of an uninterrupted build (`--part-rows`, 500,000 by default).

Run it alone on the machine for memory figures; build rates depend on what else runs.
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
from glob import glob
from pathlib import Path

import numpy as np

from hoprag.data import pool_corpus, write_corpus
from hoprag.data.bench_corpus import bundled_examples, repeated
from hoprag.data.corpus_store import CorpusStore
from hoprag.data.store_build import store_root, stored_corpus
from hoprag.paths import PROJECT_ROOT
from hoprag.scripts import offline_defaults

GIB = 2**30
WIKI18 = 21_015_324


def high_water_gib(pid: int) -> float:
    """The process's peak resident memory so far (Linux /proc VmHWM); 0 once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return kib * 1024 / GIB


class Runner:
    """Entry points run as their own processes over one cache directory, timed, with their peak memory."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.env = {**os.environ, "HOPRAG_CACHE": str(workdir / "cache"), "HOPRAG_PROGRESS": "0"}

    def start(self, script: str, overrides: list[str], log: str) -> subprocess.Popen:
        run_dir = self.workdir / "runs" / f"{log}-{time.monotonic_ns()}"
        out = open(self.workdir / f"{log}.log", "a")  # noqa: SIM115 (closed with the process)
        cmd = [sys.executable, script, *overrides, f"hydra.run.dir={run_dir}"]
        return subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip

    def start_python(self, code: str, log: str) -> subprocess.Popen:
        out = open(self.workdir / f"{log}.log", "a")  # noqa: SIM115 (closed with the process)
        return subprocess.Popen([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=self.env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    def run(self, script: str, overrides: list[str], log: str) -> dict:
        started, peak = time.perf_counter(), 0.0
        proc = self.start(script, overrides, log)
        while proc.poll() is None:
            peak = max(peak, high_water_gib(proc.pid))
            time.sleep(0.05)
        if proc.returncode != 0:
            raise SystemExit(f"{script} {' '.join(overrides)} failed; see {self.workdir / log}.log")
        return {"seconds": round(time.perf_counter() - started, 1), "peak_rss_gib": round(peak, 3)}


def lookups(store: CorpusStore, n: int, seed: int) -> float:
    """Milliseconds to map `n` random passage ids to their rows and read those passages."""
    ids = [p.id for p in store.take(np.random.default_rng(seed).integers(0, len(store), n))]
    started = time.perf_counter()
    passages = store.take(store.rows_of(ids))
    elapsed = time.perf_counter() - started
    assert [p.id for p in passages] == ids
    return round(1000 * elapsed, 1)


def kill_check(runner: Runner, corpus: Path, reference: CorpusStore, part_rows: int) -> dict:
    """Build the store of `corpus` in parts of `part_rows` in its own process, SIGKILL it once two parts are on
    disk, run it again, and compare the result with `reference` (the uninterrupted build)."""
    index_dir = runner.workdir / "killed"
    code = (f"from hoprag.data.store_build import open_corpus_store; "
            f"open_corpus_store({str(corpus)!r}, {str(index_dir)!r}, part_rows={part_rows})")  # fmt: skip
    proc = runner.start_python(code, "killed")
    stamps = store_root(index_dir) / "building-*" / "part-?????.json"
    while proc.poll() is None and len(glob(str(stamps))) < 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    parts_done = len(glob(str(stamps)))
    started = time.perf_counter()
    rerun = runner.start_python(code, "killed")
    rerun.wait()
    seconds = round(time.perf_counter() - started, 1)
    store = stored_corpus(corpus, index_dir)
    return {"parts_on_disk_when_killed": parts_done, "resumed_parts": store.manifest["resumed_parts"] if store else None,
            "rerun_seconds": seconds, "same_fingerprint": store is not None and store.fingerprint == reference.fingerprint}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500_000, 2_500_000])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--index", default="flat", help="a conf/index name (flat, hnsw, ivfpq)")
    parser.add_argument("--retrievers", nargs="+", choices=["dense", "bm25"], default=["dense"])
    parser.add_argument("--lookups", type=int, default=1000)
    parser.add_argument("--kill-check", action="store_true", help="also kill and resume a store build (last size)")
    parser.add_argument("--part-rows", type=int, default=500_000, help="--kill-check's parts (killed after two)")
    parser.add_argument("--workdir", help="keep corpora, caches and logs here (default: a temporary directory)")
    args = parser.parse_args()
    offline_defaults()
    report: dict = {"index": args.index, "questions": args.questions, "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="hoprag-corpus-") as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        runner = Runner(workdir)
        pool = pool_corpus(bundled_examples())
        for size in args.sizes:
            corpus = workdir / f"corpus-{size}.jsonl"
            if not corpus.is_file():
                write_corpus(repeated(pool, size), corpus)
            row: dict = {}
            build = [f"corpus={corpus}", "embedder=hashing", f"index={args.index}"]
            for retriever in args.retrievers:
                row[f"build_{retriever}"] = runner.run("build_index.py", [*build, f"retriever={retriever}"], "build")
            store = stored_corpus(corpus, workdir / "cache" / "indexes")
            assert store is not None, f"build_index.py left no store for {corpus}"
            seconds = store.manifest["build_seconds"]
            row["store"] = {"build_seconds": seconds, "passages_per_second": round(size / seconds)}
            row["lookup_ms"] = [lookups(store, args.lookups, seed) for seed in (1, 2)]
            for retriever in args.retrievers:
                overrides = ["+method=standard_rag", "llm=scripted", "embedder=hashing", f"index={args.index}",
                             "data=hotpotqa", f"data.corpus={corpus}", f"limit={args.questions}",
                             f"retriever={retriever}", "~logger", "progress=false"]  # fmt: skip
                row[f"eval_{retriever}"] = runner.run("eval.py", overrides, "eval")
            report["sizes"][size] = row
            print(json.dumps({size: row}), flush=True)
            if args.kill_check and size == args.sizes[-1]:
                report["kill_check"] = kill_check(runner, corpus, store, args.part_rows)
        first, last = args.sizes[0], args.sizes[-1]
        for retriever in args.retrievers:
            low, high = (report["sizes"][n][f"eval_{retriever}"]["peak_rss_gib"] for n in (first, last))
            slope = (high - low) / ((last - first) / 1e6) if last != first else float("nan")
            report[f"eval_{retriever}_gib_per_million"] = round(slope, 3)
            report[f"eval_{retriever}_projected_21m_gib"] = round(high + slope * (WIKI18 - last) / 1e6, 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
