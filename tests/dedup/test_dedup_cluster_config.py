"""The local cluster `cluster_client` starts runs its scheduler, nannies and
workers with the quieter Dask settings (Dask's defaults took ~3 % of a kNN
worker's core and 5 % of another core per nanny), and leaves the caller's Dask
config as it was."""

from __future__ import annotations

from typing import Any

import dask
import distributed  # noqa: F401  (loads the distributed.* defaults)

from retest.cluster._dask import LOCAL_CLUSTER_CONFIG, cluster_client


def _settings() -> dict[str, object]:
    return {key: dask.config.get(key) for key in LOCAL_CLUSTER_CONFIG}


def _intervals(dask_worker: Any) -> dict[str, float]:
    """The server's periodic callbacks and how often they run (ms)."""
    return {k: v.callback_time for k, v in dask_worker.periodic_callbacks.items()}


def test_local_cluster_processes_get_the_settings() -> None:
    before = _settings()
    assert before != LOCAL_CLUSTER_CONFIG  # Dask's defaults differ
    with cluster_client(workers=1) as client:
        assert list(client.run(_settings).values()) == [LOCAL_CLUSTER_CONFIG]
        servers = [
            *client.run(_intervals).values(),
            *client.run(_intervals, nanny=True).values(),
            client.run_on_scheduler(_intervals),
        ]
        assert _settings() == before  # only the cluster's processes changed
    for every in servers:
        assert every["tick"] == 500 and every["monitor"] == 2000
        assert "profile" not in every and "profile-cycle" not in every
    assert servers[0]["memory_monitor"] == servers[1]["memory_monitor"] == 500
