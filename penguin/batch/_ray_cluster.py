"""The Ray backend's cluster: finding Ray, connecting to a cluster, or starting a local one.

:func:`connected` is the driver's connection for one batch: to the cluster at an
address (or the Ray connection the process already has), left running after; or,
without an address, a local cluster started for the batch and shut down after —
bound to 127.0.0.1 only, no dashboard, no usage statistics, token authentication
with a fresh token held in the environment (nothing written under ``~/.ray``), and
every file under a short temporary directory (Ray's socket paths have a length
limit) that is removed after. The reaches into Ray's private modules this needs are
in ``_ray_patches``.

Every blocking Ray call goes through the ``call`` the driver gives (a worker thread).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import trio

from ._errors import BackendUnavailableError
from ._ray_patches import (
    keep_loopback,
    lean_head,
    quiet_init,
    reread_ray_config,
    restore_cluster_flag,
)

__all__ = ["INSTALL_COMMAND", "NAMESPACE", "check_ray", "connected"]

INSTALL_COMMAND: Final = "pip install 'penguin[ray]'"
NAMESPACE: Final = "penguin"
"""The Ray namespace of the workers; each is named ``batch-<run>-w<n>[-retry]``."""
_SHORT_PATH: Final = 40
"""Longest temporary directory Ray's socket paths (under 108 bytes) leave room for."""
_LOCAL_ENV: Final = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray turns a 127.0.0.1 node address into the machine's public one unless clusters
    # are off, as they are by default on macOS and Windows; this keeps every process
    # of the local cluster on the loopback interface.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
}

Call = Callable[[Callable[[], Any]], Awaitable[Any]]
"""The driver's way to run a blocking Ray call (in a worker thread)."""
Phase = Callable[[str], None]
"""Told what the connection is doing while no task runs (the progress line shows it)."""


def check_ray() -> None:
    """:class:`BackendUnavailableError`, with the install command, when ray is not installed.

    Only looks: ray is imported when the batch connects, after the environment a
    local cluster needs is in place (Ray reads some of it once, at import).
    """
    if "ray" in sys.modules:
        if sys.modules["ray"] is not None:
            return
    elif importlib.util.find_spec("ray") is not None:
        return
    raise BackendUnavailableError(
        "ray", f"--backend ray needs Ray, which is not installed here: {INSTALL_COMMAND}"
    )


async def _init(call: Call, ray: Any, **options: Any) -> Any:
    with quiet_init():
        return await call(functools.partial(ray.init, **options))


@asynccontextmanager
async def connected(address: str | None, call: Call, on_phase: Phase) -> AsyncIterator[Any]:
    """Connected to the cluster for the block (yields the ``ray`` module); see above.

    ``on_phase`` is told when it connects, starts a local cluster or stops it.
    """
    if address is not None or _ray_connected():
        ray = importlib.import_module("ray")
        if ray.is_initialized():
            yield ray  # the process's own connection: leave it as it is
            return
        on_phase(f"connecting to Ray at {address}")
        await _init(
            call,
            ray,
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level="warning",
        )
        try:
            yield ray
        finally:
            with trio.CancelScope(shield=True):
                await call(ray.shutdown)
        return
    temp_dir = Path(tempfile.mkdtemp(prefix="penguin-ray-"))
    if len(str(temp_dir)) > _SHORT_PATH:
        shutil.rmtree(temp_dir, ignore_errors=True)
        temp_dir = Path(tempfile.mkdtemp(prefix="penguin-ray-", dir="/tmp"))
    try:
        with _local_cluster_environment():
            on_phase("starting a local Ray cluster")
            ray = importlib.import_module("ray")
            keep_loopback(ray)
            with lean_head():
                context = await _init(
                    call,
                    ray,
                    address="local",
                    namespace=NAMESPACE,
                    _node_ip_address="127.0.0.1",
                    _temp_dir=str(temp_dir),
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level="warning",
                    object_store_memory=128 * 1024 * 1024,
                )
            try:
                node_ip = context.address_info.get("node_ip_address")
                if node_ip != "127.0.0.1":
                    raise BackendUnavailableError(
                        "ray",
                        f"the local Ray cluster bound to {node_ip}, not 127.0.0.1; not "
                        "running on it (start one with `ray start --head "
                        "--node-ip-address 127.0.0.1` and pass --ray-address)",
                    )
                yield ray
            finally:
                on_phase("stopping the local Ray cluster")
                with trio.CancelScope(shield=True):
                    await call(ray.shutdown)
    finally:
        await trio.to_thread.run_sync(
            functools.partial(shutil.rmtree, temp_dir, ignore_errors=True)
        )


def _ray_connected() -> bool:
    """Whether this process already has a Ray connection (then the batch uses it)."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


@contextlib.contextmanager
def _local_cluster_environment() -> Iterator[None]:
    """The environment a local cluster starts in (and lives in): loopback, no statistics.

    Set for the cluster's whole life, restored after: the processes Ray starts
    inherit it, and this process keeps the authentication token it needs. A Ray
    imported before reads its configuration again (it reads it once, at import).
    """
    values = dict(_LOCAL_ENV)
    if not any(os.environ.get(name) for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")):
        values["RAY_AUTH_MODE"] = "token"
        values["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    saved = {name: os.environ.get(name) for name in values}
    imported = sys.modules.get("ray") is not None
    os.environ.update(values)
    if imported:
        reread_ray_config()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        restore_cluster_flag()
        if sys.modules.get("ray") is not None:
            reread_ray_config()
