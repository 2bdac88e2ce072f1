"""`python -m hoprag.compare`: see the package docstring."""

import sys

from hoprag.compare import main

sys.exit(main())
