"""The benchmark corpus: the paragraphs of every bundled multi-hop sample (dev and train), repeated with new ids
(`<id>#copy<n>`) to any size, and their real questions. For measuring index builds and searches at scale."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from hoprag.data.corpus import pool_corpus
from hoprag.data.loading import load_questions
from hoprag.data.types import Passage, QAExample
from hoprag.paths import data_root

BUNDLED_QA = (
    "hotpotqa/hotpot_dev_distractor_185.json",
    "hotpotqa/hotpot_train_99.json",
    "2wikimultihopqa/dev_159.json",
    "2wikimultihopqa/train_500.json",
    "musique/musique_ans_dev_200.jsonl",
    "musique/musique_ans_train_98.jsonl",
)


def bundled_examples(root: Path | None = None) -> list[QAExample]:
    root = data_root() if root is None else root
    return [ex for name in BUNDLED_QA for ex in load_questions(root / name)]


def repeated(pool: Sequence[Passage], n: int) -> Iterator[Passage]:
    """`n` passages: `pool` in order, then again and again as `<id>#copy<k>` (same title and text)."""
    for i in range(n):
        p = pool[i % len(pool)]
        yield p if i < len(pool) else Passage(f"{p.id}#copy{i // len(pool)}", p.title, p.text)


def bench_corpus(n: int, root: Path | None = None) -> tuple[list[Passage], list[str]]:
    """`n` passages repeated from the bundled samples' pooled paragraphs, and the samples' questions."""
    examples = bundled_examples(root)
    return list(repeated(pool_corpus(examples), n)), [ex.question for ex in examples]
