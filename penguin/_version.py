"""The one place penguin's version is written.

The build reads it from here (``[tool.hatch.version]`` in pyproject.toml) and
``penguin.__version__`` re-exports it, so the two can never disagree. It imports
nothing, so ``penguin --version`` costs only the interpreter's own start.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0.dev0"
