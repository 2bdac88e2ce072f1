"""Each paper's headline table as one command: `python reproduce.py table=<name> [scale=smoke|paper]`.

A table config (`conf/table/<name>.yaml`, read by `spec`) lists the paper's rows (a method or baseline and its
`eval.py` overrides), its columns (column group × metric), the paper's settings and figures per cell (from the
digests, with their caveats), and per scale what every run shares and what is skipped and why. `plan` turns it
into `eval.py` jobs in fixed run directories (a finished job is not rerun), `preflight` checks what the jobs need
(files, indexes, models, servers, credentials, extras, GPU memory) and refuses those that lack any, `runner` runs
the rest as one Hydra
multirun through the row sweeper (`hydra_plugins/hoprag_rows_sweeper`), `cells` reads the runs with
`hoprag.compare`, and `render` writes table.md, table.csv, paired.csv and table.html in the paper's layout."""

from hoprag.reproduce.plan import Job, plan
from hoprag.reproduce.render import Report
from hoprag.reproduce.runner import check, forwarded, multirun_command, reproduce
from hoprag.reproduce.spec import SCALES, Table, TableError

__all__ = ["SCALES", "Job", "Report", "Table", "TableError", "check", "forwarded", "multirun_command", "plan",
           "reproduce"]
