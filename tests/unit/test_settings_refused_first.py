"""A refusal that the method's settings and the data decide alone comes before any index is built or model
loaded (issue 44 item 9): `build` refuses, e.g., `+method=cot` over data without few-shot exemplars, or a
PruneRAG builder without room for a node, before the retriever reads the corpus, with the constructor's (or
its engine's) own message; with `+pruning=`, the pruning's settings against the framework's too."""

from __future__ import annotations

import pytest
from hoprag.evaluation.runner import build


class UnreadDataset:
    """A dataset whose corpus a refused build must never read (reading it is where an index build starts)."""

    def corpus(self):
        raise AssertionError("the corpus was read before the method's settings were checked")


@pytest.mark.parametrize("overrides, message", [
    (["+method=cot", "data=bamboogle"], "exemplars for data 'bamboogle'"),
    (["+method=self_consistency", "data=hotpotqa", "method.samples=0"], "samples must be positive"),
    (["+method=hyde", "data=hotpotqa", "method.n_passages=0"], "method.n_passages must be positive"),
    (["+method=ircot", "data=hotpotqa", "method.max_paragraphs=2"], r"max_paragraphs \(2\) must be at least k \(4\)"),
    # the turn loop's, for every turn method
    (["+method=react", "data=hotpotqa", "method.max_turns=0"], "max_turns and k must be positive"),
    (["+method=iter_retgen", "data=hotpotqa", "method.rounds=0"], "rounds must be positive"),
    (["+method=probtree", "data=hotpotqa", "method.max_nodes=0"], "method.max_nodes must be at least 1"),
    (["+method=probtree", "data=hotpotqa", "method.confidence=answer"], "method.confidence must be one of"),
    (["+method=self_rag", "data=hotpotqa", "method.beam_width=0"], "beam_width, max_depth and top_logprobs"),
    (["+method=pruningrag", "data=crag", "method.strategy=fallback", "method.fixed=[llm]"],
     "strategy=fallback asks the LLM alone first"),
    (["+method=pruningrag", "data=crag", "method.strategy=fixed", "method.fixed=[api]"],  # its source pruning's
     r"fixed sources \['api'\] are not configured"),
    (["+method=tree_retrieval", "data=hotpotqa", "method.task=long"], "task must be one of"),
    (["+method=treehop", "data=hotpotqa", "method.generate=true", "method.prompt=null"],
     "generate=true needs a prompt"),
    (["+method=prunerag", "data=hotpotqa", "method.builder.max_nodes=0"],
     "method.builder.max_nodes must be at least 1"),
    (["+method=prunerag", "data=hotpotqa", "method.batching=level"], "batching must be one of"),  # the builder's
    (["+method=prunerag", "data=hotpotqa", "method.aggregator.mode=vote"], "aggregation must be one of"),
    (["+method=treerare", "data=hotpotqa", "method.search.evidence_scope=parents"], "evidence_scope must be one of"),
    (["+method=treerare", "data=hotpotqa", "method.tree=pt"], "tree must be one of"),
    (["+method=standard_rag", "+pruning=routed", "data=crag", "pruning.strategy=fallback"],
     "the LLM-first fallback is PruningRAG's own"),
    (["+method=standard_rag", "+pruning=fixed", "data=crag", "pruning.fixed=[api]"],
     r"fixed sources \['api'\] are not configured"),
    (["+method=cot", "method.with_documents=false", "method.mode=zero_shot", "+pruning=fixed", "data=crag"],
     "CoT with these settings reads none"),
    (["+method=hyde", "method.n_passages=0", "+pruning=routed", "data=crag"], "method.n_passages must be positive"),
    (["+method=rrr", "data=hotpotqa", "method.batching=node"], "method.batching must be 'step' or 'question'"),
    # the domain classifier's, through the source pruning of PruningRAG and of "+ Pruning"
    (["+method=pruningrag", "data=crag", "method.domain=bert"],
     r"domain must be one of \('gold', 'llm', 'embedding'\) or a classifier object, got 'bert'"),
    (["+method=standard_rag", "+pruning=routed", "data=crag", "pruning.domain=embedding"],
     "domain=embedding needs domain_export"),
    # a child's config that sets what the method completes it with (`complete`'s refusal): a method's own
    # child, a child of a method without a `check_settings` of its own, the pruning's router and framework
    (["+method=prunerag", "data=hotpotqa", "+method.builder.max_depth=2"],
     r"method.builder sets \['max_depth'\], which the method itself passes to it"),
    (["+method=sc_rag_select", "data=hotpotqa", "+method.selector.token_counter=words"],
     r"method.selector sets \['token_counter'\], which the method itself passes to it"),
    (["+method=pruningrag", "data=crag", "+method.router.llm=smollm2"],
     r"method.router sets \['llm'\], which the method itself passes to it"),
    (["+method=standard_rag", "+pruning=fixed", "data=crag", "+method.retriever=bm25"],
     r"method.method sets \['retriever'\], which the method itself passes to it"),
])  # fmt: skip
def test_a_setting_refusal_comes_before_the_retriever_and_the_llm(compose_cfg, monkeypatch, overrides, message):
    refused_before_anything_is_built(compose_cfg, monkeypatch, overrides, ValueError, message)


def test_a_missing_domain_classifier_export_is_refused_before_anything_is_built(compose_cfg, monkeypatch, tmp_path):
    """A path decides it: no export there (its router.json) is refused as the domain classifier refuses it."""
    missing = tmp_path / "no_export"
    overrides = ["+method=pruningrag", "data=crag", "method.domain=embedding", f"method.domain_export={missing}"]
    refused_before_anything_is_built(compose_cfg, monkeypatch, overrides, FileNotFoundError,
                                     "is not a domain classifier export: it has no router.json")  # fmt: skip


def refused_before_anything_is_built(compose_cfg, monkeypatch, overrides, error, message):
    cfg = compose_cfg("eval", [*overrides, "llm=scripted"])
    built = []  # what `build` instantiated (the method's factory, the LLM, the retriever) before refusing
    monkeypatch.setattr("hoprag.evaluation.runner.instantiate", lambda node, *a, **k: built.append(node._target_))
    with pytest.raises(error, match=message):
        build(cfg, UnreadDataset())
    assert built == []
