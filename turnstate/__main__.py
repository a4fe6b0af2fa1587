"""``python -m turnstate ...``: the ``turnstate`` command, where its script is not on PATH."""

import sys

from turnstate.cli import main

if __name__ == "__main__":
    sys.exit(main())
