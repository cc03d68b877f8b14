"""``python -m jaxcc``: the jaxcc command line (see jaxcc.cli)."""

import sys

from jaxcc.cli import main

sys.exit(main())
