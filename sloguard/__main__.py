"""Allow `python -m sloguard`."""

import sys

from sloguard.cli import entry

sys.exit(entry())
