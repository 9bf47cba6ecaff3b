"""`python -m sloguard.sim`: same as `sloguard sim`."""

import sys

from sloguard.sim.cli import main

sys.exit(main(sys.argv[1:]))
