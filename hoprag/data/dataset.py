"""`QADataset`: a question file plus its retrieval corpus, as configured in Hydra.

```yaml
_target_: hoprag.data.QADataset
name: hotpotqa
questions: hotpotqa/hotpot_dev_distractor_185.json
corpus: null          # null: the pooled closed corpus of the questions' contexts
```

Files are loaded on first use, so building the config tree stays cheap.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from hoprag.data.corpus import pool_corpus, read_corpus, unique_passages
from hoprag.data.corpus_store import CorpusStore
from hoprag.data.fetch import ensure_file
from hoprag.data.heldout import held_out, question_key, trained_on
from hoprag.data.loading import load_questions
from hoprag.data.store_build import open_corpus_store
from hoprag.data.types import Passage, QAExample
from hoprag.paths import data_root


class QADataset:
    """Questions (`.examples`) and corpus (`.corpus()`) of one dataset split.

    `questions` / `corpus` are paths relative to the data root (or absolute); `corpus=None` pools the
    questions' own context passages into a closed corpus (TreeHop / HippoRAG setting). `types` keeps the
    questions of those types only (e.g. MultiHop-RAG's `inference_query`, as TreeHop evaluates); `where` keeps
    those whose metadata fields hold the given values (CRAG's `{split: 0}`: the validation portion PruningRAG
    reports). Both drop questions as the file is read, before `limit`. `exclude_trained` (a trained router's or
    classifier's export folder) leaves out, after `limit`, the questions it was trained on (same id, context or
    text: `excluded` counts them), so that the export can be evaluated on the rest of a file it was partly
    trained on. `exclude_questions` leaves out, likewise, the questions with these texts (up to case and spacing):
    those a method shows as few-shot exemplars (`exemplars_excluded` counts them). `limit` keeps the first N
    questions in
    file order (no shuffling, so subsets are nested and reproducible); `sample` then draws N of them at random
    with `seed` (as PruneRAG and TreeRare evaluate 500 random questions), kept in file order. The closed
    corpus always pools every question of the file, so `limit` and `sample` change which questions are asked,
    not how hard retrieval is. `extra_corpus` adds other corpora to this one, deduplicated by id: corpus files
    (paths as `corpus`) or other `QADataset`s (their `.corpus()`), in a list or by name (a config group's dict),
    e.g. every bundled sample's paragraphs as an open corpus where a question's own pool would be too easy
    (`conf/data/2wiki_open.yaml`).

    With `index_dir` (the configs set it to `paths.index_dir`), a corpus file is read through its `CorpusStore`
    there, built on first use and found again by the file's identity: wiki-18's 21M passages are then fetched
    for the hits only, never held. Without it, or when `extra_corpus` joins other corpora to it, the corpus is
    read into a list.
    """

    def __init__(
        self,
        name: str,
        questions: str,
        format: str | None = None,
        corpus: str | None = None,
        root: str | None = None,
        limit: int | None = None,
        sample: int | None = None,
        seed: int = 0,
        types: Sequence[str] | None = None,
        split: str | None = None,
        where: Mapping[str, Any] | None = None,
        extra_corpus: Mapping[str, QADataset | str] | Sequence[QADataset | str] = (),
        index_dir: str | None = None,
        exclude_trained: str | None = None,
        exclude_questions: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.split = split
        self.questions = questions
        self.format = format
        self.corpus_path = corpus
        self.root: Path = data_root(root)
        self.limit = limit
        self.sample = sample
        self.seed = seed
        self.types = None if types is None else set(types)
        self.where = dict(where or {})
        sources = extra_corpus.values() if isinstance(extra_corpus, Mapping) else extra_corpus
        self.extra_corpus = [source for source in sources if source is not None]  # null: a member left out
        self.index_dir = index_dir
        self.exclude_trained = exclude_trained
        self.excluded = 0  # questions left out as the `exclude_trained` model's training questions
        self.exclude_questions = {" ".join(q.lower().split()) for q in exclude_questions}  # as `question_key`
        self.exemplars_excluded = 0  # questions left out as `exclude_questions` (few-shot exemplars)
        self._corpus: list[Passage] | CorpusStore | None = None

    def _load(self, limit: int | None) -> list[QAExample]:
        path = ensure_file(self.questions, self.root)
        keep = self._kept if self.types is not None or self.where else None
        return load_questions(path, format=self.format, dataset=self.name, limit=limit, split=self.split, keep=keep)

    def _kept(self, example: QAExample) -> bool:
        if self.types is not None and example.type not in self.types:
            return False
        return all(example.metadata.get(key) == value for key, value in self.where.items())

    @cached_property
    def examples(self) -> list[QAExample]:
        examples = self._load(self.limit)
        if self.exclude_trained is not None:
            kept = held_out(examples, trained_on(self.exclude_trained))
            self.excluded, examples = len(examples) - len(kept), kept
        if self.exclude_questions:
            kept = [ex for ex in examples if question_key(ex) not in self.exclude_questions]
            self.exemplars_excluded, examples = len(examples) - len(kept), kept
        if self.sample is None:
            return examples
        if not 1 <= self.sample <= len(examples):
            raise ValueError(f"data.sample={self.sample}: {self.questions} has {len(examples)} questions to draw from")
        drawn = sorted(random.Random(self.seed).sample(range(len(examples)), self.sample))
        return [examples[i] for i in drawn]

    def corpus(self) -> list[Passage] | CorpusStore:
        if self._corpus is None:
            if self.corpus_path is None:
                whole = self.limit is None and self.sample is None
                self._corpus = pool_corpus(self.examples if whole else self._load(None))
            elif self.index_dir is not None and not self.extra_corpus:
                self._corpus = open_corpus_store(ensure_file(self.corpus_path, self.root), self.index_dir)
            else:
                self._corpus = read_corpus(ensure_file(self.corpus_path, self.root))
            if self.extra_corpus:
                extra = (p for source in self.extra_corpus for p in self._extra(source))
                self._corpus = unique_passages([*self._corpus, *extra])
        return self._corpus

    def _extra(self, source: QADataset | str) -> Sequence[Passage] | CorpusStore:
        return source.corpus() if isinstance(source, QADataset) else read_corpus(ensure_file(source, self.root))

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self) -> Iterator[QAExample]:
        return iter(self.examples)

    def __repr__(self) -> str:
        return f"QADataset(name={self.name!r}, questions={self.questions!r}, root={str(self.root)!r})"

