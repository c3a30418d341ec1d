"""Every reach of the Ray backend into Ray's private modules, one function per patch.

Ray has no public switch for these; each is pinned to the Ray it was written against
(``ray==2.60.0``, the one ``penguin[ray]`` installs here) and says which test shows it
still holds. When Ray moves one of these names, the test named beside it fails first.
Nothing else in ``penguin.batch`` imports a ``ray._private`` or ``ray._raylet`` name,
nor sets one of Ray's internal ``RAY_*`` configuration entries.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
from collections.abc import Iterator
from typing import Any, Final, final

__all__ = [
    "KEEP_WORKER_CHILDREN",
    "keep_loopback",
    "lean_head",
    "quiet_init",
    "reread_ray_config",
    "restore_cluster_flag",
]

KEEP_WORKER_CHILDREN: Final = {"RAY_kill_child_processes_on_worker_exit": "0"}
"""The environment of a worker's process that leaves its children to penguin's watchdog.

Patch: Ray's internal configuration entry ``kill_child_processes_on_worker_exit``
(``RayConfig``, read from the environment by each process as it starts; default true in
Ray 2.60.0). With it, a worker that ``ray.kill`` ends SIGKILLs every direct child of its
process on the way out, and the host's watchdog is one: it dies before it can sweep,
and a daemon a task's command had forked (``setsid``, so no child of the worker) is left
running. Without it, the worker's death closes the watchdog's link and the watchdog
kills every process of the worker's sessions, the commands themselves included. Given
to the actors as their ``runtime_env``'s ``env_vars``, so only penguin's workers run
with it (the cluster's other jobs keep Ray's cleanup). Shown by
``test_21_2_what_a_killed_worker_s_tasks_started_is_gone_within_2_s``.
"""


@final
class _OffMainThreadNotice(logging.Filter):
    """Drops Ray's notice that ``ray.init`` off the main thread sets no SIGTERM handler.

    The driver calls ``ray.init`` in a worker thread on purpose, and the signals of
    the process belong to the command line, not to Ray.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")


@contextlib.contextmanager
def quiet_init() -> Iterator[None]:
    """Around ``ray.init``: its off-the-main-thread notice kept off the user's terminal.

    Patch: a filter on the logger of ``ray._private.worker`` (Ray 2.x up to 2.60.0 logs
    the notice there; Ray without that logger is left alone). Shown by no test of its
    own: the batch CLI tests (``tests/batch/test_ray.py``) only see that stderr holds
    no traceback; the notice is a plain line.
    """
    ray_logger: logging.Logger | None = getattr(
        importlib.import_module("ray._private.worker"), "logger", None
    )
    if ray_logger is None:
        yield
        return
    notice = _OffMainThreadNotice()
    ray_logger.addFilter(notice)
    try:
        yield
    finally:
        ray_logger.removeFilter(notice)


@contextlib.contextmanager
def lean_head() -> Iterator[None]:
    """Around the ``ray.init`` that starts a local cluster: no monitor, no log monitor.

    A batch's own cluster needs neither: the autoscaler's ``monitor.py`` has no nodes to
    add on one machine, and the log monitor streams the workers' output to a driver that
    asked for none (``log_to_driver=False``). Each is a Python process importing Ray on
    the batch's cores, and stopping them made ``ray.shutdown`` take 1.4 s instead of 0.4.

    Patch: ``ray._private.parameter.RayParams`` made with ``no_monitor=True`` and
    ``include_log_monitor=False`` (the fields ``ray start --no-monitor
    --include-log-monitor=False`` sets; ``ray.init`` has no argument for them in Ray
    2.60.0) while the block runs. Shown by ``test_b2_4_a_local_cluster_is_started_on_
    loopback_and_stopped_after``: neither process is among the cluster's.
    """
    parameter: Any = importlib.import_module("ray._private.parameter")
    params = parameter.RayParams
    original = params.__init__

    def lean(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.no_monitor = True
        self.include_log_monitor = False

    params.__init__ = lean
    try:
        yield
    finally:
        params.__init__ = original


def reread_ray_config() -> None:
    """Make an already imported Ray read its ``RAY_*`` configuration again.

    Patch: ``ray._raylet.Config.initialize("")`` (Ray 2.60.0 reads the environment
    once, at import). Needed when the batch's local cluster changes ``RAY_AUTH_*`` in a
    process that imported Ray before; ``test_b2_4_a_local_cluster_is_started_on_loopback_
    and_stopped_after`` runs the whole local cluster with token authentication.
    """
    raylet: Any = importlib.import_module("ray._raylet")
    raylet.Config.initialize("")


def keep_loopback(ray: Any) -> None:
    """Make this process's Ray keep a node address of 127.0.0.1.

    Patch: ``ray._private.ray_constants.ENABLE_RAY_CLUSTER = False`` (Ray 2.60.0 turns
    127.0.0.1 into the machine's public address unless multi-node clusters are off, and
    reads that flag at import). Shown by ``test_b2_4_a_local_cluster_is_started_on_
    loopback_and_stopped_after``: every socket of the cluster listens on 127.0.0.1.
    """
    constants: Any = importlib.import_module("ray._private.ray_constants")
    constants.ENABLE_RAY_CLUSTER = False


def restore_cluster_flag() -> None:
    """Undo :func:`keep_loopback` once the local cluster is gone (the flag from the env).

    Patch: the same ``ray._private.ray_constants`` names as :func:`keep_loopback`, read
    back with Ray's own ``env_bool`` (Ray 2.60.0). Shown by the same test: the cluster's
    processes are all gone after the batch, and a later batch in the process starts again.
    """
    constants: Any = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = constants.env_bool(
            constants.ENABLE_RAY_CLUSTERS_ENV_VAR, not constants.IS_WINDOWS_OR_OSX
        )
