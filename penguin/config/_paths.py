"""Where an agent's state lives on disk (reference D4), and the names penguin makes up there.

Owns the layout of the data root::

    $PENGUIN_HOME (default ~/.penguin/data)/<project>/
      .project_config.toml
      agents/<agent>/
        agent_state/system_config.yaml
        agent_state/.vault.toml
        traces/
        scratchpad/<session_id>/
        workspaces/tmp-<8hex>/

:class:`AgentPaths` computes these paths and nothing else: it creates no
directory and reads no file, so it is safe to build for an agent that does not
exist yet. The two functions that do touch the disk say so
(:func:`new_temp_workspace`). What the files contain belongs to ``_project``,
``_vault`` and ``_system``; when they are first written is the agent layer's
decision.

Invariant: every path component penguin builds from a name (project id, agent
id, session id) is checked against :data:`ID_PATTERN` first, so no name can
point outside its parent directory (``..``, ``/``, a leading dot are refused).
This is the one id rule of every surface: the command line, the server's routes,
a batch and :meth:`penguin.Agent.open` all ask :func:`is_valid_id` or
:func:`validate_id`.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Final, final

import attrs

from penguin._realpath import realpath

from ._errors import InvalidIdError

__all__ = [
    "DEFAULT_AGENT_ID",
    "DEFAULT_PROJECT_ID",
    "ID_MAX_LENGTH",
    "ID_PATTERN",
    "PENGUIN_HOME_VAR",
    "SECRET_FILE_NAMES",
    "AgentPaths",
    "data_root",
    "is_valid_id",
    "new_session_id",
    "new_temp_workspace",
    "secret_store_name",
    "validate_id",
]

PENGUIN_HOME_VAR: Final = "PENGUIN_HOME"
"""The environment variable that moves the data root (default ``~/.penguin/data``)."""

SECRET_FILE_NAMES: Final = frozenset({".vault.toml", ".project_config.toml"})
"""Basenames of the stores that hold the user's keys (reference 3.5.3): no tool reads
them, and neither does anything that puts a file into the conversation (``AGENTS.md``)."""


def secret_store_name(resolved: str) -> str | None:
    """The lowercased store name when ``resolved`` or its real path is a secret store.

    Case variants and symlinks to a store count, and so does a store-named symlink to
    an ordinary file: the name alone is enough to refuse.
    """
    lexical = os.path.basename(resolved).lower()
    if lexical in SECRET_FILE_NAMES:
        return lexical
    if os.path.isabs(resolved) and os.path.normpath(resolved) == resolved:
        # The real path's last name differs from the lexical one only when the path's
        # last component is a symlink (earlier ones change the directory, not the
        # name): one lstat instead of realpath's lstat of every component.
        try:
            if not stat.S_ISLNK(os.lstat(resolved).st_mode):
                return None
        except FileNotFoundError:
            return None  # nothing there: realpath keeps the name as written
        except (OSError, ValueError):
            pass  # realpath below decides
    try:
        real = os.path.basename(realpath(resolved)).lower()
    except (OSError, ValueError):
        return None
    return real if real in SECRET_FILE_NAMES else None


DEFAULT_PROJECT_ID: Final = "default_project"
DEFAULT_AGENT_ID: Final = "default_agent"

ID_MAX_LENGTH: Final = 64
"""The longest id the rule allows."""
ID_PATTERN: Final = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", re.ASCII)
"""The id rule (matched whole): a letter or digit, then letters, digits, ``_``, ``.``
and ``-``, at most 64 characters, and no ``..`` anywhere."""


def is_valid_id(value: object) -> bool:
    """Whether ``value`` is a project, agent or session id the rule allows."""
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The data root: ``root`` when given, else ``$PENGUIN_HOME``, else ``~/.penguin/data``.

    A leading ``~`` is expanded in both ``root`` and ``$PENGUIN_HOME``; an empty or
    blank ``$PENGUIN_HOME`` counts as unset. The path is not required to exist.
    """
    if root is not None:
        return Path(root).expanduser()
    configured = os.environ.get(PENGUIN_HOME_VAR, "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".penguin" / "data"


def validate_id(value: str, what: str = "id") -> str:
    """``value`` itself when it is a valid id, else :class:`InvalidIdError` saying what is allowed.

    ``what`` names the id in the message (``"project id"``, ``"agent id"``).
    """
    if not is_valid_id(value):
        raise InvalidIdError(
            f"invalid {what} {value!r}: use letters, digits, '_', '.' and '-', "
            f"starting with a letter or digit, at most {ID_MAX_LENGTH} characters, "
            "and no '..' (e.g. my_project)",
            field=what,
        )
    return value


def _project_id(value: str) -> str:
    return validate_id(value, "project id")


def _agent_id(value: str) -> str:
    return validate_id(value, "agent id")


@final
@attrs.frozen
class AgentPaths:
    """The files and directories of one agent of one project, under a data root.

    ``root`` goes through :func:`data_root`, so ``AgentPaths(None)`` is the agent
    in ``$PENGUIN_HOME`` or ``~/.penguin/data``. Ids are validated on
    construction (:class:`InvalidIdError`, a ``ValueError``). Only paths are
    computed: nothing is created.
    """

    root: Path = attrs.field(converter=data_root)
    project_id: str = attrs.field(default=DEFAULT_PROJECT_ID, converter=_project_id)
    agent_id: str = attrs.field(default=DEFAULT_AGENT_ID, converter=_agent_id)

    @property
    def project_dir(self) -> Path:
        """``<root>/<project>``."""
        return self.root / self.project_id

    @property
    def project_config(self) -> Path:
        """``<project>/.project_config.toml``: models, credentials, command policy (0600)."""
        return self.project_dir / ".project_config.toml"

    @property
    def agent_dir(self) -> Path:
        """``<project>/agents/<agent>``."""
        return self.project_dir / "agents" / self.agent_id

    @property
    def agent_state(self) -> Path:
        """``<agent>/agent_state``: the agent's configuration and vault."""
        return self.agent_dir / "agent_state"

    @property
    def system_config(self) -> Path:
        """``agent_state/system_config.yaml``."""
        return self.agent_state / "system_config.yaml"

    @property
    def vault(self) -> Path:
        """``agent_state/.vault.toml``: environment variables for commands (0600)."""
        return self.agent_state / ".vault.toml"

    @property
    def traces_dir(self) -> Path:
        """``<agent>/traces``; the trace writer adds ``<yyyy-mm-dd>/<session>_<NNN>.jsonl``."""
        return self.agent_dir / "traces"

    def scratchpad(self, session_id: str) -> Path:
        """``<agent>/scratchpad/<session_id>`` (the session id is validated)."""
        return self.agent_dir / "scratchpad" / validate_id(session_id, "session id")

    @property
    def workspaces_dir(self) -> Path:
        """``<agent>/workspaces``, where :func:`new_temp_workspace` makes directories."""
        return self.agent_dir / "workspaces"


def new_session_id(now: dt.datetime | None = None) -> str:
    """A fresh session id, ``session-YYYY-MM-DD-HH-mm-ss-<8 hex digits>``, in local time.

    ``now`` fixes the time part (a naive datetime is taken as local time, an aware
    one is converted to local time); the suffix is always random, so two ids made
    in the same second differ.
    """
    moment = dt.datetime.now() if now is None else now
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    return f"session-{moment:%Y-%m-%d-%H-%M-%S}-{secrets.token_hex(4)}"


def new_temp_workspace(paths: AgentPaths) -> Path:
    """Create and return a new empty directory ``workspaces/tmp-<8 hex digits>/``.

    Missing parents are created. The name is random and the directory is created
    exclusively, so concurrent callers never share one. Raises :class:`OSError`
    when the directory cannot be created.
    """
    parent = paths.workspaces_dir
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        candidate = parent / f"tmp-{secrets.token_hex(4)}"
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
