"""The documentation's examples run, and print what the docs say they print.

Every ```python block of docs/*.md that is a whole program (it calls ``trio.run`` or
``print``) is run in a fresh temporary directory; when a ```text block follows it (before
the next python block), the program's output must match it, with timestamps and
temporary paths normalised.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
_TEMP = re.compile(r"/tmp/[\w.-]+")


def _examples() -> list[tuple[str, str, str | None]]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        blocks = _BLOCK.findall(path.read_text())
        for index, (lang, body) in enumerate(blocks):
            if lang != "python" or ("trio.run" not in body and "print(" not in body):
                continue
            expected = None
            for later_lang, later_body in blocks[index + 1 :]:
                if later_lang == "python":
                    break
                if later_lang == "text":
                    expected = later_body
                    break
            found.append((f"{path.name}#{index}", body, expected))
    return found


def _normalised(text: str) -> str:
    return _TEMP.sub("/tmp/TMP", _TIMESTAMP.sub("TS", text)).strip()


@pytest.mark.parametrize(
    ("name", "program", "expected"), _examples(), ids=[e[0] for e in _examples()]
)
def test_doc_example(tmp_path: Path, name: str, program: str, expected: str | None) -> None:
    (tmp_path / "example.py").write_text(program)
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if expected is not None:
        assert _normalised(done.stdout) == _normalised(expected)
