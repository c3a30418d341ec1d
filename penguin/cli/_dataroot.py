"""The data root a command writes to, checked before it starts (issue 21.4).

``penguin run``, ``penguin chat`` and ``penguin batch`` write traces (and the batch its
workspaces) under the agent's directory in the data root. A root that cannot be written
— a read-only mount, a folder without write permission — is refused at start with a
line naming the path, instead of asking the model and losing everything it did.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from penguin.config import AgentPaths

__all__ = ["unwritable_reason"]


def unwritable_reason(args: argparse.Namespace | AgentPaths) -> str | None:
    """Why the agent's traces cannot be written under the data root, or None if they can.

    ``args`` is the command's options (``--root``, ``--project-id``, ``--agent-id``) or
    the agent's paths. The check is on the nearest existing folder of the traces
    directory: that is the one a write (or the creation of what is missing) needs to be
    able to change. Ids that are not valid are left to the agent's own check (None).
    """
    if isinstance(args, AgentPaths):
        paths = args
    else:
        try:
            paths = AgentPaths(args.root, args.project_id, args.agent_id)
        except ValueError:
            return None
    target: Path = paths.traces_dir
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"the data root {paths.root} cannot be used: {existing} is not a folder"
    if os.access(existing, os.W_OK | os.X_OK):
        return None
    why = "permission denied"
    try:
        if os.statvfs(existing).f_flag & os.ST_RDONLY:
            why = "read-only file system"
    except OSError:
        pass
    return f"the data root {paths.root} is not writable ({existing}: {why})"
