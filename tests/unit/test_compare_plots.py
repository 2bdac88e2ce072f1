"""The data behind `hoprag.compare`'s plots (Pareto front, swept parameter, TreeHop hop curves, the default
quality and cost axes), and that each plot is a PNG where it applies and None where it does not."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hoprag.compare import Comparison, Group, Run, RunDir, TrainRun, table_columns
from hoprag.compare.plots import (
    Sweep,
    cost_column,
    hop_curves,
    hop_plot,
    labels,
    pareto_front,
    quality_column,
    quality_cost_plot,
    sweep,
    sweep_plot,
    swept_keys,
    train_plot,
    undrawn,
)

PNG = b"\x89PNG\r\n\x1a\n"


def group(overrides: Sequence[str], *metrics: dict) -> Group:
    """A group of one run per `metrics` dict (seeds apart), named by its overrides."""
    runs = [RunDir(Path(f"/runs/{i}"), [*overrides, f"seed={i}"], m) for i, m in enumerate(metrics or [{}])]
    return Group(",".join(overrides), runs)


def comparison(*groups: Group) -> Comparison:
    return Comparison(list(groups), groups[0], table_columns(groups), [], 0)


def test_the_pareto_front_keeps_the_points_nothing_cheaper_beats():
    points = [(10.0, 50.0), (20.0, 60.0), (15.0, 40.0), (30.0, 60.0), (5.0, 30.0), (20.0, 60.0), (40.0, 70.0)]
    # (15, 40) is beaten by (10, 50); (30, 60) by (20, 60) at less cost; the two (20, 60) tie and both stay
    assert pareto_front(points) == [4, 0, 1, 5, 6]
    assert pareto_front([(1.0, 1.0)]) == [0] and pareto_front([]) == []


def test_a_sweep_is_the_one_numeric_key_the_groups_differ_in():
    lrs = [group(["data=2wiki", f"lr={lr}"]) for lr in (0.3, 0.1, 0.2)]
    assert sweep(lrs) == Sweep("lr", {"": [(0.1, 1), (0.2, 2), (0.3, 0)]})

    crossed = [group([f"+method={m}", f"k={k}"]) for m in ("a", "b") for k in (5, 10)]
    assert sweep(crossed) == Sweep("k", {"method=a": [(5.0, 0), (10.0, 1)], "method=b": [(5.0, 2), (10.0, 3)]})

    assert sweep([group(["lr=0.1", "k=5"]), group(["lr=0.2", "k=10"])]) is None  # two numeric keys: which one?
    assert sweep([group(["+method=a"]), group(["+method=b"])]) is None  # nothing numeric
    assert sweep([group(["lr=0.1"]), group(["lr=0.2"]), group(["lr=x"])]) is None  # not a number everywhere
    assert sweep([group(["lr=0.1"])]) is None
    shown = [group(["+method=a", "show=3"]), group(["+method=b", "show=0"])]  # show= changes nothing computed
    assert sweep(shown) is None and swept_keys(shown) == {}


def test_a_search_over_several_numeric_keys_gets_one_panel_per_key():
    trials = [group([f"top_k={k}", f"hops={h}"], {"retrieval/passage_recall": 50.0 + k + h})
              for k, h in ((5, 1), (8, 2), (3, 2))]  # fmt: skip
    assert swept_keys(trials) == {"top_k": [(3.0, 2), (5.0, 0), (8.0, 1)], "hops": [(1.0, 0), (2.0, 1), (2.0, 2)]}
    assert sweep(trials) is None and sweep_plot(comparison(*trials)).startswith(PNG)
    assert swept_keys([group(["+method=a"]), group(["+method=b"])]) == {}


def test_hop_curves_are_micro_recall_per_variant_in_the_tables_order():
    metrics = {
        "method/gold": 4.0,
        "method/untrained@5/hop2/hits": 2.0, "method/untrained@5/hop1/hits": 1.0,
        "method/q-c@5/hop1/hits": 1.0, "method/q-c@5/hop2/hits": 3.0, "method/q-c@5/hop2/k": 9.5,
        "method/direct@10/hop1/hits": 2.5, "method/direct@5/hop1/hits": 1.0,
    }  # fmt: skip
    curves = hop_curves(metrics)
    assert list(curves) == ["direct@10", "direct@5", "q-c@5", "untrained@5"]
    assert curves["q-c@5"] == [(1, 25.0), (2, 75.0)] and curves["direct@10"] == [(1, 62.5)]
    assert hop_curves({"f1": 30.0}) == {} and hop_curves({"method/gold": 0.0, "method/a@5/hop1/hits": 1.0}) == {}


def test_the_axes_default_to_f1_and_prompt_tokens_else_passage_recall_and_seconds():
    llm = comparison(group(["+method=a"], {"f1": 30.0, "retrieval/passage_recall": 60.0, "cost/mean/prompt_tokens": 900.0,
                                           "cost/mean/seconds/total": 1.0}))  # fmt: skip
    assert (quality_column(llm).key, cost_column(llm).key) == ("f1", "cost/mean/prompt_tokens")
    retrieval = comparison(group(["+method=a"], {"em": 0.0, "f1": 0.0, "retrieval/answer_recall": 70.0,
                                                 "retrieval/passage_recall": 60.0, "cost/mean/prompt_tokens": 0.0,
                                                 "cost/mean/seconds/total": 0.1}))  # fmt: skip
    assert (quality_column(retrieval).key, cost_column(retrieval).key) == (
        "retrieval/passage_recall",
        "cost/mean/seconds/total",
    )
    read = comparison(group(["+method=a"], {"retrieval/passage_recall": 60.0, "cost/mean/passages_read": 9.5,
                                            "cost/mean/seconds/total": 0.1}))  # fmt: skip
    assert cost_column(read).key == "cost/mean/passages_read"  # retrieval-only: what is read, not noisy seconds
    assert quality_column(comparison(group(["+method=a"], {"em": 0.0}))) is None


def test_each_plot_is_a_png_where_it_applies():
    metrics = [{"f1": f1, "cost/mean/prompt_tokens": tokens, "method/gold": 2.0, "method/q-c@5/hop1/hits": 1.0}
               for f1, tokens in ((30.0, 100.0), (40.0, 300.0), (35.0, 200.0))]  # fmt: skip
    swept = comparison(*(group([f"k={k}"], m, {**m, "f1": m["f1"] + 2}) for k, m in zip((5, 10, 20), metrics)))
    for plot in (quality_cost_plot, sweep_plot, hop_plot):
        assert plot(swept).startswith(PNG)
    alone = comparison(group(["+method=a"], {"f1": 30.0, "cost/mean/prompt_tokens": 100.0}))
    assert quality_cost_plot(alone).startswith(PNG)
    assert (sweep_plot(alone), hop_plot(alone), train_plot(alone)) == (None, None, None)

    train = TrainRun(Path("/runs/t"), ["seed=1"], {"best": 2.0, "best_epoch": 1, "last": 1.0, "epochs": 2},
                     monitor="val/acc", curve=[(0, 1.5), (1, 2.0)])  # fmt: skip
    assert train_plot(Comparison([], None, [], [], 0, [Group("t", [train])])).startswith(PNG)


def test_importing_the_comparison_does_not_import_matplotlib():
    import subprocess
    import sys

    code = "import sys, hoprag.compare, hoprag.compare.plots; print('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def run_of(method: str, overrides: Sequence[str], metrics: dict, **info) -> Group:
    """A one-run group of an eval run of `method` (its metrics.json `run` section holds the method's name)."""
    return Group(",".join(overrides), [Run(Path(f"/runs/{method}"), list(overrides), metrics,
                                           info={"method": method, **info})])  # fmt: skip


def test_plots_name_runs_by_method_then_the_overrides_that_differ():
    figures = {"f1": 10.0, "cost/mean/prompt_tokens": 100.0}
    groups = [
        run_of("standard_rag", ["+method=standard_rag", "data=hotpotqa"], figures),
        run_of("standard_rag", ["+method=standard_rag", "data=hotpotqa", "retriever=treehop"], figures),
        run_of("prunerag", ["+experiment=prunerag", "data=hotpotqa"], figures),
        run_of("prunerag", ["+experiment=prunerag_wo_con", "data=hotpotqa"], figures),
        run_of("pruningrag", ["+method=pruningrag", "data=hotpotqa"], figures, router="untuned"),
    ]
    assert labels(groups) == [
        "standard_rag",  # data=hotpotqa is common; +method=standard_rag says what the name already says
        "standard_rag (retriever=treehop)",
        "prunerag",
        "prunerag (experiment=prunerag_wo_con)",
        "pruningrag (router untuned)",
    ]
    twins = [run_of("a", ["+method=a", "seed=1"], figures), run_of("a", ["+method=a", "seed=2"], figures)]
    assert labels(twins) == ["+method=a,seed=1", "+method=a,seed=2"]  # alike: their table names instead
    assert labels([Group("k=5", [RunDir(Path("/r/0"), ["k=5"], figures)])]) == ["k=5"]  # no method known


def test_the_quality_cost_plot_names_the_runs_it_cannot_draw():
    drawn = run_of("a", ["+method=a"], {"f1": 10.0, "cost/mean/prompt_tokens": 100.0})
    retrieval_only = run_of("b", ["+method=b"], {"retrieval/passage_recall": 50.0, "cost/mean/prompt_tokens": 0.0})
    both = comparison(drawn, retrieval_only)
    assert undrawn(both) == ["b"] and quality_cost_plot(both).startswith(PNG)
