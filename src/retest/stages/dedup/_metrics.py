"""The registry of near-duplicate metrics of the ``dedup`` stage.

A metric is one object registered in :data:`DEDUP_METRICS`; adding one is a
module with a :class:`DedupMetric` subclass and ``DEDUP_METRICS.add(name, obj)``
(or an entry point in the ``retest.dedup_metrics`` group). Two kinds:

``exact``
    exact kNN against every reference on vectors the metric provides
    (:meth:`DedupMetric.space`): ``l2`` on pixels, ``features`` on embeddings.
``shortlist``
    a pair distance computed only on the union of the exact metrics' stored
    neighbour lists (:meth:`DedupMetric.pair_distances`): ``dssim`` and ``warp``,
    too costly against a whole dataset.

Each metric has a default review target for the image shape, and may return a
target computed during the run (``features`` calibrates its own, see
:mod:`retest.models.reference_features`); the stage stores it with the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from retest.errors import InputValidationError
from retest.models.embedders import embed, make_embedder, parse_embedder_spec
from retest.models.reference_features import (
    CALIBRATION_PERCENTILE,
    CALIBRATION_QUERIES,
    REFERENCE_EMBEDDER,
    MLPSettings,
    ReferenceMLPEmbedder,
    calibrate_threshold,
    fit_reference_mlp,
    training_fingerprint,
)
from retest.registry import Registry

if TYPE_CHECKING:  # the heavy modules load when a metric runs (a light CLI --help)
    from retest.dedup.ssim import SSIMParams
    from retest.dedup.warp import WarpParams
    from retest.project import Project
    from retest.stages.dedup._inputs import DedupInputs

__all__ = [
    "DEDUP_METRICS",
    "DEFAULT_EMBEDDER",
    "DedupMetric",
    "DedupOptions",
    "MetricContext",
    "Space",
    "check_metric_names",
    "metric_names",
]

DEFAULT_EMBEDDER = REFERENCE_EMBEDDER
_CAL_DATABASE = 20_000
"""Training images searched when calibrating on pixels (a larger set only lowers
the nearest distances a little; fewer keeps the cost bounded on big datasets)."""


def _ssim_params() -> SSIMParams:
    from retest.dedup.ssim import SSIMParams

    return SSIMParams()


def _warp_params() -> WarpParams:
    from retest.dedup.warp import WarpParams

    return WarpParams()


def _default_target(metric: str, shape: Sequence[int]) -> float:
    from retest.dedup.rules import default_thresholds

    return float(default_thresholds(shape)[metric])


@dataclass(frozen=True, slots=True)
class DedupOptions:
    """Run options the metrics read (everything that changes their distances)."""

    k: int = 30
    resize: int | None = None
    embedder: str = DEFAULT_EMBEDDER
    ssim: SSIMParams = field(default_factory=lambda: _ssim_params())
    warp: WarpParams = field(default_factory=lambda: _warp_params())
    seed: int = 0


@dataclass(slots=True)
class MetricContext:
    """One run's inputs, as the metrics see them."""

    project: Project
    inputs: DedupInputs
    cand_px: NDArray[Any]
    ref_px: NDArray[Any]
    run_dir: Path
    options: DedupOptions
    train_pairs: Any = None  # memo of _train_nearest_pairs (l2 and dssim share it)

    @property
    def image_shape(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.inputs.cand_px.shape[1:])


@dataclass(frozen=True, slots=True)
class Space:
    """Vectors of an exact metric and what to store with the run (e.g. ``target``)."""

    queries: NDArray[Any]
    references: NDArray[Any]
    state: dict[str, Any] = field(default_factory=dict)


class DedupMetric:
    """Base class of a dedup metric; subclasses set ``kind`` and one hook."""

    kind: ClassVar[Literal["exact", "shortlist"]] = "exact"
    order: ClassVar[int] = 100  # computation/listing order among metrics of a kind
    summary: ClassVar[str] = ""

    def params(
        self, project: Project, options: DedupOptions, shape: Sequence[int]
    ) -> dict[str, Any]:
        """Settings that change this metric's distances (part of the run fingerprint)."""
        return {}

    def default_target(self, shape: Sequence[int]) -> float:
        """Review target (distance) for images of ``shape`` when none was stored."""
        raise NotImplementedError

    def space(self, ctx: MetricContext) -> Space:
        """Exact metrics: candidate and reference vectors (squared L2 between rows)."""
        raise NotImplementedError

    def pair_distances(
        self,
        q: NDArray[np.uint8],
        r: NDArray[np.uint8],
        qa: NDArray[np.int64],
        ra: NDArray[np.int64],
        options: DedupOptions,
    ) -> NDArray[np.float64]:
        """Shortlist metrics: distance of each pair ``(q[qa[i]], r[ra[i]])``."""
        raise NotImplementedError

    def calibrate(self, ctx: MetricContext) -> dict[str, Any]:
        """Shortlist metrics: a review target read off the originals, stored with
        the run as ``target`` (empty: keep :meth:`default_target`)."""
        return {}


DEDUP_METRICS: Registry[DedupMetric] = Registry(
    "dedup metric", entry_point_group="retest.dedup_metrics"
)


def metric_names(kind: str | None = None) -> tuple[str, ...]:
    """Registered metrics, exact ones first, in computation order."""
    items = [(n, DEDUP_METRICS.get(n)) for n in DEDUP_METRICS.names()]
    items = [(n, m) for n, m in items if kind in (None, m.kind)]
    items.sort(key=lambda nm: (nm[1].kind != "exact", nm[1].order, nm[0]))
    return tuple(n for n, _ in items)


def check_metric_names(metrics: Sequence[str], what: str = "--metrics") -> None:
    """Raise a one-line ConfigError ("did you mean") for unregistered names;
    ``what`` names where the user typed them (an option, an argument, a file)."""
    from retest.errors import ConfigError
    from retest.registry import close_matches

    names = metric_names()
    for m in metrics:
        if m not in names:
            close = close_matches(m, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else "."
            raise ConfigError(f"{what} takes {', '.join(names)}. Got {m!r}{hint}")
    if not metrics:
        raise ConfigError(f"{what} needs at least one metric.")


def _cached_npy(path: Path, compute: Any) -> NDArray[Any]:
    from retest.store.artifacts import read_npy, write_npy

    if not path.is_file():
        arr = compute()
        path.parent.mkdir(parents=True, exist_ok=True)
        write_npy(path, arr)
    return read_npy(path, mmap=True)


# ------------------------------------------------------------------ calibration


def _train_nearest_pairs(
    ctx: MetricContext,
) -> tuple[NDArray[Any], NDArray[np.int64], NDArray[np.int64], NDArray[Any]] | None:
    """A seeded sample of original training images and each one's closest *other*
    training image in pixel L2: ``(images, sample rows, their neighbours' rows,
    squared distances)``; None with fewer than two training images.

    The database is capped (a seeded subset) so the cost stays bounded on large
    datasets; a smaller database only makes the nearest distances a little larger.
    """
    if ctx.train_pairs is None:
        ctx.train_pairs = (_compute_train_pairs(ctx),)
    return ctx.train_pairs[0]  # type: ignore[no-any-return]


def _compute_train_pairs(
    ctx: MetricContext,
) -> tuple[NDArray[Any], NDArray[np.int64], NDArray[np.int64], NDArray[Any]] | None:
    from retest.dedup.knn import knn

    train = np.flatnonzero([r.startswith("train:") for r in ctx.inputs.ref_ids]).astype(
        np.int64
    )
    if train.size < 2:
        return None
    rng = np.random.default_rng([ctx.options.seed, 3])
    if train.size > _CAL_DATABASE:
        train = np.sort(rng.choice(train, _CAL_DATABASE, replace=False))
    q = np.sort(rng.choice(train, min(CALIBRATION_QUERIES, train.size), replace=False))
    x = np.asarray(ctx.ref_px[train])
    flat = x.reshape(len(train), -1)
    pos = np.searchsorted(train, q)
    res = knn(flat[pos], flat, 1, exclude=pos, backend="numpy")
    return x, pos, res.indices[:, 0], res.distances[:, 0]


def _calibrated(d: NDArray[Any], percentile: float, n_database: int) -> dict[str, Any]:
    return {
        "target": float(np.percentile(d, percentile)),
        "target_source": "calibrated",
        "calibration": {
            "percentile": percentile,
            "n_queries": len(d),
            "n_database": int(n_database),
            "median": float(np.median(d)),
        },
    }


# ------------------------------------------------------------------ built-ins


class PixelL2(DedupMetric):
    kind = "exact"
    order = 0
    summary = "squared L2 on raw pixels"

    def default_target(self, shape: Sequence[int]) -> float:
        return _default_target("l2", shape)

    def space(self, ctx: MetricContext) -> Space:
        """Raw pixels; the run also stores the near-original threshold read off the
        originals (:func:`retest.dedup.rules.near_original_threshold`)."""
        from retest.dedup.rules import NEAR_ORIGINAL_PERCENTILE

        state: dict[str, Any] = {}
        pairs = _train_nearest_pairs(ctx)
        if pairs is not None:
            d = pairs[3]
            state["near_original"] = {
                "percentile": NEAR_ORIGINAL_PERCENTILE,
                "distance": float(np.percentile(d, NEAR_ORIGINAL_PERCENTILE)),
                "n_queries": len(d),
                "n_database": len(pairs[0]),
            }
        return Space(ctx.cand_px, ctx.ref_px, state)


def _train_rows(project: Project, settings: MLPSettings) -> list[Any]:
    rows = project.store.references.list(split="train")
    if len(rows) > settings.max_fit:
        rng = np.random.default_rng(settings.seed)
        pick = np.sort(rng.choice(len(rows), settings.max_fit, replace=False))
        rows = [rows[i] for i in pick]
    return rows


def _no_train(project: Project) -> InputValidationError:
    return InputValidationError(
        f"the default features embedder ({REFERENCE_EMBEDDER}) is trained on the "
        f"project's original training images, and {project.root} has none; add them "
        "with `retest reference add --split train`, or pass --embedder (e.g. "
        "fourier) or drop features from --metrics."
    )


class Features(DedupMetric):
    """Squared L2 between embeddings; the threshold is calibrated on the originals.

    With ``reference-mlp`` (default) the embedder is fitted on the project's
    labelled training images and cached under ``arrays/dedup/embedders/``; any
    other spec (:func:`retest.models.embedders.make_embedder`) is used as given.
    Either way, when the project has original training images the review target
    is the low percentile of their nearest-other-image distances
    (:func:`retest.models.reference_features.calibrate_threshold`).
    """

    kind = "exact"
    order = 1
    summary = "squared L2 between embeddings of --embedder"

    def _settings(self, options: DedupOptions) -> MLPSettings:
        _, args = parse_embedder_spec(options.embedder)
        return MLPSettings(seed=args[0] if args else options.seed)

    def _mlp_name(
        self, project: Project, options: DedupOptions, shape: Sequence[int]
    ) -> str:
        settings = self._settings(options)
        rows = _train_rows(project, settings)
        if not rows:
            raise _no_train(project)
        fp = training_fingerprint(
            [r.id for r in rows],
            [r.content_id for r in rows],
            [r.class_id for r in rows],
            shape,
            settings,
        )
        return f"{REFERENCE_EMBEDDER}-{fp}"

    def params(
        self, project: Project, options: DedupOptions, shape: Sequence[int]
    ) -> dict[str, Any]:
        head, _ = parse_embedder_spec(options.embedder)
        if head == REFERENCE_EMBEDDER:
            return {"embedder": self._mlp_name(project, options, shape)}
        return {"embedder": options.embedder}

    def default_target(self, shape: Sequence[int]) -> float:
        return _default_target("features", shape)

    def _train_pixels(self, ctx: MetricContext, rows: list[Any]) -> NDArray[np.uint8]:
        from retest.stages.dedup._inputs import load_images

        return load_images(
            ctx.project,
            rows,
            ctx.options.resize,
            "original training images",
            ctx.image_shape[-1],
        )

    def _reference_mlp(self, ctx: MetricContext) -> ReferenceMLPEmbedder:
        from retest.store.artifacts import record_artifact

        project, options = ctx.project, ctx.options
        name = self._mlp_name(project, options, ctx.image_shape)
        path = project.arrays_dir / "dedup" / "embedders" / f"{name}.npz"
        if path.is_file():
            return ReferenceMLPEmbedder.load(path, name=name)
        settings = self._settings(options)
        rows = _train_rows(project, settings)
        px = self._train_pixels(ctx, rows)
        if px.shape[1:] != ctx.image_shape:
            raise InputValidationError(
                f"original training images are {px.shape[1:]} but candidates are "
                f"{ctx.image_shape}; pass --resize N to compare them at N×N."
            )
        labels = np.asarray([r.class_id for r in rows])
        emb = fit_reference_mlp(px, labels, name=name, settings=settings)
        emb.save(path)
        record_artifact(
            project.store,
            project.root,
            path,
            name=f"dedup/embedder/{name}",
            stage="dedup",
            params={"settings": asdict(settings), "n_train": len(rows)},
        )
        return emb

    def space(self, ctx: MetricContext) -> Space:
        head, _ = parse_embedder_spec(ctx.options.embedder)
        emb: Any
        if head == REFERENCE_EMBEDDER:
            emb = self._reference_mlp(ctx)
        else:
            emb = make_embedder(ctx.options.embedder)
        inp = ctx.inputs
        cf = _cached_npy(
            ctx.run_dir / "candidate_features.npy", lambda: embed(emb, ctx.cand_px)
        )
        rf = _cached_npy(
            ctx.run_dir / "reference_features.npy", lambda: embed(emb, ctx.ref_px)
        )
        state: dict[str, Any] = {
            "embedder": emb.name,
            "embedder_spec": ctx.options.embedder,
        }
        train = [i for i, r in enumerate(inp.ref_ids) if r.startswith("train:")]
        cal_feats: NDArray[Any] | None
        if train:
            cal_feats = np.asarray(rf[np.asarray(train)])
        else:
            rows = _train_rows(ctx.project, MLPSettings(seed=ctx.options.seed))
            cal_feats = embed(emb, self._train_pixels(ctx, rows)) if rows else None
        if cal_feats is not None and len(cal_feats) >= 2:
            cal = calibrate_threshold(cal_feats, seed=ctx.options.seed)
            state["target"] = cal.threshold
            state["target_source"] = "calibrated"
            state["calibration"] = cal.as_dict()
        else:
            state["target_source"] = "default (no original training images)"
        return Space(cf, rf, state)


class DSSIM(DedupMetric):
    kind = "shortlist"
    order = 2
    summary = "structural dissimilarity (1 - SSIM) / 2 on the shortlist"

    def params(
        self, project: Project, options: DedupOptions, shape: Sequence[int]
    ) -> dict[str, Any]:
        return {"ssim": asdict(options.ssim)}

    def default_target(self, shape: Sequence[int]) -> float:
        return _default_target("dssim", shape)

    def pair_distances(
        self,
        q: NDArray[np.uint8],
        r: NDArray[np.uint8],
        qa: NDArray[np.int64],
        ra: NDArray[np.int64],
        options: DedupOptions,
    ) -> NDArray[np.float64]:
        from retest.dedup.ssim import compute_ssim_stats, dssim_pairs

        qs = compute_ssim_stats(q, options.ssim, name="candidate images")
        rs = compute_ssim_stats(r, options.ssim, name="reference images")
        return np.asarray(dssim_pairs(qs, rs, qa, ra), np.float64)

    def calibrate(self, ctx: MetricContext) -> dict[str, Any]:
        """The same rule as ``features``: the 5th percentile, over a seeded sample
        of original training images, of the DSSIM to their closest other training
        image (closest in pixel L2, the shortlist DSSIM is computed on).

        The published 0.2205 was read off 256×256 photos; on small images with
        flat backgrounds most unrelated pairs fall under it, which floods the
        review queue.
        """
        pairs = _train_nearest_pairs(ctx)
        if pairs is None:
            return {}
        x, pos, nn, _ = pairs
        d = self.pair_distances(x, x, pos, nn, ctx.options)
        return _calibrated(d, CALIBRATION_PERCENTILE, len(x))


class Warp(DedupMetric):
    kind = "shortlist"
    order = 3
    summary = "squared L2 up to a small shift/rescale on the shortlist"

    def params(
        self, project: Project, options: DedupOptions, shape: Sequence[int]
    ) -> dict[str, Any]:
        return {"warp": asdict(options.warp)}

    def default_target(self, shape: Sequence[int]) -> float:
        from retest.dedup.warp import warp_threshold

        return warp_threshold(list(shape))

    def pair_distances(
        self,
        q: NDArray[np.uint8],
        r: NDArray[np.uint8],
        qa: NDArray[np.int64],
        ra: NDArray[np.int64],
        options: DedupOptions,
    ) -> NDArray[np.float64]:
        from retest.dedup.warp import warped_sqdist_pairs

        return warped_sqdist_pairs(q, r, qa, ra, **asdict(options.warp))


DEDUP_METRICS.add("l2", PixelL2())
DEDUP_METRICS.add("features", Features())
DEDUP_METRICS.add("dssim", DSSIM())
DEDUP_METRICS.add("warp", Warp())
