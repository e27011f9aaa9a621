"""On-disk cache of model predictions, keyed by (model, dataset) content.

Each entry is two files in the cache folder::

    <key>.npz    topk (int64 N×k) [+ probs (float32 N×K)] — no pickles
    <key>.json   {"model", "dataset", "model_key", "dataset_key", "sha256", ...}

``key = sha256(model_key, dataset_key)`` where ``model_key`` fingerprints the model
(name, parameters, weights file, training data) and ``dataset_key`` the dataset
(name and a hash of labels and pixels), so a changed model, training set or
revision never hits a stale entry. The sidecar JSON is written after the ``.npz``
(both atomically), so an entry exists only once it is complete. On load the
``.npz`` is checked against the recorded sha256; a mismatch (or an unreadable
file) emits a :class:`~retest.errors.RetestWarning`, deletes the entry and
counts as a miss, so the caller recomputes; a corrupted file is never used.
When a project store is given, entries are also recorded in its predictions
table (model, dataset, path, sha256) for listings.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from retest._version import __version__
from retest.errors import RetestWarning
from retest.records import LabeledSet, Predictions
from retest.store.artifacts import sha256_file, write_bytes
from retest.store.base import Store
from retest.store.rows import PredictionRecord, utc_now

__all__ = ["PredictionCache", "dataset_fingerprint"]


def dataset_fingerprint(data: LabeledSet) -> str:
    """``"<name>:<sha256 of labels and pixels>"``: the dataset half of a cache key."""
    h = hashlib.sha256()
    h.update(data.name.encode())
    h.update(np.ascontiguousarray(data.labels, dtype=np.int64).tobytes())
    if data.images is not None:
        img = np.ascontiguousarray(data.images)
        h.update(f"{img.dtype.str}{img.shape}".encode())
        h.update(img.tobytes())
    return f"{data.name}:{h.hexdigest()}"


class PredictionCache:
    """Predictions cached as checksummed ``.npz`` files under ``cache_dir``.

    Parameters
    ----------
    cache_dir : path
        Folder of the entries (created on first write).
    store : Store, optional
        Project store whose ``predictions`` table mirrors the entries.
    """

    def __init__(
        self, cache_dir: str | os.PathLike[str], *, store: Store | None = None
    ) -> None:
        self.dir = Path(cache_dir)
        self.store = store

    @staticmethod
    def entry_key(model_key: str, dataset_key: str) -> str:
        return hashlib.sha256(f"{model_key}\0{dataset_key}".encode()).hexdigest()[:40]

    def paths(self, model_key: str, dataset_key: str) -> tuple[Path, Path]:
        """(``.npz``, ``.json``) paths of an entry."""
        key = self.entry_key(model_key, dataset_key)
        return self.dir / f"{key}.npz", self.dir / f"{key}.json"

    def load(self, model_key: str, dataset_key: str) -> Predictions | None:
        """The cached predictions, or ``None`` on a miss or a corrupted entry."""
        npz, meta_path = self.paths(model_key, dataset_key)
        if not meta_path.is_file():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            if (
                meta.get("model_key") != model_key
                or meta.get("dataset_key") != dataset_key
            ):
                raise ValueError("the entry belongs to another model or dataset")
            if not npz.is_file():
                raise ValueError("the .npz file is missing")
            got = sha256_file(npz)
            if got != meta["sha256"]:
                raise ValueError(
                    f"sha256 mismatch (recorded {meta['sha256'][:12]}…, found {got[:12]}…)"
                )
            return _read_npz(npz, meta)
        except (ValueError, KeyError, OSError, TypeError) as err:
            warnings.warn(
                f"cached predictions {npz} are corrupted ({err}); discarding and recomputing.",
                RetestWarning,
                stacklevel=2,
            )
            self._discard(npz, meta_path)
            return None

    def save(self, pred: Predictions, model_key: str, dataset_key: str) -> Path:
        """Write an entry (``.npz`` then its sidecar, both atomically)."""
        npz, meta_path = self.paths(model_key, dataset_key)
        arrays: dict[str, Any] = {"topk": np.asarray(pred.topk)}
        if pred.probs is not None:
            arrays["probs"] = np.asarray(pred.probs)
        buf = io.BytesIO()
        np.savez(buf, allow_pickle=False, **arrays)
        sha = write_bytes(npz, buf.getvalue())
        meta = {
            "model": pred.model,
            "dataset": pred.dataset,
            "n_classes": pred.n_classes,
            "model_key": model_key,
            "dataset_key": dataset_key,
            "file": npz.name,
            "sha256": sha,
            "created": utc_now(),
            "retest_version": __version__,
        }
        write_bytes(
            meta_path, (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode()
        )
        if self.store is not None:
            self.store.predictions.put(
                PredictionRecord(
                    pred.model,
                    pred.dataset,
                    str(npz),
                    sha,
                    str(meta["created"]),
                    {"model_key": model_key, "dataset_key": dataset_key},
                )
            )
        return npz

    def get_or_compute(
        self, model_key: str, dataset_key: str, compute: Callable[[], Predictions]
    ) -> tuple[Predictions, bool]:
        """``(predictions, was_cached)``; ``compute`` runs only on a miss and its
        result is stored only if it returns (a failing run caches nothing)."""
        hit = self.load(model_key, dataset_key)
        if hit is not None:
            return hit, True
        pred = compute()
        self.save(pred, model_key, dataset_key)
        return pred, False

    def _discard(self, *paths: Path) -> None:
        for p in paths:
            p.unlink(missing_ok=True)


def _read_npz(path: Path, meta: dict[str, Any]) -> Predictions:
    with np.load(path, allow_pickle=False) as z:
        topk = z["topk"]
        probs = z["probs"] if "probs" in z.files else None
    return Predictions(
        str(meta["model"]),
        str(meta["dataset"]),
        topk,
        probs=probs,
        n_classes=meta.get("n_classes"),
    )
