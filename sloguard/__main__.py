"""Allow `python -m sloguard`."""

import sys

from sloguard.cli import main

sys.exit(main())
