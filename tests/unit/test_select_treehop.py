"""`scripts/runs/select_treehop.py`: designs grouped across validation splits, gains read from the CSV logs."""

from __future__ import annotations

import csv
import sys

import pytest
import yaml

from tests.scripts import load_script

select_treehop = load_script("runs/select_treehop.py")

FIELDS = ["epoch", "step", "val/recall@5_hop2", "val/qc_recall@5_hop2", "val/k_hop2", "val/direct_recall@10"]


def fake_run(directory, overrides, rows):
    (directory / ".hydra").mkdir(parents=True)
    (directory / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    log = directory / "csv" / "version_0" / "metrics.csv"
    log.parent.mkdir(parents=True)
    with log.open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(dict(zip(FIELDS, row)) for row in rows)


def test_designs_are_grouped_over_split_seeds_and_judged_by_their_gain(tmp_path, capsys, monkeypatch):
    untrained = ["", 0, 50, 50, 9.7]  # the step-0 row: no epoch, not a candidate
    fake_run(tmp_path / "0", ["+model=treehop", "model.datamodule.seed=1", "x=a"],
             [untrained, [0, 10, 52, 50, 9.0, 53], [1, 20, 51, 50, 8.0, 53], ["", 21, 0, 0, 0]])  # fmt: skip
    fake_run(tmp_path / "1", ["+model=treehop", "model.datamodule.seed=2", "x=a"],
             [untrained, [0, 10, 54, 50, 9.5, 55], [1, 20, 56, 50, 9.1, 55]])  # fmt: skip
    fake_run(tmp_path / "2", ["+model=treehop", "model.datamodule.seed=1", "x=b"], [untrained, [0, 10, 49, 50, 9.9]])
    assert select_treehop.run_gains(tmp_path / "0", 2) == (2.0, 1.5, 9.0, 52.0, -1.0)
    monkeypatch.setattr(sys, "argv", ["select_treehop.py", str(tmp_path)])
    select_treehop.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:6] == ["2", "+4.00", "+3.25", "9.05", "54.00", "+0.00"]
    assert lines[1].endswith("+model=treehop x=a")
    assert lines[2].split()[:3] == ["1", "-1.00", "-1.00"] and lines[2].split()[5] == "+nan"  # an older log
    assert lines[2].endswith("x=b")


def test_a_folder_without_runs_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["select_treehop.py", str(tmp_path)])
    with pytest.raises(SystemExit, match="no train.py runs"):
        select_treehop.main()
