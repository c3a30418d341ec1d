"""A configuration file edited by two at once: :func:`penguin.config.editing`.

Every edit reads the file, changes the text and replaces the file; two at once
without ``editing`` would each replace the file with their own change alone.
"""

from __future__ import annotations

import threading
from pathlib import Path

from penguin.config import ConfigError, editing, load_vault, set_vault


def test_an_edit_waits_for_the_one_that_holds_the_file_and_keeps_its_change(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent_state" / ".vault.toml"
    set_vault(path, "A", "1")
    started = threading.Event()

    def other() -> None:
        started.set()
        set_vault(path, "B", "2")

    with editing(path):
        thread = threading.Thread(target=other)
        thread.start()
        assert started.wait(10)
        path.write_text(path.read_text() + 'C = "3"\n')  # this edit's own change
    thread.join(10)
    assert not thread.is_alive()
    assert load_vault(path) == {"A": "1", "C": "3", "B": "2"}


def test_an_edit_held_too_long_is_refused_with_the_file_named(tmp_path: Path) -> None:
    path = tmp_path / "project" / ".project_config.toml"
    seen: list[str] = []

    def other() -> None:
        try:
            with editing(path, wait_s=0.05):
                seen.append("entered")
        except ConfigError as error:
            seen.append(str(error))

    with editing(path):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(10)
    assert seen == [
        f"{path}: another process has been changing it for 0.05 s; nothing was changed, try again"
    ]
    assert list(path.parent.iterdir()) == []  # no lock file is left behind
    with editing(path, wait_s=0):  # free again once the holder is done
        pass
