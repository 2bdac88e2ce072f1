"""Compare finished `eval.py` and `train.py` runs: tables of quality and cost, paired significance against a
baseline, and a self-contained HTML report with plots.

    python compare.py <run dir | multirun dir | glob>... [--baseline RUN] [--out DIR] [--intersect] [--brief]
                      [--cost tokens|passages|calls|seconds] [--budgets 2000,4000] [--metric f1]
                      [--shortcuts PROBE...]

Each run is named by the Hydra overrides that set it apart from the others (`.hydra/overrides.yaml`), else by
its directory. Runs that differ only by a seed (`seed=`, `model.datamodule.seed=`, any key named `seed`)
collapse to one row of mean ± std. A row's figures are its runs' own metrics.json, over their own questions.
Every other eval run is tested against the baseline (the first unless `--baseline` names one) over the
questions both answered alike: a paired bootstrap CI of the mean difference and a sign-flip permutation
p-value per metric (`hoprag.stats`), each side's value computed from its own records over those shared
questions; a seed group counts each question's mean over its seeds. Records pair when their id, question text
and golds agree (`Question`). Runs over different question sets, or whose shared ids hold different questions
or golds, are refused unless `--intersect` asks for the questions they hold alike (the report says how many it
dropped and why). A metrics.json or predictions.jsonl that cannot be read is refused naming its path and line.

A train run (no metrics.json; `.hydra/config.yaml` and Lightning's `csv/version_*/metrics.csv`) is a row of
the metric its checkpoint monitored (`model.monitor`, `model.mode`): its best value, that epoch, and the last
one, read from the latest CSV log. Train runs have no per-question scores, so they are never paired-tested.

The report says where its figures come from (`provenance`): when, from which commit and by which command it was
made, the datasets and question counts, and per run directory when it started, from which commit and the command
that made it. It names the standard columns it leaves out and why (answer metrics no run reports, costs that are
0 in every run), and the tests where both sides are equal on every shared question (kept in significance.csv).
The printed tables are padded; the plots have titles and name runs by method, then the overrides that differ.

Methods swept over their budget knobs (top-k, hops, samples, ...) are also compared at equal cost (`matched`):
runs are grouped into methods (the method a run names, with its non-numeric overrides; its numeric ones are its
budget knobs), each method's Pareto front of quality against the `--cost` measure per question is a step
function (at budget B, its best run costing at most B; never interpolated), and at each budget (`--budgets`,
else where the matched runs change) every method's matched run is paired against the baseline method's over
the questions both answered. With fewer than two methods, or none swept, the report says why in one line.

`--shortcuts` names `shortcut_probe` runs of the compared runs' data and LLM (`shortcuts`): the report then gives
every table and paired test again on the genuinely multi-hop questions, those the probe did not flag as answered
closed-book or from one gold paragraph alone, with the counts; a probe of another LLM or other data is refused.

Over questions with a gold chain (MuSiQue decompositions, 2Wiki evidences; `hops`), the report adds a hop
attribution section: per run, each hop's gold-passage recall and the step it was first read at, the intermediate
answers of the methods that record them against the gold sub-answers, and the failure labels (correct,
answer-format, no-chain, first-missed-hop-k, bridge-wrong, reasoning: `hoprag.compare.hops` states the rule)
counted side by side; `--out` also gets `hops.csv` (each question's label and hop steps).

`--out` gets `table.csv` and `significance.csv` (eval runs), `train.csv` (train runs), `matched.csv` (the
budget-matched comparison, when made), `table_multihop.csv` and `significance_multihop.csv` (`--shortcuts`),
`report.md`, and `report.html` (the tables and the plots of `hoprag.compare.plots`, inlined; matplotlib is
imported there only).

The modules, in import order: `runs` (reading one run), `discovery` (finding runs), `groups` (grouping and
pairing), `columns` (the column catalogue), `significance`, `provenance`, `comparison` (`build`), `render`
(tables and report.md), `plots` and `page` (report.html), `cli` (`main`, `write`); `matched` (the budget-matched
comparison, on `plots`' front) is shown by `render`, `page` and `cli`, and so is `shortcuts` (the multi-hop-only
comparison). This face exports what users import.
"""

from hoprag.compare.cli import main, write
from hoprag.compare.columns import Column, table_columns
from hoprag.compare.comparison import Comparison, build
from hoprag.compare.discovery import find_runs, is_train_run
from hoprag.compare.groups import Group, group_runs
from hoprag.compare.render import markdown_table, report, table_rows
from hoprag.compare.runs import CompareError, Question, Run, RunDir, TrainRun
from hoprag.compare.significance import Significance

__all__ = [
    "Column",
    "CompareError",
    "Comparison",
    "Group",
    "Question",
    "Run",
    "RunDir",
    "Significance",
    "TrainRun",
    "build",
    "find_runs",
    "group_runs",
    "is_train_run",
    "main",
    "markdown_table",
    "report",
    "table_columns",
    "table_rows",
    "write",
]
