"""A run whose metrics.json says what qualifies its figures (PruningRAG's un-tuned router, the gold domain as an
oracle, a router trained on a stand-in judge's labels) is named so in compare's table, whatever its overrides
say."""

from __future__ import annotations

import json

from hoprag.compare import build
from tests.unit.test_compare import eval_run


def say(path, **info):
    report = json.loads((path / "metrics.json").read_text())
    report["run"].update(info)
    (path / "metrics.json").write_text(json.dumps(report))


def test_an_untuned_router_and_an_oracle_domain_appear_in_the_run_name(tmp_path):
    eval_run(tmp_path / "a", range(40), ["+method=pruningrag"])
    eval_run(tmp_path / "b", range(10), ["+method=pruningrag", "method.domain=gold"])
    eval_run(tmp_path / "c", range(10), ["+method=standard_rag"])
    say(tmp_path / "a", router="untuned", oracle_domain=False)
    say(tmp_path / "b", router="tuned", oracle_domain=True, router_labels={"labels": "outcome", "judge": "rule"})
    say(tmp_path / "c", router="none", oracle_domain=False)
    names = [g.name for g in build([str(tmp_path / d) for d in "abc"]).groups]
    assert names == ["+method=pruningrag (router untuned)",
                     "+method=pruningrag,method.domain=gold (router tuned, oracle domain, labels@rule)", "+method=standard_rag"]
