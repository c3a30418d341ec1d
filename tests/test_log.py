"""The ``penguin`` logger has one home, penguin/_log.py (issue 10 item 5).

Every module that logs takes the logger from there; what reaches stderr without any
logging configuration is still the bare diagnostic line.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import penguin
from penguin import _log
from penguin import protocol as om

PACKAGE = Path(penguin.__file__).parent


def test_10_5_only_penguin_log_calls_get_logger() -> None:
    callers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "getLogger" in path.read_text() and path.name != "_log.py"
    )
    assert callers == []


def test_10_5_every_module_logger_is_the_penguin_logger() -> None:
    using = []
    for info in pkgutil.walk_packages(penguin.__path__, "penguin."):
        module = importlib.import_module(info.name)
        logger = vars(module).get("_logger")
        if logger is not None:
            assert logger is _log.logger, info.name
            using.append(info.name)
    assert len(using) >= 6  # the trace writer and reader, MCP config, environ, archive, recorder
    assert _log.logger.name == "penguin"


def test_10_5_a_diagnostic_is_a_bare_line_on_stderr(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("not json\n" + om.dumps(om.user_text("hi")) + "\n")
    done = subprocess.run(
        [sys.executable, "-c", f"import penguin.trace as t; t.read_trace({str(trace)!r})"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stderr == f"[trace] skipped 1 malformed line(s) [1] in {trace}\n"
