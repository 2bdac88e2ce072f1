"""The corpus store: a corpus file read on demand (Arrow, memory-mapped), built once, resumable, found again by the
file's identity, and searched by every retriever as a list would be."""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from hoprag.data import DataFormatError, Passage, QADataset, read_corpus, write_corpus
from hoprag.data import corpus_identity as ci
from hoprag.data import store_build as sb
from hoprag.data.corpus_identity import cached_sha256, file_identity
from hoprag.data.corpus_store import CorpusStore, MemoryCorpus
from hoprag.data.store_source import Chunk
from hoprag.paths import data_root
from hoprag.retrieval import BM25Retriever, DenseRetriever, FusionRetriever, corpus_fingerprint
from hoprag.retrieval.embedders import HashingEmbedder
from hoprag.treehop.retriever import TreeHopRetriever

READ = sb.read_chunks
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
]


def passages(n: int = 50) -> list[Passage]:
    return [Passage(f"p{i}", f"T{i % 7}", " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 9))) for i in range(n)]


def build(path, index_dir, **kwargs):
    return sb.open_corpus_store(path, index_dir, part_rows=kwargs.pop("part_rows", 12), batch_rows=5, **kwargs)


class Parsed:
    """Counts the passages read from the corpus file, one row at a time; raises (a killed build) after
    `fail_after` of them."""

    def __init__(self, monkeypatch, fail_after: int | None = None) -> None:
        self.count, self.fail_after = 0, fail_after

        def counted(path, position, unquote):
            for chunk in READ(path, position, unquote):
                for row in range(len(chunk)):
                    if self.fail_after is not None and self.count >= self.fail_after:
                        raise KeyboardInterrupt("killed")
                    self.count += 1
                    yield Chunk([column.slice(row, 1) for column in chunk.columns], chunk.ends[row : row + 1])

        monkeypatch.setattr(sb, "read_chunks", counted)


KILLED = """
import os, sys
from hoprag.data import store_build as sb
read, passed = sb.read_chunks, [0]

def dying(path, position, unquote):
    for chunk in read(path, position, unquote):
        for row in range(len(chunk)):
            if passed[0] == int(sys.argv[3]):
                os._exit(9)
            passed[0] += 1
            yield sb.Chunk([column.slice(row, 1) for column in chunk.columns], chunk.ends[row : row + 1])

sb.read_chunks = dying
sb.open_corpus_store(sys.argv[1], sys.argv[2], part_rows=12, batch_rows=5)
"""


def killed_build(path, index_dir, after: int) -> None:
    """`build` in a process of its own that dies outright (no exception, no clean-up, as under SIGKILL) after
    reading `after` passages."""
    run = subprocess.run([sys.executable, "-c", KILLED, str(path), str(index_dir), str(after)], capture_output=True)
    assert run.returncode == 9, run.stderr.decode()


def building(index_dir) -> list:
    return list((index_dir / "corpus").glob("building-*"))


def test_the_store_reads_the_corpus_as_read_corpus_does_without_holding_it(tmp_path):
    path = data_root() / "bamboogle" / "wiki18_passages.jsonl"  # quoted wiki-18 titles, numeric ids
    listed = read_corpus(path)
    store = sb.open_corpus_store(path, tmp_path, part_rows=500, batch_rows=64)
    assert isinstance(store, CorpusStore) and len(store) == 1190 and store.manifest["parts"] == 3
    assert list(store) == listed and store.fingerprint == corpus_fingerprint(listed)
    assert store.take([1189, 0, 500, 0]) == [listed[1189], listed[0], listed[500], listed[0]]
    assert store[-1] == listed[-1] and store[498:502] == listed[498:502]
    ids = [listed[7].id, "no such id", listed[1000].id]
    np.testing.assert_array_equal(store.rows_of(ids), [7, -1, 1000])
    assert store.get(listed[600].id) == listed[600] and listed[3].id in store and "x" not in store
    with pytest.raises(KeyError):
        store.get("no such id")
    with pytest.raises(IndexError):
        store.take([1190])
    expected = [[i for i, p in enumerate(listed) if p.title == t] for t in ("Citibank", "Sanford I. Weill", "None")]
    assert store.rows_with_titles(["Citibank", "Sanford I. Weill", "None"]) == expected and expected[0] and expected[1]
    memory = MemoryCorpus(listed)
    assert memory.rows_with_titles(["Citibank"]) == expected[:1] and memory.fingerprint == store.fingerprint


def test_a_rerun_opens_the_store_by_the_files_identity_and_a_changed_file_gets_its_own(tmp_path, monkeypatch):
    path = write_corpus(passages(), tmp_path / "corpus.jsonl")
    parsed = Parsed(monkeypatch)
    first = build(path, tmp_path / "idx")
    assert parsed.count == 50
    again = build(path, tmp_path / "idx")
    assert parsed.count == 50 and again.directory == first.directory  # nothing read again
    os.utime(path, ns=(0, 0))  # touched: the identity changed, the content did not (its sha256 says so)
    assert build(path, tmp_path / "idx").directory == first.directory and parsed.count == 50
    write_corpus(passages(51), path)
    changed = build(path, tmp_path / "idx")
    assert len(changed) == 51 and changed.fingerprint != first.fingerprint and changed.directory != first.directory


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.jsonl.gz"])
def test_a_killed_build_resumes_after_its_last_part_and_ends_identical(tmp_path, monkeypatch, caplog, name):
    reference = build(write_corpus(passages(), tmp_path / "ref.jsonl"), tmp_path / "ref")
    path = tmp_path / name
    lines = "".join(json.dumps({"id": p.id, "contents": p.contents}) + "\n" for p in passages())
    path.write_bytes(gzip.compress(lines.encode()) if name.endswith(".gz") else lines.encode())
    killed_build(path, tmp_path / "idx", after=30)  # dies inside the third part (parts of 12)
    [work] = building(tmp_path / "idx")
    assert sorted(p.name for p in work.glob("part-?????.arrow")) == ["part-00000.arrow", "part-00001.arrow"]
    resumed = Parsed(monkeypatch)
    with caplog.at_level(logging.INFO, logger=sb.__name__):
        store = build(path, tmp_path / "idx")
    assert f"reusing {work}" in caplog.text and resumed.count == 50 - 24  # the two finished parts not parsed again
    assert list(store) == list(reference) and store.fingerprint == reference.fingerprint
    assert not work.exists() and store.manifest["parts"] == 5


def test_a_failed_build_leaves_no_build_folder_and_a_killed_ones_leftover_is_removed(tmp_path, monkeypatch, caplog):
    path = write_corpus(passages(), tmp_path / "corpus.jsonl")
    with pytest.raises(KeyboardInterrupt):
        Parsed(monkeypatch, fail_after=30)  # Ctrl-C inside the third part (parts of 12)
        build(path, tmp_path / "idx")
    assert not building(tmp_path / "idx")
    monkeypatch.undo()
    killed_build(path, tmp_path / "idx", after=30)
    [leftover] = building(tmp_path / "idx")
    write_corpus(passages(51), path)  # the file changed since: the leftover can never be resumed
    with caplog.at_level(logging.INFO, logger=sb.__name__):
        store = build(path, tmp_path / "idx")
    assert len(store) == 51 and not building(tmp_path / "idx") and f"removing {leftover}" in caplog.text


def edit_between_samples(path) -> None:
    """Turn one letter `a` of a passage's text into `b` where `file_identity` samples nothing, in place (same size
    and inode), then put the mtime back."""
    data, stat = path.read_bytes(), path.stat()
    last = len(data) - ci.BLOCK_BYTES
    sampled = [last * i // (ci.SAMPLED_BLOCKS - 1) for i in range(ci.SAMPLED_BLOCKS)]
    unsampled = (i for i in range(len(data)) if all(not s <= i < s + ci.BLOCK_BYTES for s in sampled))
    at = next(i for i in unsampled if data[i] == ord("a"))
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(b"b")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_corpus_edited_in_place_between_the_sampled_blocks_with_its_mtime_put_back_is_noticed(tmp_path, monkeypatch):
    monkeypatch.setattr(ci, "BLOCK_BYTES", 64)  # 4 blocks of 64 bytes: a 4 kB corpus samples what 64 KiB ones do
    monkeypatch.setattr(ci, "SAMPLED_BLOCKS", 4)  # of a 10 MB one
    path = write_corpus(passages(), tmp_path / "corpus.jsonl")
    first, digest, before = build(path, tmp_path / "idx"), cached_sha256(path, tmp_path / "idx"), file_identity(path)
    edit_between_samples(path)
    after, kept = file_identity(path), ("size", "mtime_ns", "sample_sha256")
    assert [after[k] for k in kept] == [before[k] for k in kept]  # what the quick check saw before: unchanged
    store = build(path, tmp_path / "idx")
    assert list(store) == read_corpus(path) != list(first) and store.directory != first.directory
    assert cached_sha256(path, tmp_path / "idx") != digest  # a run's resume check sees the edit too


def test_a_copied_corpus_is_checked_by_its_sha256_and_its_store_opened_without_a_rebuild(tmp_path, monkeypatch):
    path = write_corpus(passages(), tmp_path / "corpus.jsonl")
    parsed, reads, whole = Parsed(monkeypatch), [], ci.sha256
    monkeypatch.setattr(ci, "sha256", lambda p: reads.append(p) or whole(p))
    first = build(path, tmp_path / "idx")
    assert parsed.count == 50 and len(reads) == 1  # the build records the file's sha256
    shutil.copy2(path, tmp_path / "copy.jsonl")
    os.replace(tmp_path / "copy.jsonl", path)  # same path, size, mtime and content; another inode and ctime
    assert build(path, tmp_path / "idx").directory == first.directory and parsed.count == 50 and len(reads) == 2
    assert build(path, tmp_path / "idx").directory == first.directory and len(reads) == 2  # quick again
    (tmp_path / "elsewhere").mkdir()
    moved = shutil.copy2(path, tmp_path / "elsewhere" / "corpus.jsonl")  # the data root copied to another place
    assert build(moved, tmp_path / "idx").directory == first.directory and parsed.count == 50 and len(reads) == 3


def test_a_corpus_byte_that_is_not_utf8_is_refused_naming_the_file_and_line(tmp_path):
    lines = [json.dumps({"id": p.id, "contents": p.contents}).encode() for p in passages(20)]
    lines[13] = lines[13][:-2] + b"\xff" + lines[13][-2:]  # inside the text
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(DataFormatError, match=r"corpus\.jsonl, line 14: not UTF-8 text") as refused:
        build(path, tmp_path / "idx")
    with pytest.raises(DataFormatError) as read:
        read_corpus(path)
    assert str(refused.value) == str(read.value) and not building(tmp_path / "idx")


def test_a_repeated_passage_id_is_refused_naming_both_lines(tmp_path):
    records = [{"id": "1", "contents": "A\none"}, {"id": "2", "contents": "B\ntwo"}, {"id": "1", "contents": "C\nx"}]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"corpus\.jsonl, line 3: passage id '1' was already given at .*line 1$"):
        build(path, tmp_path / "idx")
    assert not list((tmp_path / "idx" / "corpus").glob("*-*"))  # nothing published, nothing half-built kept


def test_a_dataset_with_an_index_dir_reads_its_corpus_file_through_the_store(tmp_path):
    path = write_corpus(passages(), tmp_path / "corpus.jsonl")
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "q", "question": "Q?", "golden_answers": ["a"]}) + "\n")
    dataset = QADataset("x", "q.jsonl", corpus="corpus.jsonl", root=str(tmp_path), index_dir=str(tmp_path / "idx"))
    assert isinstance(dataset.corpus(), CorpusStore) and list(dataset.corpus()) == read_corpus(path)
    plain = QADataset("x", "q.jsonl", corpus="corpus.jsonl", root=str(tmp_path))
    assert plain.corpus() == read_corpus(path)  # without an index_dir: a list, as before


def test_every_retriever_searches_a_store_as_it_searches_the_list(tmp_path):
    listed = passages(60)
    store = build(write_corpus(listed, tmp_path / "corpus.jsonl"), tmp_path / "idx")
    queries = ["alpha beta gamma", "kappa lambda", "no such words"]

    def make(corpus, cache):
        dense = DenseRetriever(corpus, HashingEmbedder(dim=16), {"use_gpu": False}, cache_dir=str(tmp_path / cache))
        sparse = BM25Retriever(corpus, cache_dir=str(tmp_path / cache))
        return [dense, sparse, FusionRetriever(corpus, dense, sparse, depth=10), TreeHopRetriever(corpus, dense)]

    for on_list, on_store in zip(make(listed, "a"), make(store, "b")):
        assert on_store.passages is store and on_list.passages == listed
        expected = [[(h.passage, h.rank) for h in hits] for hits in on_list.search(queries, 4)]
        assert [[(h.passage, h.rank) for h in hits] for hits in on_store.search(queries, 4)] == expected
    other = build(write_corpus(listed[:59], tmp_path / "short.jsonl"), tmp_path / "idx")
    with pytest.raises(ValueError, match="another corpus"):
        TreeHopRetriever(other, make(store, "b")[0])


def test_a_files_sha256_is_read_once_per_version(tmp_path, monkeypatch):
    path = write_corpus(passages(), tmp_path / "corpus.jsonl")
    reads = []
    monkeypatch.setattr("hoprag.data.corpus_identity.sha256", lambda p: reads.append(p) or "digest")
    assert cached_sha256(path, tmp_path / "idx") == cached_sha256(path, tmp_path / "idx") == "digest"
    write_corpus(passages(49), path)
    cached_sha256(path, tmp_path / "idx")
    assert len(reads) == 2
