"""The Ray backend (spec B2.4–B2.6): the local runner inside each of a pool of Ray actors.

The code is split by where it runs:

- ``_ray_worker``: inside each Ray actor's process (:class:`BatchWorker`, a Trio loop
  running :func:`~._runner.run_tasks` on its share);
- ``_ray_driver``: in the process that runs the batch (:class:`RayDriver`: shares,
  polls, retries, results written once);
- ``_ray_cluster``: connecting to a cluster, or starting and stopping a local one;
- ``_ray_patches``: every reach into Ray's private modules, each with the Ray version
  it was written against and the test that shows it.

This module is what the rest of the package imports (``_api``); Ray itself is imported
only when a batch connects.
"""

from __future__ import annotations

from ._ray_cluster import INSTALL_COMMAND, NAMESPACE, check_ray
from ._ray_driver import POLL_TIMEOUT_S, RayDriver
from ._ray_worker import BatchWorker

__all__ = [
    "INSTALL_COMMAND",
    "NAMESPACE",
    "POLL_TIMEOUT_S",
    "BatchWorker",
    "RayDriver",
    "check_ray",
]
