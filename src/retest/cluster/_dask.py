"""Dask scale-out: a client context manager and the sharded exact kNN.

``cluster_client(address, workers)`` connects to a running scheduler
(``tcp://host:port``, e.g. one started with ``dask scheduler`` and ``dask worker``)
or starts a ``LocalCluster`` on 127.0.0.1. :class:`ClusterReferences` splits the
references into contiguous shards, runs the exact kernel
(:func:`retest.dedup.knn.knn`) on the workers and merges the partial top-k lists;
because exact distances are computed per pair, the result is identical to the
single-process run.

How shards reach the workers (``transfer``):

- ``"path"``: a memory-mapped reference array is reopened by path on each worker,
  so nothing large travels over the network. The workers must see the same file
  at the same path (a shared file system). Each worker checks the file's size and
  a sampled checksum before its first read, so a different or stale copy is never
  used.
- ``"send"``: the client reads each shard and scatters it to the workers once;
  later calls on the same :class:`ClusterReferences` reuse it. Works without a
  shared file system; shards then live in worker memory (Dask spills them to disk
  above its memory limit).
- ``"auto"`` (default): ``path`` for a memory-mapped array; a shard whose file a
  worker cannot open or whose checksum differs there is sent instead, for the rest
  of the run. In-memory references are always sent.

A lost worker (killed, out of memory, machine gone) is survived: the scheduler
reruns its tasks elsewhere, and a shard whose scattered copy died with it is sent
again from the client (up to ``retries`` times per shard and call).
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._parallel import available_cpus
from retest._progress import ProgressCallback, report
from retest._validation import check_cluster_address
from retest.dedup._knn_inputs import validate_knn_inputs
from retest.dedup.knn import DEFAULT_MEMORY_BUDGET, Backend, KnnResult, knn, merge_knn
from retest.errors import ConfigError, StageError

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

ShardTransfer = Literal["auto", "path", "send"]
SHARD_TRANSFERS: tuple[str, ...] = ("auto", "path", "send")
MAX_SHARD_BYTES = 256 * 2**20
"""Shards are cut so none exceeds this (a task's read, or one scattered object)."""
_SAMPLE = 1 << 16
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.worker.memory.monitor-interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
}
"""Dask settings of the local clusters :func:`cluster_client` starts (the nannies
pass them on to their workers). Dask's defaults wake every process's event loop
every 20 ms (tick: a health check that only logs), every 100 ms (memory monitor)
and every 500 ms (system monitor: dashboard plots), and sample the worker's stack
every 10 ms (the dashboard's profile page): an idle worker then used 23-30 ms of
CPU per second and its nanny 50 ms, taken from the kNN tasks on a core each. With
these, 5 and 10 ms. Still there: the unresponsive-loop log (after 3 s), memory
limits (checked twice a second), the dashboard's plots (every 2 s)."""


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
        Scheduler address such as ``tcp://10.0.0.5:8786``, or the path of a
        scheduler file (``dask scheduler --scheduler-file PATH``); checked by
        :func:`retest._validation.check_cluster_address`.
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
    cores = available_cpus()
    if workers is not None and workers > cores:
        # each worker is a process with its share of the memory: 200 workers on
        # 2 cores run no faster and each gets 1/200 of the memory
        raise ConfigError(
            f"a local cluster of {workers} workers: this machine gives retest "
            f"{cores} cores; pass at most {cores} workers, or start a Dask cluster "
            "on more machines and pass its scheduler with --cluster."
        )
    if address is not None:
        check_cluster_address(address)
        if os.path.isfile(address):
            address = _scheduler_file_address(address)
        try:
            client = Client(address, timeout="10s")
        except (OSError, ValueError) as err:
            raise StageError(
                f"cannot reach the Dask scheduler at {address}: {err}. Start it with "
                "`dask scheduler` or use --workers N for a local cluster."
            ) from err
        try:
            yield client
        finally:
            client.close()
        return
    import dask

    cluster = None
    local: Any = None
    try:
        with (
            dask.config.set(LOCAL_CLUSTER_CONFIG),
            _sigint_ignored(),
        ):
            cluster = LocalCluster(
                n_workers=workers or 1,
                threads_per_worker=threads_per_worker,
                processes=processes,
                host="127.0.0.1",
                protocol="tcp://",
                dashboard_address=":0",
                memory_limit=memory_limit,
            )
        local = Client(cluster)
        local.run(_quiet_shutdown_logs)
        with _interrupts_not_dropped():
            yield local
    finally:
        _close(local, cluster)


def _quiet_shutdown_logs() -> None:
    """Run on each local worker: it does not log what a shutdown mid-run breaks.

    Closing the cluster mid-task (Ctrl-C, or an error elsewhere) logs one
    "Async instruction ... ended with CancelledError" WARNING per running task
    (``distributed.worker.state_machine``: its only message at that level) and
    "Could not find data" ERRORs for inputs already released
    (``distributed.worker``); the command has already said it was interrupted
    and how to resume. A task's own failure still reaches the command, which
    names it; the memory monitor's warnings keep their level.
    """
    import logging

    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
    logging.getLogger("distributed.worker").setLevel(logging.CRITICAL)
    logging.getLogger("distributed.worker.memory").setLevel(logging.WARNING)


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Start the local workers with Ctrl-C ignored: they keep that for life.

    A terminal's Ctrl-C goes to the whole process group: workers killed by it
    print tracebacks and the run then fails on lost workers instead of stopping.
    A process started while SIGINT is ignored keeps ignoring it (Python installs
    its KeyboardInterrupt handler only over the default action), so only this
    command sees Ctrl-C, stops as usual (every stage resumes from its checkpoint)
    and closes the cluster. The price: a Ctrl-C in the second or two the workers
    take to start is lost; press it again.
    """
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


_INTERRUPTED = threading.Event()
"""Set by Ctrl-C while a local cluster runs; the shard loop raises it again if
something on the way swallowed the KeyboardInterrupt."""


def _raise_if_interrupted() -> None:
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


@contextmanager
def _interrupts_not_dropped() -> Iterator[None]:
    """A Ctrl-C is never lost.

    A KeyboardInterrupt can be swallowed on its way up: raised in the in-process
    scheduler's GC callback (distributed.gc) it is printed as "Exception
    ignored" and dropped, and the command ran on to the end; code that catches
    every exception can eat it too. So the SIGINT handler also records the
    interrupt: a dropped one is sent again at once (unraisable hook), and the
    shard loop (:meth:`ClusterReferences.knn`) raises it again at its next step
    whatever swallowed it, where the command can stop and say how to resume.
    """
    import signal

    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if unraisable.exc_type is KeyboardInterrupt:
            os.kill(os.getpid(), signal.SIGINT)
        else:
            previous(unraisable)

    def on_sigint(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()
    old = signal.getsignal(signal.SIGINT) if main else None
    if main and old is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_sigint)
    _INTERRUPTED.clear()
    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
        if main and old is signal.default_int_handler:
            signal.signal(signal.SIGINT, old)
        _INTERRUPTED.clear()


def _close(client: Any, cluster: Any) -> None:
    """Close the client and the local cluster without Dask's shutdown warnings
    (workers killed after a timeout on a busy machine, connections cut by a
    Ctrl-C): the work is done or checkpointed, and the CLI says how to resume."""
    import logging

    log = logging.getLogger("distributed")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    finally:
        log.setLevel(level)


def _scheduler_file_address(path: str) -> str:
    """The address in a scheduler file (the JSON ``dask scheduler
    --scheduler-file`` writes), checked like an address given directly."""
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
        address = info["address"]
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as err:
        raise ConfigError(
            f"{path} is not a Dask scheduler file ({type(err).__name__}: {err}); "
            "expected the JSON `dask scheduler --scheduler-file PATH` writes, with "
            "an 'address'."
        ) from None
    if not isinstance(address, str) or os.path.isfile(address):
        raise ConfigError(f"{path}: its 'address' {address!r} is not an address.")
    return check_cluster_address(address, f"the address in {path}")


class ShardUnreadableError(OSError):
    """A worker cannot read the shared reference file (absent or a different copy)."""


def _sample_offsets(nbytes: int) -> list[int]:
    return sorted({0, max(0, nbytes // 2 - _SAMPLE // 2), max(0, nbytes - _SAMPLE)})


def data_fingerprint(arr: NDArray[Any]) -> str:
    """Byte size plus a SHA-256 of three 64 KiB samples (start, middle, end) of a
    C-contiguous array's bytes: what the client has mapped."""
    raw = arr.reshape(-1).view(np.uint8)
    h = hashlib.sha256()
    for off in _sample_offsets(raw.size):
        h.update(raw[off : off + _SAMPLE].tobytes())
    return f"{raw.size}:{h.hexdigest()[:32]}"


def file_fingerprint(path: str | os.PathLike[str], offset: int, nbytes: int) -> str:
    """:func:`data_fingerprint` of ``nbytes`` bytes at ``offset`` of a file.

    Cheap enough for every worker; catches a missing, truncated, regenerated or
    unrelated file at the same path (not a change confined to unsampled bytes).
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < offset + nbytes:
            return f"{max(0, size - offset)}:truncated"
        for off in _sample_offsets(nbytes):
            f.seek(offset + off)
            h.update(f.read(min(_SAMPLE, nbytes - off)))
    return f"{nbytes}:{h.hexdigest()[:32]}"


_VERIFIED: set[tuple[str, str]] = set()
"""(path, fingerprint) pairs this process has checked (workers check once)."""


@dataclass(frozen=True, slots=True)
class MemmapRef:
    """Where a memory-mapped array lives, so a worker can reopen it."""

    path: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    fingerprint: str = ""

    def open(self) -> NDArray[Any]:
        """The array, after checking the file is the client's (when fingerprinted).

        Raises :class:`ShardUnreadableError` when the file is absent, unreadable
        or differs from the one the client mapped.
        """
        if self.fingerprint and (self.path, self.fingerprint) not in _VERIFIED:
            try:
                nbytes = int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize
                got = file_fingerprint(self.path, self.offset, nbytes)
            except OSError as err:
                raise ShardUnreadableError(
                    f"{self.path}: cannot read the reference file here ({err})."
                ) from err
            if got != self.fingerprint:
                raise ShardUnreadableError(
                    f"{self.path}: the file here differs from the client's "
                    f"(size:checksum {got} vs {self.fingerprint})."
                )
            _VERIFIED.add((self.path, self.fingerprint))
        try:
            return np.memmap(
                self.path,
                np.dtype(self.dtype),
                "r",
                offset=self.offset,
                shape=self.shape,
            )
        except (OSError, ValueError) as err:
            raise ShardUnreadableError(f"{self.path}: cannot map it ({err}).") from err

    @classmethod
    def of(cls, arr: Any) -> MemmapRef | None:
        """The location of ``arr`` if it is a whole, C-ordered file memmap."""
        if not isinstance(arr, np.memmap) or arr.filename is None:
            return None
        if not isinstance(arr.base, mmap.mmap) or not arr.flags.c_contiguous:
            return None
        return cls(str(arr.filename), arr.dtype.str, tuple(arr.shape), int(arr.offset))


def _task_threads(threads_by_host: dict[str, int]) -> int:
    """Threads one task may use: this host's cores shared by its worker threads."""
    try:
        from dask.distributed import get_worker

        host = get_worker().address.split("://")[-1].rsplit(":", 1)[0]
    except (ImportError, ValueError):  # pragma: no cover - outside a worker
        return 1
    return max(1, available_cpus() // max(1, threads_by_host.get(host, 1)))


def _shard_task(
    queries: NDArray[Any],
    source: Any,
    lo: int,
    hi: int,
    k: int,
    exclude: NDArray[np.int64] | None,
    budget: int,
    backend: Backend,
    threads: Any = None,
) -> KnnResult:
    """Exact top-k of the queries against reference rows [lo, hi) (runs on a worker).

    ``source`` is a :class:`MemmapRef` of the whole reference array or the shard
    itself; ``exclude`` holds global reference indices; ``threads`` is a thread
    count or a host → worker-threads map (see :func:`_task_threads`).
    """
    part = source.open()[lo:hi] if isinstance(source, MemmapRef) else source
    # Dask may deserialise the queries at an odd address; numpy's gathers and
    # casts then take slow paths (re-ranking: +0.3 s per 32,768-row task)
    queries = np.require(queries, requirements=["C", "A"])
    ex = None
    if exclude is not None:
        ex = np.where((exclude >= lo) & (exclude < hi), exclude - lo, -1)
    n_threads = _task_threads(threads) if isinstance(threads, dict) else threads
    res = knn(
        queries,
        part,
        k,
        exclude=ex,
        pad=True,
        memory_budget=budget,
        backend=backend,
        n_threads=n_threads,
    )
    return KnnResult(np.where(res.indices >= 0, res.indices + lo, -1), res.distances)


def _host(address: str) -> str:
    return address.split("://")[-1].rsplit(":", 1)[0]


def _retriable() -> tuple[type[BaseException], ...]:
    """Errors that mean "the worker (or data it held) went away", not a bad task."""
    from concurrent.futures import CancelledError

    from distributed.scheduler import KilledWorker

    out: list[type[BaseException]] = [CancelledError, KilledWorker]
    try:
        from distributed.client import FutureCancelledError

        out.append(FutureCancelledError)
    except ImportError:  # pragma: no cover - older distributed
        pass
    return tuple(out)


class ClusterReferences:
    """A reference array split into shards for repeated exact kNN on a cluster.

    Parameters
    ----------
    client : dask.distributed.Client
    references : array (n_refs, d) or (n_refs, H, W[, C])
        Memory-mapped arrays can be read by path on the workers.
    n_shards : int, optional
        Default: twice the workers' threads, more if a shard would exceed
        :data:`MAX_SHARD_BYTES`.
    transfer : {'auto', 'path', 'send'}
        How shards reach the workers (module docstring).
    progress : ProgressCallback, optional
        Called as ``progress("knn shards", done, total)`` over all calls.
    expected_calls : int
        How many :meth:`knn` calls will follow, so the progress total (and the ETA
        drawn from it) covers the whole run.
    task_threads : int, optional
        Threads per task (default: the host's cores over its worker threads).
    retries : int
        Resubmissions per shard and call after lost workers.
    """

    def __init__(
        self,
        client: Any,
        references: ArrayLike,
        *,
        n_shards: int | None = None,
        transfer: str = "auto",
        progress: ProgressCallback | None = None,
        expected_calls: int = 1,
        task_threads: int | None = None,
        retries: int = 5,
    ) -> None:
        if transfer not in SHARD_TRANSFERS:
            raise ConfigError(
                f"shard transfer must be one of {', '.join(SHARD_TRANSFERS)}. "
                f"Got {transfer!r}."
            )
        self.client = client
        self.references = references
        self.refs = validate_knn_inputs(references, references, None)[1]
        nr = self.refs.shape[0]
        workers = client.scheduler_info().get("workers", {})
        threads: dict[str, int] = {}
        for addr, info in workers.items():
            threads[_host(addr)] = threads.get(_host(addr), 0) + int(
                info.get("nthreads", 1)
            )
        self.threads: Any = task_threads if task_threads else threads
        n_threads = max(1, sum(threads.values()))
        by_size = math.ceil(self.refs.nbytes / MAX_SHARD_BYTES)
        shards = max(1, min(nr, n_shards or max(2 * n_threads, by_size)))
        self.bounds = np.linspace(0, nr, shards + 1).astype(int)
        loc = MemmapRef.of(references) if transfer != "send" else None
        if transfer == "path" and loc is None:
            raise ConfigError(
                "shard transfer 'path' needs memory-mapped references (an np.memmap "
                "or np.load(..., mmap_mode='r')); use 'send' or 'auto'."
            )
        if loc is not None:
            loc = replace(loc, fingerprint=data_fingerprint(np.asarray(references)))
        self.loc = loc
        self.transfer = transfer
        self.mode = ["path" if loc is not None else "send"] * shards
        self._sent: dict[int, Any] = {}
        self.progress = progress
        self.done = 0
        self.total = shards * max(1, int(expected_calls))
        self.retries = int(retries)
        self.resubmitted = 0

    @property
    def n_shards(self) -> int:
        return len(self.bounds) - 1

    @property
    def shards_sent(self) -> int:
        """Shards that travelled from the client (send mode or fallback)."""
        return sum(m == "send" for m in self.mode)

    def _source(self, i: int) -> Any:
        if self.mode[i] == "path":
            return self.loc
        fut = self._sent.get(i)
        if fut is None or fut.status != "finished":
            lo, hi = int(self.bounds[i]), int(self.bounds[i + 1])
            fut = self.client.scatter(
                np.ascontiguousarray(self.refs[lo:hi]), hash=False
            )
            self._sent[i] = fut
        return fut

    def knn(
        self,
        queries: ArrayLike,
        k: int,
        *,
        exclude: ArrayLike | None = None,
        exclude_self: bool = False,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        backend: Backend = "auto",
    ) -> KnnResult:
        """Exact kNN of ``queries`` against the shards; same result as ``knn``."""
        from dask.distributed import as_completed

        q, _, ex = validate_knn_inputs(
            queries, self.refs, k, exclude=exclude, exclude_self=exclude_self
        )
        q = np.ascontiguousarray(q)
        q_fut = [self.client.scatter(q, broadcast=True, hash=False)]

        def submit(i: int) -> Any:
            if q_fut[0].status != "finished":
                q_fut[0] = self.client.scatter(q, broadcast=True, hash=False)
            lo, hi = int(self.bounds[i]), int(self.bounds[i + 1])
            return self.client.submit(
                _shard_task,
                q_fut[0],
                self._source(i),
                lo,
                hi,
                int(k),
                ex,
                memory_budget,
                backend,
                self.threads,
                pure=False,
            )

        owner = {submit(i): i for i in range(self.n_shards)}
        tries = [0] * self.n_shards
        parts: list[KnnResult] = []
        retriable = _retriable()
        queue = as_completed(list(owner))
        for fut in queue:
            _raise_if_interrupted()
            i = owner.pop(fut)
            try:
                parts.append(fut.result())
            except ShardUnreadableError as err:
                if self.transfer == "path":
                    raise StageError(
                        f"a worker cannot use the reference shards' file: {err} "
                        "Put the project on a file system every worker mounts at "
                        "the same path, or use --shards send (or auto)."
                    ) from err
                self.mode[i] = "send"  # this worker cannot read it: send it
            except retriable as err:
                tries[i] += 1
                if tries[i] > self.retries:
                    raise StageError(
                        f"reference shard {i} failed {tries[i]} times on the cluster "
                        f"({type(err).__name__}: {err}); check the workers' logs."
                    ) from err
                self._sent.pop(i, None)
            else:
                self.done += 1
                self.total = max(self.total, self.done)
                report(self.progress, "knn shards", self.done, self.total)
                continue
            self.resubmitted += 1
            new = submit(i)
            owner[new] = i
            queue.add(new)
        _raise_if_interrupted()
        return merge_knn(parts, k)

    def release(self) -> None:
        """Drop the scattered shards from the workers' memory."""
        for fut in self._sent.values():
            fut.release()
        self._sent.clear()


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
    transfer: str = "auto",
) -> KnnResult:
    """Exact kNN with reference shards processed on Dask workers.

    Same contract and result as :func:`retest.dedup.knn.knn` (bit-identical
    distances and indices). ``memory_budget`` applies per task; ``n_shards``
    defaults to twice the workers' threads; ``transfer`` as in the module
    docstring. For many query batches against the same references use
    :class:`ClusterReferences` once (sent shards are then reused).
    """
    validate_knn_inputs(
        queries, references, k, exclude=exclude, exclude_self=exclude_self
    )
    shards = ClusterReferences(
        client, references, n_shards=n_shards, transfer=transfer, progress=progress
    )
    try:
        return shards.knn(
            queries,
            k,
            exclude=exclude,
            exclude_self=exclude_self,
            memory_budget=memory_budget,
            backend=backend,
        )
    finally:
        shards.release()
