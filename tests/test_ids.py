"""Issue 20.1: short ids without a system call each, never the same walk in two processes."""

from __future__ import annotations

import os
import re

import pytest

from penguin._ids import token_hex


def test_20_1_token_hex_is_spelled_as_secrets_spells_it() -> None:
    tokens = [token_hex(12) for _ in range(200)]
    assert all(re.fullmatch(r"[0-9a-f]{24}", t) for t in tokens)
    assert len(set(tokens)) == len(tokens)
    assert re.fullmatch(r"[0-9a-f]{8}", token_hex(4))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_20_1_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    # Without the reseed at fork the child would draw exactly the parent's next id.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, then out without running pytest's cleanup
        try:
            os.write(write_end, token_hex(16).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        child = os.read(read_end, 64).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    assert re.fullmatch(r"[0-9a-f]{32}", child), child
    assert child != token_hex(16)
