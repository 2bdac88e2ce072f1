"""Every conf/hparams_search objective is a quantity its searched knobs move (issue 33, item 5): two trials of each
search, at two points of its space, on a few training questions with the scripted LLM and the hashing embedder,
return objectives that differ in every component. (MMKP's second objective used to be the front end's
`cost/mean/passages_read`, 330.1 in every trial: it now counts what the selector selected.)

The scripted LLM's replies are fixed per prompt, so a quality objective moves only where the knob changes what the
LLM is asked: PruneRAG's rules answer every decision with a confident "yes" (accepted at τ_A 0.5, refused at 0.99),
and its final prompt with the tree's accepted answer, or "no" when none was accepted. MCTS samples the same
answers however long it searches, so its F1 is checked to be an answer metric the run reports, its LLM calls to
move. The grid (`rag_grid`) has no objective: it is compared, not optimised."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from hoprag.paths import PROJECT_ROOT

SCRIPTED = ["llm=scripted", "embedder=hashing", "~logger", "show=0", "progress=false"]
# replies that complete the small-model overlay's prefills (aids=small_model): `{"type": "` and `\boxed{`
PRUNERAG_RULES = [
    ["Parent query:", 'answer", "answer": "yes"}', -0.05],  # every decision: answer "yes", confidence ~0.95
    ['Inference Tree[\\s\\S]*"answer": "yes"', "yes}", -0.1],  # the final answer: the tree's accepted one
    ["Inference Tree", "no}", -0.1],
]


def entry_main(script: str):
    spec = importlib.util.spec_from_file_location(f"{script}_entry", PROJECT_ROOT / f"{script}.py")
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    return entry.main.__wrapped__



@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def trial(eval_main, compose_cfg, cache: Path, run_dir: Path, search: str, *overrides: str, rules=None):
    cfg = compose_cfg("eval", [f"+hparams_search={search}", *SCRIPTED, *overrides])
    cfg.paths.output_dir, cfg.paths.cache_dir = str(run_dir), str(cache)
    if rules is not None:
        cfg.llm.rules = rules
    value = eval_main(cfg)
    return value if isinstance(value, tuple) else (value,)


def assert_each_moves(first: tuple, second: tuple, objectives) -> None:
    names = [objectives] if isinstance(objectives, str) else list(objectives)
    assert len(first) == len(second) == len(names)
    still = [name for name, a, b in zip(names, first, second) if a == b]
    assert not still, f"objectives that did not move between the trials: {still} ({first} vs {second})"


def test_mmkp_objectives_are_what_the_selector_selects(eval_main, compose_cfg, cache, tmp_path):
    points = (["method.selector.token_budget=200", "method.selector.redundancy_budget=20"],
              ["method.selector.token_budget=2000", "method.selector.redundancy_budget=300"])  # fmt: skip
    small, large = (trial(eval_main, compose_cfg, cache, tmp_path / str(i), "mmkp_budget", "limit=3", *p)
                    for i, p in enumerate(points))  # fmt: skip
    objectives = compose_cfg("eval", ["+hparams_search=mmkp_budget"]).optimized_metric
    assert list(objectives) == ["retrieval/passage_recall", "method/selected", "method/tokens_used"]
    assert_each_moves(small, large, objectives)
    assert small[2] <= 200 < large[2] <= 2000  # tokens selected stay within each trial's budget


def test_treehop_topk_recall_and_its_cap_move(eval_main, compose_cfg, cache, tmp_path):
    narrow = trial(eval_main, compose_cfg, cache, tmp_path / "0", "treehop_topk", "limit=4", "method.top_k=2",
                   "method.n_hops=1")  # fmt: skip
    wide = trial(eval_main, compose_cfg, cache, tmp_path / "1", "treehop_topk", "limit=4", "method.top_k=4",
                 "method.n_hops=2")  # fmt: skip
    assert_each_moves(narrow, wide, "retrieval/passage_recall")
    read = [_metrics(tmp_path / d)["cost/mean/passages_read"] for d in ("0", "1")]
    assert read[0] < read[1] <= 10  # the budget's metric moves with the knobs too, here under its cap


def test_prunerag_f1_and_prompt_tokens_move_with_the_threshold_and_depth(eval_main, compose_cfg, cache, tmp_path):
    accepting = trial(eval_main, compose_cfg, cache, tmp_path / "0", "prunerag", "limit=3", "aids=small_model",
                      "method.builder.threshold=0.5", "method.max_depth=2", rules=PRUNERAG_RULES)  # fmt: skip
    refusing = trial(eval_main, compose_cfg, cache, tmp_path / "1", "prunerag", "limit=3", "aids=small_model",
                     "method.builder.threshold=0.99", "method.max_depth=3", rules=PRUNERAG_RULES)  # fmt: skip
    assert_each_moves(accepting, refusing, ["f1", "cost/mean/prompt_tokens"])


def test_mcts_llm_calls_move_with_simulations_and_depth(eval_main, compose_cfg, cache, tmp_path):
    common = ["limit=2", "verifier@method.verifier=scripted"]
    short = trial(eval_main, compose_cfg, cache, tmp_path / "0", "mcts", *common, "method.search.simulations=4",
                  "method.search.max_depth=2")  # fmt: skip
    long = trial(eval_main, compose_cfg, cache, tmp_path / "1", "mcts", *common, "method.search.simulations=16",
                 "method.search.max_depth=4")  # fmt: skip
    assert short[1] < long[1]  # LLM calls per question
    assert short[0] == _metrics(tmp_path / "0")["f1"]  # F1 of generated answers (scripted: the same ones)


def test_a_retrieval_only_run_without_a_search_has_no_objective_and_still_succeeds(
    eval_main, compose_cfg, cache, tmp_path, capsys
):
    cfg = compose_cfg("eval", ["+method=sc_rag_select", "method.generate=false", "data=hotpotqa", "limit=2",
                               *SCRIPTED])  # fmt: skip
    cfg.paths.output_dir, cfg.paths.cache_dir = str(tmp_path), str(cache)
    assert cfg.optimized_metric == "f1" and eval_main(cfg) is None
    assert "objective: none (f1 needs generated answers; this run generated none)" in capsys.readouterr().out
    assert "f1" not in _metrics(tmp_path) and "retrieval/passage_recall" in _metrics(tmp_path)


def test_treehop_training_recall_moves_with_its_knobs(compose_cfg, tmp_path):
    train_main = entry_main("train")
    shrunk = ["embedder=hashing", "~logger", "progress=false", "threads=1", "model.datamodule.train.limit=120",
              "~model.datamodule.open_corpus", "model.module.model.gate_dim=32", "trainer.max_epochs=2",
              "callbacks.early_stopping.patience=10",
              # β alone, at its own lr (+model=treehop_small_data's form): on ~100 hashed trees the paper's gate
              # moves no recall in 2 epochs, whatever the knobs
              "model.module.model.correction_init=0.0", "model.module.model.learn_subtraction=true",
              "model.module.scale_lr=1e-2"]  # fmt: skip
    points = (["model.module.lr=1e-5", "model.module.temperature=0.5", "model.datamodule.batch_size=32"],
              ["model.module.lr=3e-3", "model.module.temperature=0.05", "model.datamodule.batch_size=8"])  # fmt: skip
    values = []
    for i, point in enumerate(points):
        cfg = compose_cfg("train", ["+hparams_search=treehop_train", *shrunk, *point])
        cfg.paths.output_dir = str(tmp_path / str(i))
        cfg.paths.cache_dir = str(tmp_path / "cache")
        values.append(train_main(cfg))
    assert OmegaConf.select(cfg, "optimized_metric") == "val/recall@5_hop2"
    assert values[0] != values[1], values


def _metrics(run_dir: Path) -> dict:
    import json

    return json.loads((run_dir / "metrics.json").read_text())["metrics"]
