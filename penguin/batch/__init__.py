"""Batches of sessions (spec/batch.md): many tasks at once, one result each.

Users import from here; the private modules may move::

    from penguin import batch

    tasks = batch.load_tasks("tasks.jsonl")              # TaskFileError names a bad line
    async with batch.run_batch(tasks, concurrency=32) as results:
        async for result in results:                     # BatchResult, as each task ends
            print(result.id, result.status, result.trace_path)

    with batch.ResultsFile.open("results.jsonl", resume=True) as out:
        out.ids                                          # the tasks that already have a result
        await out.append(result)                         # one whole line, never twice

The local backend is one Trio loop: a ``CapacityLimiter`` over one nursery, a
:class:`~penguin.Session` (with its own Environment) per task. The Ray backend
(``backend="ray"``, the ``penguin[ray]`` extra) runs that same loop inside each of a
pool of Ray actors and streams their results back. :class:`BatchProgress` is the
arithmetic of the progress line. ``penguin batch`` is the command line over all of it.
"""

from __future__ import annotations

from ._api import BACKENDS as BACKENDS
from ._api import Backend as Backend
from ._api import check_backend as check_backend
from ._api import check_options as check_options
from ._api import run_batch as run_batch
from ._errors import BackendUnavailableError as BackendUnavailableError
from ._errors import BatchOptionError as BatchOptionError
from ._errors import ModelRateLimitedError as ModelRateLimitedError
from ._errors import ModelUnreachableError as ModelUnreachableError
from ._errors import ResultsWriteError as ResultsWriteError
from ._errors import StorageFullError as StorageFullError
from ._errors import TaskFileError as TaskFileError
from ._output import ResultsFile as ResultsFile
from ._progress import BatchProgress as BatchProgress
from ._results import BATCH_STATUSES as BATCH_STATUSES
from ._results import BatchResult as BatchResult
from ._results import BatchStatus as BatchStatus
from ._results import TokenTotals as TokenTotals
from ._runner import HARD_STOP_GRACE_S as HARD_STOP_GRACE_S
from ._runner import BatchSettings as BatchSettings
from ._runner import run_tasks as run_tasks
from ._tasks import UNATTENDED_MODES as UNATTENDED_MODES
from ._tasks import BatchTask as BatchTask
from ._tasks import load_tasks as load_tasks
from ._tasks import parse_tasks as parse_tasks
from ._tasks import unattended_mode as unattended_mode

__all__ = [
    "BACKENDS",
    "BATCH_STATUSES",
    "HARD_STOP_GRACE_S",
    "UNATTENDED_MODES",
    "Backend",
    "BackendUnavailableError",
    "BatchOptionError",
    "BatchProgress",
    "BatchResult",
    "BatchSettings",
    "BatchStatus",
    "BatchTask",
    "ModelRateLimitedError",
    "ModelUnreachableError",
    "ResultsFile",
    "ResultsWriteError",
    "StorageFullError",
    "TaskFileError",
    "TokenTotals",
    "check_backend",
    "check_options",
    "load_tasks",
    "parse_tasks",
    "run_batch",
    "run_tasks",
    "unattended_mode",
]
