"""The TreeHop method and retriever over a real FAISS index (hash embeddings, so no model is loaded)."""

from __future__ import annotations

import zlib
from functools import partial

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import TreeHopMethod
from hoprag.retrieval import DenseRetriever, Embedder
from hoprag.treehop import TreeHop, TreeHopRetriever
from tests.scripts import load_script

CORPUS = [Passage(f"p{i}", f"Title {i % 15}", f"passage number {i}") for i in range(30)]
EXAMPLES = [
    QAExample(f"q{i}", f"question {i}", ["x"], type=t, supporting_titles=[f"Title {i}", f"Title {i + 3}"])
    for i, t in enumerate(["compositional", "comparison", "bridge_comparison", "inference"])
]


class HashEmbedder(Embedder):
    dim = 12

    def __init__(self):
        super().__init__("hash", "hash")

    def _encode(self, texts, batch_size):
        return np.stack([np.random.default_rng(zlib.crc32(t.encode())).normal(size=self.dim) for t in texts])


@pytest.fixture
def dense():
    return DenseRetriever(CORPUS, HashEmbedder(), index={"use_gpu": False})


@pytest.fixture
def ckpt(tmp_path):
    torch.manual_seed(0)
    model = TreeHop(12)
    meta = {"config": model.config, "embedder": HashEmbedder().describe_encoding()}
    torch.save({**meta, "state_dict": model.state_dict()}, tmp_path / "treehop.pt")
    return str(tmp_path)


def test_method_reports_every_variant_per_hop_for_table_questions(dense, ckpt):
    search = partial(TreeHopRetriever, ckpt=ckpt)
    method = TreeHopMethod(llm=ScriptedLLM(default_reply="x"), retriever=dense, search=search, top_k=3, n_hops=2)
    costs = [Cost() for _ in EXAMPLES]
    outputs = method.answer(EXAMPLES, costs)
    assert [o.prediction for o in outputs] == [""] * 4  # retrieval only: no LLM call
    assert outputs[1].stats == {}  # comparison questions are outside the table
    stats = outputs[0].stats
    assert stats["gold"] == 2
    for variant, hops in (("direct@3", 1), ("direct@6", 1), ("q-c@3", 3), ("untrained@3", 3), ("treehop@3", 3)):
        assert f"{variant}/hop{hops}/recall" in stats and f"{variant}/hop{hops + 1}/k" not in stats
    assert stats["direct@6/hop1/k"] == 6 and stats["treehop@3/hop1/k"] == 3
    assert stats["treehop@3/hop1/recall"] <= stats["treehop@3/hop2/recall"] <= stats["treehop@3/hop3/recall"]
    assert stats["direct@6/hop1/recall"] == 100 * stats["direct@6/hop1/hits"] / 2  # a percentage, as every rate
    for out, cost in zip(outputs, costs):
        assert len(out.retrieved) == len({p.id for p in out.retrieved}) <= 6
        assert [p.id for p in out.retrieved] == [pid for hop in out.trace["hops"][:2] for pid in hop]
        assert cost.retrieval_calls == 2 and cost.llm_calls == 0
    direct = dense.search([ex.question for ex in EXAMPLES], 3)
    assert [out.trace["hops"][0] for out in outputs] == [[h.passage.id for h in hits] for hits in direct]


def test_generation_feeds_the_tree_passages_to_the_llm(dense, ckpt):
    from hoprag.methods import ChatPrompt

    llm = ScriptedLLM(default_reply="Paris")
    prompt = ChatPrompt("Answer.", "{passages}\n\nQuestion: {question}")
    search = partial(TreeHopRetriever, ckpt=ckpt)
    method = TreeHopMethod(llm=llm, retriever=dense, search=search, compare=False, generate=True, prompt=prompt)
    [out] = method.answer(EXAMPLES[:1], [Cost()])
    assert out.prediction == "Paris" and len(llm.calls) == 1
    assert all(f"Title: {p.title}" in str(llm.calls[0]) for p in out.retrieved)


def test_retriever_returns_the_tree_and_refuses_another_embedders_checkpoint(dense, ckpt, tmp_path):
    retriever = TreeHopRetriever(CORPUS, dense, ckpt=ckpt, n_hops=2)
    [hits] = retriever.search(["question 0"], 4)
    assert 4 < len(hits) <= 8 and [h.rank for h in hits] == list(range(1, len(hits) + 1))
    without = TreeHopRetriever(CORPUS, dense, ckpt=None, n_hops=1)
    assert [h.passage.id for h in without.search(["question 0"], 4)[0]] == [
        h.passage.id for h in dense.search(["question 0"], 4)[0]
    ]
    model = TreeHop(12)
    torch.save({"config": model.config, "embedder": {"embedder": "bge-m3"}, "state_dict": model.state_dict()},
               tmp_path / "other.pt")  # fmt: skip
    with pytest.raises(ValueError, match="trained on bge-m3"):
        TreeHopRetriever(CORPUS, dense, ckpt=str(tmp_path / "other.pt"))


def test_method_and_retriever_configs_compose(compose_cfg):
    cfg = compose_cfg("eval", ["+method=treehop", "retriever=treehop"])
    method = instantiate(cfg.method)
    assert method.func is TreeHopMethod and method.keywords["top_k"] == 5
    assert method.keywords["search"].func is TreeHopRetriever and method.keywords["search"].keywords["ckpt"] is None
    retriever = instantiate(cfg.retriever)
    assert retriever.func is TreeHopRetriever and callable(retriever.keywords["dense"])


def test_table_script_computes_micro_recall_from_the_stats():
    script = load_script("runs/eval_treehop.py")
    metrics = {"method/gold": 2.0, "method/direct@5/hop1/hits": 1.0, "method/direct@5/hop1/recall": 60.0,
               "method/direct@5/hop1/k": 5.0, "method/direct@5/hop1/seconds": 0.01}  # fmt: skip
    row = script.table(metrics).splitlines()[-1]
    assert row.startswith("direct@5") and "50.0 / 60.0 / 5.0" in row


def test_table_script_compares_each_hop_with_direct_top_10_question_by_question():
    script = load_script("runs/eval_treehop.py")
    # 4 questions with 2 gold titles each: treehop finds one more title than direct@10 on the first question only
    records = [{"gold": 2.0, "direct@10/hop1/hits": 1.0, "treehop@5/hop2/hits": 2.0 if i == 0 else 1.0} for i in range(4)]
    lines = script.paired(records, "direct@10").splitlines()
    assert lines[0].startswith("paired over 4 questions") and "direct@10/hop1" in lines[0]
    (row,) = lines[1:]
    assert row.startswith("treehop@5/hop2") and "+12.5" in row and row.endswith("1/0")  # 1 title of 8 = 12.5 points
    assert "no per-question" in script.paired(records, "direct@20")


def test_a_retriever_without_vectors_is_refused_clearly():
    from hoprag.retrieval import BM25Retriever

    with pytest.raises(TypeError, match="needs retriever=dense or retriever=treehop"):
        TreeHopMethod(llm=ScriptedLLM(), retriever=BM25Retriever(CORPUS))
