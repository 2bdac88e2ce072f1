"""Word-window chunking of passages, to build candidate pools with the redundancy of the paper's corpora.

HotpotQA, 2Wiki and MuSiQue give one short paragraph per article, so a fused pool rarely holds two
passages of one article. Corpora cut into (overlapping) word windows, like wiki-18's 100-word passages,
give one article several near-duplicate passages: the case MMKP's groups and redundancy cost are for.
Chunks keep their article's title, so gold recall stays title-level (an article is found once any of its
chunks is).
"""

from __future__ import annotations

from collections.abc import Iterable

from hoprag.data.types import Passage


def windows(n: int, words: int, stride: int) -> list[tuple[int, int]]:
    """[start, end) word windows of `words` every `stride` words over n words; the last window ends at n
    (so a text of ≤ `words` words is one window, and no word is left out)."""
    if words < 1 or not 1 <= stride <= words:
        raise ValueError(f"need words ≥ 1 and 1 ≤ stride ≤ words, got words={words}, stride={stride}")
    if n <= words:
        return [(0, n)]
    spans = [(start, start + words) for start in range(0, n - words + 1, stride)]
    if spans[-1][1] < n:
        spans.append((n - words, n))
    return spans


def chunk_passages(passages: Iterable[Passage], words: int = 100, stride: int | None = None) -> list[Passage]:
    """Each passage cut into `words`-word windows every `stride` words (None: `words`, disjoint chunks as
    wiki-18); chunk k of passage `id` is `id#k`, with the passage's title and origin."""
    stride = words if stride is None else stride
    out = []
    for p in passages:
        tokens = p.text.split()
        for k, (start, end) in enumerate(windows(len(tokens), words, stride)):
            out.append(Passage(f"{p.id}#{k}", p.title, " ".join(tokens[start:end]), p.origin))
    return out
