"""A refusal that the method's settings and the data decide alone comes before any index is built or model
loaded (issue 44 item 9): `+method=cot` over data without few-shot exemplars is refused by `build` before the
retriever reads the corpus."""

from __future__ import annotations

import pytest
from hoprag.evaluation.runner import build


class UnreadDataset:
    """A dataset whose corpus a refused build must never read (reading it is where an index build starts)."""

    def corpus(self):
        raise AssertionError("the corpus was read before the method's settings were checked")


@pytest.mark.parametrize("overrides", [
    ["+method=cot", "data=bamboogle"],  # no exemplars for bamboogle
    ["+method=self_consistency", "data=hotpotqa", "method.samples=0"],
])  # fmt: skip
def test_a_setting_refusal_comes_before_the_retriever_and_the_llm(compose_cfg, monkeypatch, overrides):
    cfg = compose_cfg("eval", [*overrides, "llm=scripted"])
    built = []  # what `build` instantiated (the method's factory, the LLM, the retriever) before refusing
    monkeypatch.setattr("hoprag.evaluation.runner.instantiate", lambda node, *a, **k: built.append(node._target_))
    with pytest.raises(ValueError, match="exemplars for data 'bamboogle'|samples must be positive"):
        build(cfg, UnreadDataset())
    assert built == []
