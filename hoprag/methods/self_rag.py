"""Self-RAG inference (Asai et al. 2023): reflection tokens decide retrieval and score segments, beam over them.

    python eval.py +method=self_rag data=hotpotqa llm=hf llm.model=selfrag/selfrag_llama2_7b llm.chat_template=false
    python eval.py +method=self_rag data=hotpotqa method.max_depth=7   # long form: beam 2 over up to 7 segments

Per batch, each step one call for every active question: (1) the retrieve decision, one token after the
instruction, retrieving when P([Retrieval]) / (P([Retrieval]) + P([No Retrieval])) > `threshold`; a question
that does not retrieve answers after "[No Retrieval]". (2) The others retrieve the top `k` passages once
(the official "static" retrieval), then (3) at each depth every unfinished beam path writes one segment per
passage ("[Retrieval]<paragraph>title\\ntext</paragraph>" after the path so far), all in one call; segments
are scored by `hoprag.search.self_rag` and the `beam_width` best paths stay (finished ones compete too).
`max_depth` 1 is the short form (one segment per passage, the best one answers); a path still asking for
retrieval at `max_depth` is a loop exit (`max_depth_reached`). Reading the reflection tokens needs their
log-probs (`candidate_logprobs`: llm=hf or llm=vllm); a model without them runs with counted fallbacks.
vLLM returns only the top `top_logprobs` log-probs per position, so the reflection tokens are read among
them: the official code asks for 5,000 (`SamplingParams(..., logprobs=5000)` in run_short_form.py), and the
LLM is told before the first call (`LLM.require_top_logprobs`), so its engine starts with that
`max_logprobs` (vLLM's default, 20, would leave most reflection tokens unscored) or the run is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ContextPrompt, PassageFormat
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.self_rag import (
    DECISION,
    NO_RETRIEVE,
    REFLECTION,
    RETRIEVE,
    Path,
    Weights,
    clean,
    decide,
    instruction,
    read_segment,
    top_paths,
)
from hoprag.search.steps import llm_step, one_by_one, retrieval_step


class SelfRAG(Method):
    """Settings as in PruningRAG Table 7 (`beam_width`, `max_depth`, the weights, `threshold`); `k` passages
    (≈ 5 in Self-Correcting RAG's comparison); `generation` is the sampling of every segment and answer;
    `top_logprobs` the log-probs per position the reflection tokens are read among (the official 5,000)."""

    name = "self_rag"

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        k: int = 5,
        threshold: float = 0.2,
        beam_width: int = 2,
        max_depth: int = 1,
        w_rel: float = 1.0,
        w_sup: float = 1.0,
        w_use: float = 0.5,
        use_seqscore: bool = True,
        passage_template: str = "{title}\n{text}",
        batching: str = "step",
        top_logprobs: int = 5000,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.check_sizes(k, beam_width, max_depth, top_logprobs)
        llm.require_top_logprobs(top_logprobs)
        self.k, self.threshold, self.beam_width, self.max_depth = k, threshold, beam_width, max_depth
        self.weights = Weights(w_rel, w_sup, w_use, use_seqscore)
        self.passages = PassageFormat(passage_template)
        self.one_by_one = one_by_one(batching)

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """The sizes and `batching`, as the constructor checks them."""
        sizes = ("k", "beam_width", "max_depth", "top_logprobs")
        cls.check_sizes(**{name: setting(cls, settings, name) for name in sizes})
        one_by_one(setting(cls, settings, "batching"))

    @staticmethod
    def check_sizes(k: int, beam_width: int, max_depth: int, top_logprobs: int) -> None:
        if k < 1 or beam_width < 1 or max_depth < 1 or top_logprobs < 1:
            raise ValueError(
                f"method.k, beam_width, max_depth and top_logprobs must be positive, got {k}, {beam_width}, "
                f"{max_depth}, {top_logprobs}"
            )

    def required_capabilities(self) -> dict[str, str]:
        needs = {"candidate_logprobs": "an in-process backend, llm=hf or llm=vllm (a served API does not expose them)"}
        if self.weights.use_seqscore:
            needs["logprobs"] = "method.use_seqscore=false"
        return needs

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        prompts = [instruction(ex.question) for ex in examples]
        firsts = self._generate(prompts, costs, "decision", max_new_tokens=1, candidates=DECISION)
        traces: list[dict[str, Any]] = []
        for g in firsts:
            retrieve, share = decide(g.candidate_logprobs[0] if g.candidate_logprobs else None, g.text, self.threshold)
            traces.append({"retrieve": retrieve, "p_retrieve": share, "decision_output": g.text})
        asked = [i for i, t in enumerate(traces) if t["retrieve"]]
        outputs = self._without_retrieval(examples, costs, prompts, traces)
        hits = retrieval_step(
            self.retriever, [examples[i].question for i in asked], self.k, [costs[i] for i in asked],
            one_by_one=self.one_by_one,
        )  # fmt: skip
        passages = {i: [h.passage for h in found] for i, found in zip(asked, hits)}
        for i, path, counts in self._beam(prompts, passages, costs, traces):
            extraction = self.extractor(path.answer)
            traces[i] |= {"output": path.answer, "path": [pid for _, pid in path.segments], "score": path.score}
            stats = {"retrieve": 1.0, "retrieval_calls": 1.0, "depth": float(len(path.segments)), **counts}
            outputs[i] = MethodOutput(extraction.answer, passages[i], traces[i], extraction.failed, stats)
        for out, trace in zip(outputs, traces):
            out.stats["decision_unscored"] = float(trace["p_retrieve"] is None)
        return outputs

    def _generate(self, prompts: Sequence[Any], costs: Sequence[Cost], stage: str, **params: Any) -> list:
        """One step: the reflection tokens kept in the text and scored at every position."""
        params = {"candidates": REFLECTION, "keep_special_tokens": True, **self.generation, **params}
        return llm_step(self.llm, prompts, costs, stage, one_by_one=self.one_by_one, **params)

    def _without_retrieval(
        self, examples: Sequence[QAExample], costs: Sequence[Cost], prompts: list[str], traces: list[dict]
    ) -> list[MethodOutput | None]:
        """The answers of the questions that did not retrieve: generated after "[No Retrieval]"."""
        outputs: list[MethodOutput | None] = [None] * len(examples)
        skip = [i for i, t in enumerate(traces) if not t["retrieve"]]
        gens = self._generate([prompts[i] + NO_RETRIEVE for i in skip], [costs[i] for i in skip], "answer")
        for i, g in zip(skip, gens):
            extraction = self.extractor(clean(g.text))
            traces[i]["output"] = g.text
            stats = {"retrieve": 0.0, "retrieval_calls": 0.0, "depth": 0.0, "segments": 0.0, "max_depth_reached": 0.0}
            stats |= {"unscored_reflections": 0.0, "reflections_not_emitted": 0.0}
            outputs[i] = MethodOutput(extraction.answer, [], traces[i], extraction.failed, stats)
        return outputs

    def _beam(
        self, prompts: list[str], passages: dict[int, list[Passage]], costs: Sequence[Cost], traces: list[dict]
    ) -> list[tuple[int, Path, dict[str, float]]]:
        """Segment-level beam search for every retrieving question at once: one LLM call per depth."""
        beams = {i: [Path()] for i in passages}
        counts = {i: {"segments": 0.0, "unscored_reflections": 0.0, "reflections_not_emitted": 0.0} for i in passages}
        for i in passages:
            traces[i]["steps"] = []
        for depth in range(1, self.max_depth + 1):
            todo = [(i, path, p) for i, beam in beams.items() for path in beam if not path.done for p in passages[i]]
            if not todo:
                break
            gens = self._generate(
                [self._segment_prompt(prompts[i], path, p) for i, path, p in todo], [costs[i] for i, _, _ in todo],
                "segment",
            )  # fmt: skip
            children: dict[int, list[Path]] = {i: [p for p in beams[i] if p.done] for i in beams}
            steps: dict[int, list[dict]] = {}
            for (i, path, passage), g in zip(todo, gens):
                segment = read_segment(g, self.weights, self.threshold)
                children[i].append(path.extend(segment, passage.id))
                counts[i]["segments"] += 1
                counts[i]["unscored_reflections"] += segment.unscored
                counts[i]["reflections_not_emitted"] += segment.not_emitted
                steps.setdefault(i, []).append({"passage": passage.id, "output": g.text, **segment.to_dict()})
            for i, found in steps.items():
                beams[i] = top_paths(children[i], self.beam_width)
                traces[i]["steps"].append({"depth": depth, "segments": found, "beam": [p.score for p in beams[i]]})
        results = []
        for i, beam in beams.items():
            counts[i]["max_depth_reached"] = float(not beam[0].done)
            results.append((i, beam[0], counts[i]))
        return results

    def _segment_prompt(self, prompt: str, path: Path, passage: Passage) -> ContextPrompt:
        """The instruction, the path's segments, then the passage as the shortenable context."""
        head = f"{prompt}{path.text}{RETRIEVE}<paragraph>"
        return ContextPrompt(lambda text: f"{head}{text}</paragraph>", self.passages.context([passage]))
