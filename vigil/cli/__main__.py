"""`python -m vigil.cli ...`: the `vigil` command without its console script."""

import sys

from vigil.cli.main import main

sys.exit(main())
