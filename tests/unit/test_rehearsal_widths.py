"""A row may narrow its search widths for the rehearsal only (`rehearsal:` in its overrides): the rehearsal's jobs
add them after the paper's, the smoke and paper jobs never see them, nothing but a width may be narrowed, and the
rehearsal's report says which rows ran narrower."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from hoprag.reproduce import Table
from hoprag.reproduce.plan import plan
from hoprag.reproduce.render import intro
from hoprag.reproduce.spec import TableError

NARROWED = ["method.branching=2", "method.breadth=2", "method.evaluations=1"]


def table(rehearsal: list[str]) -> Table:
    return Table.parse({
        "name": "widths", "title": "A searching row", "digest": "spec/treerare.md", "baseline": "tot",
        "scales": {"smoke": {"label": "small", "overrides": ["aids=small_model"]},
                   "paper": {"label": "paper", "overrides": ["aids=none", "data.sample=500"]}},
        "groups": {"hotpotqa": {"label": "HotpotQA", "overrides": ["data=hotpotqa"]}},
        "metrics": {"f1": {"label": "F1", "key": "f1"}},
        "rows": [{"id": "tot", "name": "ToT", "overrides": {"all": ["+method=tot"], "paper": ["method.k=20"],
                                                            "rehearsal": rehearsal}}],
    })  # fmt: skip


def test_the_rehearsal_runs_the_paper_job_with_narrower_widths_and_only_it():
    t = table(NARROWED)
    jobs = {scale: plan(t, scale, Path("out"))[0].overrides for scale in ("smoke", "paper", "rehearsal")}
    assert jobs["paper"] == ("aids=none", "data.sample=500", "+method=tot", "method.k=20", "data=hotpotqa")
    assert jobs["rehearsal"] == ("aids=none", "data.sample=2", "+method=tot", "method.k=20", *NARROWED, "data=hotpotqa")
    assert not set(NARROWED) & set(jobs["smoke"])
    assert t.row("tot").narrowed == tuple(NARROWED)


@pytest.mark.parametrize("item", ["method.depth=1", "method.k=5", "data.sample=1", "method.branching=0",
                                  "method.breadth=two"])  # fmt: skip
def test_only_a_search_width_set_to_a_positive_integer_may_be_narrowed(item):
    with pytest.raises(TableError, match="only a search width"):
        table([item])


def test_the_rehearsal_report_lists_the_narrowed_rows():
    t = table(NARROWED)
    lines = {scale: intro(SimpleNamespace(table=t, scale=scale, questions=[])) for scale in ("paper", "rehearsal")}
    expected = f"Searches narrowed for the rehearsal (the paper's widths at scale=paper): ToT `{' '.join(NARROWED)}`."
    assert expected in lines["rehearsal"]
    assert not any("narrowed" in line for line in lines["paper"])
