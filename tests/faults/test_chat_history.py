"""Issue 21.4 for the chat's input history (a JSON Lines file): whole lines or nothing.

A child process lowers its file size limit (Python ignores SIGXFSZ, so the kernel cuts
the write short and then refuses it with EFBIG), as a full disk would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = """
import os, resource, sys
from pathlib import Path
from penguin.cli._terminal import ChatHistory

path = Path(sys.argv[1])
history = ChatHistory(path, limit=3)
history.load_history_strings()
history.store_string("one")
history.store_string("two")
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 10, hard))
history.store_string("three " + "x" * 5000)  # an append cut short: cut back
print(path.read_bytes() == b'"one"\\n"two"\\n', flush=True)
history.store_string("four " + "y" * 5000)  # past the limit: a rewrite that fails
print(path.read_bytes() == b'"one"\\n"two"\\n', flush=True)
print(sorted(p.name for p in path.parent.iterdir()), flush=True)
"""


def test_21_4_the_chat_history_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    path = tmp_path / "history" / "chat_history"
    done = subprocess.run(
        [sys.executable, str(script), str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True", "True", "['chat_history']"]
    assert [json.loads(line) for line in path.read_text().splitlines()] == ["one", "two"]
