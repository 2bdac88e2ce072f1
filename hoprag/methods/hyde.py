"""HyDE baseline (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval without Relevance Labels"): the LLM
writes hypothetical passages answering the question, retrieval searches with them, and the answer is read
from the top k as in standard RAG.

    python eval.py +method=hyde data=hotpotqa [retriever=dense] [method.n_passages=8]

The writing prompt is PruningRAG's HyDE prompt (a "scientific paper passage" answering the question, given
the query time: spec/pruningrag.md §7); the time line is added only for questions whose metadata has a
`query_time` (CRAG), other questions get the prompt without it. How the passages become the search:

- a dense retriever (`retriever=dense`; under `+pruning=`, the routed web pages): as in the HyDE paper
  (§3.2, eq. 6) and its code, each passage is encoded on the *document* side (the embedder's passage encoding:
  its passage template, no query prefix) and the vectors are averaged with the question's query vector
  (`include_question`), one vector search;
- any other retriever (bm25, rrf, treehop): one text query, the question and the passages concatenated
  (HyDE defines no lexical form; concatenation is the text analogue of the average).

The writing step (`write_passages`) is separate from the retrieval it feeds (`search`), so another source
of passages can take the retrieval's place. `batching=question` makes one LLM call and one search per
question (the benchmark's baseline), `step` one of each for the whole batch.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hoprag.cost import Cost, charge_evenly
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt
from hoprag.methods.base import MethodOutput, setting
from hoprag.methods.standard_rag import StandardRAG
from hoprag.retrieval.retrievers import Hit, Retriever
from hoprag.search.mcts import sample_seed
from hoprag.search.steps import llm_samples, one_by_one, retrieval_step

# HyDE's official settings (texttron/hyde README): 8 samples at temperature 0.7, up to 512 tokens each
HYDE_SAMPLING = {"max_new_tokens": 512, "temperature": 0.7, "top_p": 1.0, "stop": ["\n\n\n"]}



def searches_vectors(retriever: Retriever) -> bool:
    """Whether the retriever ranks by a query vector of its embedder (a dense index, or "+ Pruning"'s routed
    web pages), so HyDE can search with its averaged vector; otherwise it searches with one text query."""
    return hasattr(retriever, "search_vectors") and hasattr(retriever, "embedder")

class HyDE(StandardRAG):
    """`writer` (user template fields {question}, {time}) writes `n_passages` hypothetical passages per
    question with `writer_generation` (n > 1 needs temperature > 0) and per-question seeds from `seed`
    (null: unseeded); `time_template` ({query_time}) is the
    {time} line of CRAG questions. `prompt`, `k` and `passage_template` read the answer as standard RAG."""

    name = "hyde"

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        prompt: ChatPrompt,
        writer: ChatPrompt,
        time_template: str = "Query time: {query_time}\n",
        n_passages: int = 8,
        include_question: bool = True,
        writer_generation: Mapping[str, Any] | None = None,
        seed: int | None = 0,
        batching: str = "step",
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, prompt, **kwargs)
        self.check_n_passages(n_passages)
        self.writer = writer
        self.time_template = time_template
        self.n_passages = n_passages
        self.include_question = include_question
        sampling = HYDE_SAMPLING if writer_generation is None else writer_generation
        self.writer_generation = {**dict(sampling), "n": n_passages}
        self.seed = seed
        self.one_by_one = one_by_one(batching)

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """`n_passages` and `batching`, as the constructor checks them."""
        cls.check_n_passages(setting(cls, settings, "n_passages"))
        one_by_one(setting(cls, settings, "batching"))

    @staticmethod
    def check_n_passages(n_passages: int) -> None:
        if n_passages < 1:
            raise ValueError(f"method.n_passages must be positive, got {n_passages}")

    def required_capabilities(self) -> dict[str, str]:
        """Several passages per prompt from one request need a server that honours `n`."""
        return {"n": "method.n_passages=1, or a server that returns n choices"} if self.n_passages > 1 else {}

    def writer_prompt(self, example: QAExample) -> list[dict[str, str]]:
        query_time = example.metadata.get("query_time")
        time_line = self.time_template.format(query_time=query_time) if query_time else ""
        return self.writer(question=example.question, time=time_line)

    def write_passages(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[list[str]]:
        """`n_passages` hypothetical passages per question (stage "hyde"), sampled with the question's own seed
        (so they do not depend on the batch)."""
        prompts = [self.writer_prompt(ex) for ex in examples]
        seeds = None if self.seed is None else [sample_seed(self.seed, ex.question, 0) for ex in examples]
        samples = llm_samples(self.llm, prompts, costs, "hyde", self.one_by_one, seeds=seeds, **self.writer_generation)
        return [[g.text.strip() for g in question] for question in samples]

    def search(
        self, examples: Sequence[QAExample], passages: Sequence[Sequence[str]], costs: Sequence[Cost]
    ) -> list[list[Hit]]:
        """The top k for each question's passages: one averaged vector (dense), else one text query."""
        if searches_vectors(self.retriever):
            return self._search_dense(examples, passages, costs)
        queries = [self._text_query(ex, written) for ex, written in zip(examples, passages)]
        return retrieval_step(self.retriever, queries, self.k, costs, one_by_one=self.one_by_one)

    def _text_query(self, example: QAExample, written: Sequence[str]) -> str:
        return "\n".join([example.question, *written] if self.include_question else written)

    def _search_dense(
        self, examples: Sequence[QAExample], passages: Sequence[Sequence[str]], costs: Sequence[Cost]
    ) -> list[list[Hit]]:
        """HyDE's vector: the mean of the passages' document-side vectors (and the question's query vector);
        the encoding time is charged to the questions under "hyde_encode"."""
        retriever: Any = self.retriever  # a DenseRetriever, or routed sources that rank by vector
        started = time.perf_counter()
        vectors = []
        for ex, written in zip(examples, passages):
            hypothetical = [Passage(f"hyde:{ex.id}:{i}", "", text) for i, text in enumerate(written)]
            docs = retriever.embedder.encode_passages(hypothetical)
            if self.include_question:
                docs = np.vstack([docs, retriever.embedder.encode_queries([ex.question])])
            vectors.append(docs.mean(axis=0))
        share = charge_evenly(costs, time.perf_counter() - started)
        for cost in costs:
            cost.seconds["hyde_encode"] += share
        if self.one_by_one:
            return [retriever.search_vectors(v[None], self.k, costs=[c])[0] for v, c in zip(vectors, costs)]
        return retriever.search_vectors(np.stack(vectors), self.k, costs=costs)

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        written = self.write_passages(examples, costs)
        hits = self.search(examples, written, costs)
        retrieved = [[h.passage for h in question] for question in hits]
        prompts = [self.context_prompt(ex, passages) for ex, passages in zip(examples, retrieved)]
        outputs = self._final_answers(prompts, costs, retrieved, self.one_by_one)
        for out, question, passages in zip(outputs, hits, written):
            out.trace["hypothetical_passages"] = passages
            out.trace["passages"] = [h.passage.id for h in question]
            out.trace["scores"] = [round(h.score, 4) for h in question]
            out.stats = {"hypothetical_passages": float(len(passages)), "retrieval_calls": 1.0,
                         "empty_passages": float(sum(not t for t in passages))}  # fmt: skip
        return outputs
