"""A bm25s index built in chunks: memory bounded by a chunk of passages and the vocabulary, never the corpus.

bm25s builds its score matrix from every passage's tokens held as Python lists (wiki-18: tens of GB). Here the
texts stream by once: `chunk_size` passages at a time are tokenized (bm25s's own tokenizer, stop words and
stemmer; token ids mapped onto one vocabulary) into token files on disk, while document frequencies and lengths
are counted. Then each chunk's BM25 scores are computed with bm25s's own idf and term-frequency formulas and
appended, cut by column ranges of at most `RANGE_ENTRIES` entries, to one file per range; each range is finally
sorted by column (stably: passages stay ascending) and written in turn into the CSC arrays bm25s searches. Files
are read and written with plain I/O, so at most a chunk or a range is in memory; the arrays open memory-mapped.
The result is a `bm25s.BM25` that scores exactly as bm25s's own index of the same texts.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator
from itertools import chain, islice, pairwise
from pathlib import Path

import numpy as np
import Stemmer

from hoprag.retrieval.bm25s_cpu import bm25s, scoring
from hoprag.retrieval.dense import release_freed_memory

TOKENS, LENGTHS = "tokens-{}.npy", "lengths-{}.npy"
RANGE_ENTRIES = 1 << 23  # score entries sorted at once when the column ranges are merged (~100 MB)


def build_chunked(
    texts: Iterable[str],
    *,
    k1: float,
    b: float,
    method: str,
    stemmer: str | None,
    stopwords: str,
    chunk_size: int = 100_000,
    workdir: str | Path | None = None,
    progress: bool = False,
) -> bm25s.BM25:
    """A bm25s model over `texts` (read once, in order), built in chunks (module docstring). Its score arrays
    live in a scratch folder under `workdir` (default: the system's temporary folder), removed with the model."""
    model = bm25s.BM25(k1=k1, b=b, method=method)
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bm25-build-", dir=workdir))
    weakref.finalize(model, shutil.rmtree, scratch, ignore_errors=True)
    tokenizer = Stemmer.Stemmer(stemmer) if stemmer else None
    vocab: dict[str, int] = {}
    df = np.zeros(0, dtype=np.int64)
    chunks, total_length, n_docs = 0, 0, 0
    for chunk in _chunks(texts, chunk_size):
        tokenized = bm25s.tokenize(chunk, stopwords=stopwords, stemmer=tokenizer, show_progress=progress)
        to_global = np.zeros(max(tokenized.vocab.values(), default=-1) + 1, dtype=np.int64)
        for token, local in sorted(tokenized.vocab.items(), key=lambda item: item[1]):
            to_global[local] = vocab.setdefault(token, len(vocab))
        lengths = np.fromiter(map(len, tokenized.ids), dtype=np.int64, count=len(tokenized.ids))
        flat = np.fromiter(chain.from_iterable(tokenized.ids), dtype=np.int64, count=int(lengths.sum()))
        tokens = to_global[flat] if len(flat) else flat
        np.save(scratch / TOKENS.format(chunks), tokens.astype(np.int32))
        np.save(scratch / LENGTHS.format(chunks), lengths.astype(np.int32))
        _, distinct = _pairs(tokens, lengths, len(vocab))
        df = np.pad(df, (0, len(vocab) - len(df)))
        df += np.bincount(distinct, minlength=len(vocab))
        chunks, total_length, n_docs = chunks + 1, total_length + int(lengths.sum()), n_docs + len(lengths)
        del tokenized
        release_freed_memory()
    if n_docs == 0:
        return model
    average = total_length / n_docs
    frequencies = dict(enumerate(df.tolist()))
    idf_fn, tfc_fn = scoring._select_idf_scorer(model.idf_method), scoring._select_tfc_scorer(model.method)
    idf = scoring._build_idf_array(doc_frequencies=frequencies, n_docs=n_docs, compute_idf_fn=idf_fn, dtype=model.dtype)
    nonoccurrence = None
    if model.method in model.methods_requiring_nonoccurrence:
        nonoccurrence = scoring._build_nonoccurrence_array(
            doc_frequencies=frequencies, n_docs=n_docs, compute_idf_fn=idf_fn, calculate_tfc_fn=tfc_fn,
            l_d=average, l_avg=average, k1=k1, b=b, delta=model.delta, dtype=model.dtype,
        )  # fmt: skip
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    ranges = _column_ranges(indptr, RANGE_ENTRIES)
    first_doc = 0
    for k in range(chunks):
        tokens, lengths = np.load(scratch / TOKENS.format(k)), np.load(scratch / LENGTHS.format(k))
        (docs, terms), tf = _pairs(tokens.astype(np.int64), lengths, len(vocab), counts=True)
        scores = idf[terms] * tfc_fn(
            tf_array=tf.astype(model.dtype), l_d=lengths[docs], l_avg=average, k1=k1, b=b, delta=model.delta
        )
        if nonoccurrence is not None:
            scores -= nonoccurrence[terms]
        order = np.argsort(terms, kind="stable")  # by column, passages ascending within it
        terms, docs, scores = terms[order], docs[order] + first_doc, scores[order].astype(model.dtype)
        cuts = np.searchsorted(terms, ranges).tolist()
        for r, (a, b_) in enumerate(pairwise(cuts)):
            if b_ > a:
                for name, values, dtype in (("terms", terms, np.int32), ("docs", docs, model.int_dtype),
                                            ("scores", scores, model.dtype)):  # fmt: skip
                    with open(scratch / f"range-{r}.{name}", "ab") as f:
                        f.write(values[a:b_].astype(dtype).tobytes())
        first_doc += len(lengths)
        (scratch / TOKENS.format(k)).unlink()
        (scratch / LENGTHS.format(k)).unlink()
        release_freed_memory()
    data = _merge(scratch, "data.npy", "scores", ranges, model.dtype, int(indptr[-1]))
    indices = _merge(scratch, "indices.npy", "docs", ranges, model.int_dtype, int(indptr[-1]))
    model.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": n_docs}
    model.nonoccurrence_array = nonoccurrence
    if "" not in vocab:  # as bm25s's own index() adds it
        vocab[""] = len(vocab)
    model.vocab_dict = vocab
    model.unique_token_ids_set = set(vocab.values())
    return model


def _column_ranges(indptr: np.ndarray, budget: int) -> np.ndarray:
    """Column boundaries (0, ..., n_columns) cutting the matrix into ranges of at most `budget` entries each (a
    column holding more is a range of its own)."""
    cuts, start = [0], 0
    while start < len(indptr) - 1:
        end = int(np.searchsorted(indptr, indptr[start] + budget, side="right")) - 1
        start = max(end, start + 1)
        cuts.append(start)
    return np.asarray(cuts, dtype=np.int64)


def _merge(scratch: Path, name: str, field: str, ranges: np.ndarray, dtype: str, size: int) -> np.ndarray:
    """One CSC array as a `.npy` file, written range after range in column order: each range's entries (appended
    chunk after chunk) sorted by column, stably, so a column's passages stay ascending. Read and written with
    file I/O, so no more than one range is ever in memory; the result is opened memory-mapped."""
    path = scratch / name
    with open(path, "wb") as out:
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (size,)}
        np.lib.format.write_array_header_1_0(out, header)
        for r in range(len(ranges) - 1):
            piece = scratch / f"range-{r}.{field}"
            if not piece.is_file():
                continue
            values = np.fromfile(piece, dtype=dtype)
            terms = np.fromfile(scratch / f"range-{r}.terms", dtype=np.int32)
            out.write(values[np.argsort(terms, kind="stable")].tobytes())
            piece.unlink()
            if field == "docs":  # the last array merged: the range's columns are no longer needed
                (scratch / f"range-{r}.terms").unlink()
    return np.load(path, mmap_mode="r")


def _chunks(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(texts)
    while chunk := list(islice(it, size)):
        yield chunk


def _pairs(
    tokens: np.ndarray, lengths: np.ndarray, vocab_size: int, counts: bool = False
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray] | tuple[None, np.ndarray]:
    """The distinct (passage, token) pairs of a chunk: with `counts`, ((passages, tokens), term frequencies);
    without, (None, the tokens of the pairs) (each token once per passage holding it: its document counts)."""
    docs = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    keys = docs * max(vocab_size, 1) + tokens
    if not counts:
        distinct = np.unique(keys)
        return None, distinct % max(vocab_size, 1)
    distinct, tf = np.unique(keys, return_counts=True)
    return (distinct // max(vocab_size, 1), distinct % max(vocab_size, 1)), tf
