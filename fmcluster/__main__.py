"""`python -m fmcluster` is the `fmcluster` command."""

import sys

from fmcluster.cli import main

sys.exit(main())
