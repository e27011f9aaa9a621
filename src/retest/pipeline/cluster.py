"""Dask scale-out: a client context manager and the sharded exact kNN.

``cluster_client(address, workers)`` connects to a running scheduler
(``tcp://host:port``) or starts a ``LocalCluster`` on 127.0.0.1. :func:`dask_knn`
splits the references into contiguous shards, runs the exact kernel
(:func:`retest.build.knn.knn`) on the workers and merges the partial top-k lists;
because exact distances are computed per pair, the result is identical to the
single-process run. A memory-mapped reference array is reopened by path on each
worker (nothing large travels over the network); an in-memory one is scattered.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._progress import ProgressCallback, report
from retest.build.knn import (
    DEFAULT_MEMORY_BUDGET,
    Backend,
    KnnResult,
    knn,
    merge_knn,
    validate_knn_inputs,
)
from retest.errors import ConfigError, StageError

__all__ = ["MemmapRef", "cluster_client", "dask_knn"]


@contextmanager
def cluster_client(
    address: str | None = None,
    workers: int | None = None,
    *,
    threads_per_worker: int = 1,
    processes: bool = True,
    memory_limit: str | int = "auto",
) -> Iterator[Any]:
    """A ``dask.distributed.Client``: to ``address``, or to a new local cluster.

    Parameters
    ----------
    address : str, optional
        Scheduler address such as ``tcp://10.0.0.5:8786``.
    workers : int, optional
        Start a ``LocalCluster`` on 127.0.0.1 with this many workers (default 1
        when no address is given). Giving both is an error.
    threads_per_worker, processes, memory_limit
        Passed to ``LocalCluster``.
    """
    from dask.distributed import Client, LocalCluster

    if address and workers:
        raise ConfigError(
            "pass either a scheduler address or a worker count, not both."
        )
    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be a positive integer. Got {workers}.")
    if address:
        try:
            client = Client(address, timeout="10s")
        except OSError as err:
            raise StageError(
                f"cannot reach the Dask scheduler at {address}: {err}. Start it with "
                "`dask scheduler` or use --workers N for a local cluster."
            ) from err
        try:
            yield client
        finally:
            client.close()
        return
    cluster = LocalCluster(
        n_workers=workers or 1,
        threads_per_worker=threads_per_worker,
        processes=processes,
        host="127.0.0.1",
        protocol="tcp://",
        dashboard_address=":0",
        memory_limit=memory_limit,
    )
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@dataclass(frozen=True, slots=True)
class MemmapRef:
    """Where a memory-mapped array lives, so a worker can reopen it."""

    path: str
    dtype: str
    shape: tuple[int, ...]
    offset: int

    def open(self) -> NDArray[Any]:
        return np.memmap(
            self.path, np.dtype(self.dtype), "r", offset=self.offset, shape=self.shape
        )

    @classmethod
    def of(cls, arr: Any) -> MemmapRef | None:
        """The location of ``arr`` if it is a whole, C-ordered file memmap."""
        if not isinstance(arr, np.memmap) or arr.filename is None:
            return None
        if not isinstance(arr.base, mmap.mmap) or not arr.flags.c_contiguous:
            return None
        return cls(str(arr.filename), arr.dtype.str, tuple(arr.shape), int(arr.offset))


def _shard_task(
    queries: NDArray[Any],
    source: Any,
    lo: int,
    hi: int,
    k: int,
    exclude: NDArray[np.int64] | None,
    budget: int,
    backend: Backend,
) -> KnnResult:
    """Exact top-k of the queries against reference rows [lo, hi) (runs on a worker).

    ``source`` is a :class:`MemmapRef` of the whole reference array or the shard
    itself; ``exclude`` holds global reference indices.
    """
    part = source.open()[lo:hi] if isinstance(source, MemmapRef) else source
    ex = None
    if exclude is not None:
        ex = np.where((exclude >= lo) & (exclude < hi), exclude - lo, -1)
    res = knn(
        queries, part, k, exclude=ex, pad=True, memory_budget=budget, backend=backend
    )
    return KnnResult(np.where(res.indices >= 0, res.indices + lo, -1), res.distances)


def dask_knn(
    client: Any,
    queries: ArrayLike,
    references: ArrayLike,
    k: int,
    *,
    exclude: ArrayLike | None = None,
    exclude_self: bool = False,
    n_shards: int | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: Backend = "auto",
    progress: ProgressCallback | None = None,
) -> KnnResult:
    """Exact kNN with reference shards processed on Dask workers.

    Same contract and result as :func:`retest.build.knn.knn` (bit-identical
    distances and indices). ``memory_budget`` applies per task; ``n_shards``
    defaults to twice the number of workers.
    """
    from dask.distributed import as_completed

    q, refs, ex = validate_knn_inputs(
        queries, references, k, exclude=exclude, exclude_self=exclude_self
    )
    nr = refs.shape[0]
    n_workers = max(1, len(client.scheduler_info().get("workers", {})))
    shards = max(1, min(nr, n_shards or 2 * n_workers))
    bounds = np.linspace(0, nr, shards + 1).astype(int)
    loc = MemmapRef.of(references)
    q_fut = client.scatter(np.ascontiguousarray(q), broadcast=True)
    futures = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        src: Any = loc if loc is not None else client.scatter(np.asarray(refs[lo:hi]))
        futures.append(
            client.submit(
                _shard_task,
                q_fut,
                src,
                lo,
                hi,
                k,
                ex,
                memory_budget,
                backend,
                pure=False,
            )
        )
    parts = []
    for done, fut in enumerate(as_completed(futures), 1):
        parts.append(fut.result())
        report(progress, "knn", done, len(futures))
    return merge_knn(parts, k)
