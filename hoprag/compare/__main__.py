"""`python -m hoprag.compare`, an alias of the root entry point `python compare.py`: see the package docstring."""

import sys

from hoprag.compare.cli import main

sys.exit(main())
