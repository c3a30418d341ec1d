"""The system prompt: penguin's default template, its placeholders, and rendering.

A template is plain text with ``{{NAME}}`` placeholders (upper-case letters,
digits and ``_``). :func:`render_system_prompt` replaces those it has a value
for, in one pass (a value is inserted verbatim and never expanded again), and
leaves every other ``{{...}}`` exactly as written, so a template may carry
placeholders a later version or another harness fills in, and literal braces
need no escaping.

The placeholders penguin fills (:func:`system_prompt_values`):

=============== ==============================================================
``CWD``         the workspace directory, absolute
``DATE``        today's local date, ``YYYY-MM-DD``
``PLATFORM``    ``sys.platform`` (``linux``, ``darwin``)
``OS``          operating system and version, e.g. ``Linux 6.1.0 (Debian GNU/Linux 12)``
``ARCH``        machine architecture, e.g. ``x86_64``
``SHELL``       the shell exec_command runs commands with
``MODEL_ID``    the model answering
``AGENT_ID``    the agent's id (subagent prompts start with ``Caller agent: <id>``)
``SESSION_ID``  the session's id
``AGENTS_MD``   the workspace's ``AGENTS.md`` inside a ``[developer_instructions]``
                block, or empty when there is none
=============== ==============================================================

The template is stored in ``system_config.yaml`` under ``system_prompt``
(``_system`` writes the default there); this module does not read that file,
and it does not decide when a prompt is rendered (the agent layer does, once
per session).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from penguin._log import warn

from ._paths import secret_store_name

__all__ = [
    "AGENTS_MD_LIMIT",
    "AGENTS_MD_READ_LIMIT",
    "DEFAULT_SYSTEM_PROMPT",
    "PLACEHOLDER_PATTERN",
    "agents_md_block",
    "render_system_prompt",
    "system_prompt_values",
]

PLACEHOLDER_PATTERN: Final = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")
"""A placeholder: ``{{NAME}}`` with an upper-case name."""

AGENTS_MD_LIMIT: Final = 32_000
"""Characters of ``AGENTS.md`` put into the prompt; the rest is cut with a note."""

AGENTS_MD_READ_LIMIT: Final = 8 * 1024 * 1024
"""Bytes of ``AGENTS.md`` read at most (8 MiB, ``read_file``'s scan cap): a larger file's
rest is left unread, and the note says how much."""

_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)

DEFAULT_SYSTEM_PROMPT: Final = """\
You are a software engineering and operations agent. You work for the user on a real
machine, through the tools this harness (penguin) gives you: you read and change files,
run shell commands and keep long-running ones going, look at images, and hand
self-contained pieces of work to subagents. What you do has real effects, so work like a
careful senior engineer at someone else's keyboard.

# Environment
- Workspace (the current directory; relative paths resolve here): {{CWD}}
- Today's date: {{DATE}}
- Platform: {{PLATFORM}}; operating system: {{OS}}; architecture: {{ARCH}}
- Shell used by exec_command: {{SHELL}}
- Model: {{MODEL_ID}}; agent: {{AGENT_ID}}; session: {{SESSION_ID}}

# Working method
- Look before you change anything. Read the files involved and check the state of the
  project (its layout, git status, the tests, the build) instead of guessing at code or
  configuration you have not seen.
- Make the smallest change that fully does the job, in the style of the code around it.
  Leave unrelated code, formatting and names alone.
- Verify. Run the tests, the build, the linter or the program itself, whichever shows
  that the change works, and read what it printed. If you could not verify something,
  say so plainly.
- When a request is ambiguous and a wrong guess would be expensive or hard to undo, ask
  one short question. Otherwise choose the sensible reading, say which, and go ahead.
- Prefer steps that can be undone. Deleting data, force-pushing, rewriting history,
  dropping databases, touching production systems or changing the machine outside the
  workspace need the user's clear request.
- Secrets reach your commands as environment variables. Use them; never print them,
  write them into files or send them anywhere they were not meant to go.
- If a [developer_instructions] block appears at the end of this prompt, it holds the
  workspace's AGENTS.md: the project's own conventions. Follow them unless the user says
  otherwise.

# Tools
Files:
- read_file returns numbered lines; the numbers are not part of the file. Read long files
  a part at a time with offset and limit.
- edit_file replaces text that must match the file exactly (indentation included) and
  occur once, unless replace_all is set. Copy old_string from what read_file showed you,
  without the line numbers, and add neighbouring lines until it is unique.
- write_file creates a file or replaces all of it. Use it for new files and complete
  rewrites, and edit_file for changes to existing files.

Commands:
- exec_command runs one command line in the workspace (or workdir) and returns stdout and
  stderr merged. There is no terminal unless you set tty, and pagers and prompts are
  switched off: use non-interactive flags (--yes, --no-pager, CI=1).
- A command still running when yield_time_ms runs out keeps running, and you get its
  process_id. input_command with that id reads more output, types input (chars are sent
  exactly as given: end a line with "\\n") or sends Ctrl-C (chars = "\\u0003");
  kill_command stops it. Stop the processes you started once you no longer need them.
- For servers, watchers and long builds, set run_in_background: the call returns at once
  with a process_id, and a [background_task_done] message arrives when the command ends.
  Do not poll in a loop. Never detach with &, nohup, setsid or disown: such processes die
  with their process group.
- Keep output small: filter with rg, grep, head, tail or wc rather than dumping whole
  logs. Output over a tool's limit is cut, and the note says where the full text was
  saved when it was.

Subagents:
- run_subagent gives a task to a separate agent that works in the same workspace with its
  own context. It sees only the prompt you write, so put everything in it: the goal, the
  paths and facts that matter, the constraints, and the form of the answer you want.
  Begin the prompt with the line "Caller agent: {{AGENT_ID}}".
- Use subagents for independent, well-bounded work (an investigation, changes to separate
  files done in parallel), not for steps that depend on this conversation.
- A subagent that is still working, or was started in the background, is followed with
  input_subagent and stopped with kill_subagent.

Images:
- read_image shows you an image (a file or an http(s) URL) when your model accepts
  images; describe_image asks the project's vision model to describe one when it does
  not. Use whichever you have for screenshots, diagrams, plots and rendered pages.

Several tool calls in one reply may run at the same time; when a call needs another's
result, wait for that result first. Each call is approved or denied by the user or by a
policy. A denied call answers "Tool call denied by user." or "Tool call denied by
policy.": do not repeat it as it was, and do not reach the same effect another way;
change the approach or ask.

# Messages from the harness
Some messages in the user's role are written by penguin, not by the user. They open with
a marker in square brackets:
- [turn_aborted]: your previous round was interrupted. It repeats the request you were
  working on, the output you had produced, and the tool calls that had already run, with
  their results. Those calls took effect: do not run them again. Continue from where the
  work stopped, checking the current state where that matters.
- [turn_retried]: your previous attempt failed for a reason that was not the user's doing
  (a network or server error, a timeout) and is being retried automatically. Output from
  the failed attempt did not reach the user; give a complete answer.
- [context_summary]: earlier parts of this conversation were compacted into this summary.
  Treat it as what happened, and read files again when you need exact details.
- [user_steering]: the user sent this while you were working. It is from the user: take
  it into account right away, even if it changes or narrows the task.
- [background_task_done]: a command or subagent you started in the background finished;
  the block gives its kind, id, status and final output. It is an automatic notice from
  the harness, not a request from the user: act on it only as far as your task needs.

# Answering
Be direct and brief. When you are done, say what you changed and how you checked it,
naming the files; point out anything left undone and any decision that is the user's.
Point to large files and long outputs instead of pasting them. Use code blocks for code
and commands.
{{AGENTS_MD}}"""
"""penguin's built-in system prompt template (placeholders as listed in the module docstring)."""


def render_system_prompt(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{{NAME}}`` that ``values`` has replaced by its value.

    Placeholders without a value are left exactly as written; values are inserted
    verbatim (a value containing ``{{X}}`` is not expanded again). Nothing else in
    the template changes.
    """

    def substitute(match: re.Match[str]) -> str:
        value = values.get(match.group(1))
        return match.group(0) if value is None else value

    return PLACEHOLDER_PATTERN.sub(substitute, template)


def agents_md_block(workspace_dir: str | os.PathLike[str]) -> str:
    r"""The ``{{AGENTS_MD}}`` value: the workspace's ``AGENTS.md`` in a block, or ``""``.

    The block is ``\n[developer_instructions]\n<contents>\n[/developer_instructions]\n``
    (it starts with a blank line so it stands apart from the text before it).
    Contents longer than :data:`AGENTS_MD_LIMIT` characters are cut with a note;
    bytes that are not UTF-8 are replaced. A missing, unreadable or blank file
    gives ``""``. Blocking.

    What a workspace holds may come from anywhere (a cloned repository can hold an
    ``AGENTS.md`` that is a symbolic link), so only a regular file is read, at most
    :data:`AGENTS_MD_READ_LIMIT` bytes of it (the note then says how much was not
    read): a link to ``/dev/zero`` or to a named pipe gives ``""`` instead of reading
    without end or waiting for a writer. A link to one of the stores of the user's keys
    (:data:`~penguin.config.SECRET_FILE_NAMES`) gives ``""`` too: like ``read_file``,
    the prompt never carries them. Either is logged.
    """
    path = os.path.join(os.fspath(workspace_dir), "AGENTS.md")
    read = _read_agents_md(path)
    if read is None:
        return ""
    data, size = read
    text = data.decode("utf-8", errors="replace").strip("\n")
    if not text.strip():
        return ""
    unread = size - len(data)
    if len(text) > AGENTS_MD_LIMIT or unread > 0:
        cut = len(text) - AGENTS_MD_LIMIT
        rest = f", and {unread} more bytes not read" if unread > 0 else ""
        note = f"[AGENTS.md truncated: {cut} more characters not shown{rest}]"
        text = f"{text[:AGENTS_MD_LIMIT]}\n{note}"
    return f"\n[developer_instructions]\n{text}\n[/developer_instructions]\n"


def _read_agents_md(path: str) -> tuple[bytes, int] | None:
    """The first :data:`AGENTS_MD_READ_LIMIT` bytes of a regular file, and its size; or None.

    None when there is nothing to read: no file, one that cannot be opened, one that is
    not a regular file, or one of the secret stores.
    """
    try:  # no wait for a named pipe's writer; a regular file does not mind the flag
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            warn(f"[penguin] {path} is not a regular file: left out of the system prompt")
            return None
        store = secret_store_name(os.path.abspath(path))
        if store is not None:
            warn(
                f"[penguin] {path} leads to {store}, which holds the user's secrets:"
                " left out of the system prompt"
            )
            return None
        chunks: list[bytes] = []
        left = AGENTS_MD_READ_LIMIT
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data, max(info.st_size, len(data))


def _os_description() -> str:
    system = platform.system() or sys.platform
    release = platform.release()
    described = f"{system} {release}".strip()
    if sys.platform == "darwin":
        version = platform.mac_ver()[0]
        return f"{described} (macOS {version})" if version else described
    try:
        pretty = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        pretty = ""
    return f"{described} ({pretty})" if pretty else described


def system_prompt_values(
    *,
    workspace_dir: str | os.PathLike[str],
    model_id: str,
    session_id: str,
    agent_id: str = "default_agent",
    shell: str = "bash",
    now: dt.datetime | None = None,
) -> dict[str, str]:
    """The values penguin fills into a template for one session (see the module docstring).

    ``shell`` is what exec_command runs (the Environment knows; ``bash`` unless
    ``PENGUIN_SHELL`` says otherwise). ``now`` fixes the date (local time; default
    now). Reads ``AGENTS.md`` from the workspace, so it is blocking.
    """
    moment = dt.datetime.now() if now is None else now
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    return {
        "CWD": os.fspath(Path(workspace_dir).absolute()),
        "DATE": f"{moment:%Y-%m-%d}",
        "PLATFORM": sys.platform,
        "OS": _os_description(),
        "ARCH": platform.machine() or "unknown",
        "SHELL": shell,
        "MODEL_ID": model_id,
        "AGENT_ID": agent_id,
        "SESSION_ID": session_id,
        "AGENTS_MD": agents_md_block(workspace_dir),
    }
