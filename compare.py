"""Compare finished `eval.py` and `train.py` runs: one table of quality and cost, paired tests, an HTML report.

    python compare.py <run dir | multirun dir | glob>... [--baseline RUN] [--out DIR] [--intersect] [--brief]
    python compare.py logs/eval/multiruns/<time> --out logs/eval/multiruns/<time>/compare      # a sweep

What is compared, paired and refused is the `hoprag.compare` package's docstring; `--out` gets the CSV tables,
`report.md` and `report.html`.
"""

import sys

from hoprag.compare import main

if __name__ == "__main__":
    sys.exit(main())
