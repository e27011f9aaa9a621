"""Dask scale-out (an adapter): a client context manager and the sharded exact kNN."""

from __future__ import annotations

from retest.cluster._dask import (
    SHARD_TRANSFERS,
    ClusterReferences,
    MemmapRef,
    ShardTransfer,
    ShardUnreadableError,
    cluster_client,
    dask_knn,
    data_fingerprint,
    file_fingerprint,
)

__all__ = [
    "SHARD_TRANSFERS",
    "ClusterReferences",
    "MemmapRef",
    "ShardTransfer",
    "ShardUnreadableError",
    "cluster_client",
    "dask_knn",
    "data_fingerprint",
    "file_fingerprint",
]
