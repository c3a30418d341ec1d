"""``python -m penguin``: the same as the ``penguin`` command."""

from __future__ import annotations

import sys

from penguin.cli import main

if __name__ == "__main__":
    sys.exit(main())
