"""Public entry points whose defining function is not already shaped for Python use.

``from retest import ...`` reaches these and the functions listed in
``retest.__all__`` (loaded lazily by ``retest/__init__.py``; ``open_project``,
``init_project`` and ``status`` are the project layer's and the status stage's own
functions). Each function here is a thin, documented front for the module that
does the work: comparing a testbed on two test sets, SSIM over image batches and
running a sampler by name. No algorithm lives here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._validation import RandomStateLike
from retest.errors import ConfigError, InputValidationError
from retest.records import LabeledSet, Predictions

if TYPE_CHECKING:
    from retest.dedup.ssim import SSIMStats
    from retest.sampling.base import SampleResult
    from retest.sampling.eligibility import CandidateInfo
    from retest.stages.compare import CompareResult

__all__ = [
    "compare",
    "dssim",
    "sample",
    "ssim",
]

PathLike = str | os.PathLike[str]
TestbedLike = Mapping[str, Predictions | ArrayLike] | Sequence[Predictions]


# -- comparing a testbed on the original and the new test set


def _as_predictions(model: str, dataset: str, values: ArrayLike) -> Predictions:
    a = np.asarray(values)
    if a.ndim == 2 and a.dtype.kind == "f":  # a score matrix: keep it, rank top-k
        return Predictions.from_scores(model, dataset, a, probabilities=False)
    return Predictions(model, dataset, a.reshape(-1, 1) if a.ndim == 1 else a)


def _testbed(
    predictions: TestbedLike, dataset: str
) -> Mapping[str, Predictions] | Sequence[Predictions]:
    if not isinstance(predictions, Mapping):
        return predictions
    return {
        str(m): p if isinstance(p, Predictions) else _as_predictions(str(m), dataset, p)
        for m, p in predictions.items()
    }


def compare(
    labels_orig: LabeledSet | ArrayLike,
    labels_new: LabeledSet | ArrayLike,
    predictions_orig: TestbedLike,
    predictions_new: TestbedLike,
    *,
    metric: str = "top1",
    confidence: float = 0.95,
    axes: str = "linear",
    n_boot: int = 100_000,
    random_state: int = 0,
    name_orig: str = "original",
    name_new: str = "new",
    out: PathLike | None = None,
    label_models: Sequence[str] = (),
    figure_formats: Sequence[str] = ("png", "pdf"),
    n_classes: int | None = None,
) -> CompareResult:
    """Accuracy of every model on the original and the new test set, and the fit.

    The table is :func:`retest.evaluate.table.compare` (Clopper-Pearson
    intervals, gaps with their interval, ranks); the fit is the OLS line of new
    on original accuracy with a pairs bootstrap over models
    (:func:`retest.evaluate.fits.fit_new_vs_orig`). With ``out`` the report of
    ``retest compare`` (tables, ``fit.json``, figure) is written there as well.

    Parameters
    ----------
    labels_orig, labels_new : LabeledSet or array-like of int
        True classes of the original and the new test set.
    predictions_orig, predictions_new : mapping model → predictions, or sequence of Predictions
        Each model's predictions on that test set, in the labels' order: a
        :class:`~retest.records.Predictions`, an array of predicted classes
        (n,), an integer array of ranked classes (n, k) or a float score
        matrix (n, n_classes). Models on one set only are dropped with a
        :class:`~retest.errors.DroppedModelWarning`.
    metric : {"top1", "top5"}
        Correctness criterion.
    confidence : float
        Level of every interval (accuracies, gaps, fit).
    axes : {"linear", "probit", "logit"}
        Axis scale of the fit.
    n_boot : int
        Bootstrap resamples of the fit.
    random_state : int
        Seed of the bootstrap; same inputs and seed give the same result.
    name_orig, name_new : str
        Test-set names for arrays of predictions (a LabeledSet's own name wins).
    out : path-like, optional
        Folder for the written report (created when missing).
    label_models : sequence of str
        Models named in the figure.
    figure_formats : sequence of str
        Figure files written with ``out``.
    n_classes : int, optional
        Number of classes; without it, labels that look 1-based against the
        predictions are refused (as ``retest compare`` refuses them).

    Returns
    -------
    CompareResult
        ``table`` (a ``ComparisonTable``: rows by original rank, ``to_frame()``
        for pandas), ``fit`` (a ``LinearFit``: slope, intercept, their
        intervals, ``equation()``) and ``paths`` (written files; empty without
        ``out``).

    Raises
    ------
    InputValidationError
        Predictions and labels of different lengths, class ids out of range,
        no model on both test sets, or fewer than 3 models for the fit.
    ConfigError
        An unknown ``metric``/``axes`` value, or ``out`` is not a usable folder.

    Examples
    --------
    >>> import numpy as np
    >>> from retest import compare
    >>> y_orig, y_new = np.arange(100) % 2, np.arange(50) % 2
    >>> def model(y, n_wrong):  # right except on its first n_wrong images
    ...     return np.where(np.arange(y.size) < n_wrong, 1 - y, y)
    >>> orig = {"a": model(y_orig, 10), "b": model(y_orig, 20), "c": model(y_orig, 30)}
    >>> new = {"a": model(y_new, 10), "b": model(y_new, 15), "c": model(y_new, 20)}
    >>> result = compare(y_orig, y_new, orig, new, n_boot=1000)
    >>> [(r.model, r.orig.value, r.new.value, r.rank_delta) for r in result.table.rows]
    [('a', 0.9, 0.8, 0), ('b', 0.8, 0.7, 0), ('c', 0.7, 0.6, 0)]
    >>> result.fit.equation()
    'new = 1.00·orig − 10.0'
    """
    from retest._output import RULES, check_output, claim_output_dir
    from retest.evaluate.table import compare as comparison_table
    from retest.stages.compare import CompareResult, fit_table
    from retest.stages.report import write_report

    rule = RULES["compare"]
    folder = check_output(out, rule, option="out") if out is not None else None
    table = comparison_table(
        labels_orig,
        labels_new,
        _testbed(predictions_orig, name_orig),
        _testbed(predictions_new, name_new),
        metric=metric,
        confidence=confidence,
        n_classes=n_classes,
    )
    fit = fit_table(table, axes=axes, n_boot=n_boot, random_state=random_state)
    paths: dict[str, Path] = {}
    if folder is not None:
        claim_output_dir(folder, rule)
        paths = write_report(
            table, fit, folder, label_models=label_models, figure_formats=figure_formats
        )
    return CompareResult(table, fit, paths)


# -- SSIM over image batches


def _ssim_inputs(
    images1: ArrayLike,
    images2: ArrayLike,
    pairs: tuple[ArrayLike, ArrayLike] | None,
    params: dict[str, Any],
) -> tuple[SSIMStats, SSIMStats, NDArray[np.int64], NDArray[np.int64]]:
    from retest.dedup.ssim import SSIMParams, compute_ssim_stats

    p = SSIMParams(**params)
    q = compute_ssim_stats(images1, p, name="images1")
    r = compute_ssim_stats(images2, p, name="images2")
    if pairs is None:
        if q.n != r.n:
            raise InputValidationError(
                f"images1 has {q.n} images and images2 {r.n}; without pairs= image i "
                "is compared with image i, so pass batches of the same length."
            )
        i = np.arange(q.n, dtype=np.int64)
        return q, r, i, i
    qi, ri = (np.asarray(a, dtype=np.int64) for a in pairs)
    return q, r, qi, ri


def ssim(
    images1: ArrayLike,
    images2: ArrayLike,
    *,
    pairs: tuple[ArrayLike, ArrayLike] | None = None,
    win_size: int | None = None,
    gaussian_weights: bool = False,
    sigma: float = 1.5,
    use_sample_covariance: bool = True,
    data_range: float | None = None,
) -> NDArray[np.float64]:
    """Mean SSIM of image pairs, equal to ``skimage.metrics.structural_similarity``.

    Float64 throughout, equal to skimage within ``retest.dedup.ssim.AGREEMENT``
    (1e-9). Each pair is one fused native pass from the two images' pixels; a
    query's filtered mean and variance are kept while consecutive pairs share it
    (a near-duplicate shortlist), see :mod:`retest.dedup.ssim`.

    Parameters
    ----------
    images1, images2 : array of shape (n, H, W) or (n, H, W, C)
        Batches of channel-last images of one size (a single image: ``x[None]``).
    pairs : (array of int, array of int), optional
        Compare ``images1[pairs[0][t]]`` with ``images2[pairs[1][t]]``; default
        image ``i`` of each batch with image ``i`` of the other (same length).
    win_size, gaussian_weights, sigma, use_sample_covariance, data_range
        skimage's parameters and defaults (window 7, uniform; ``data_range``
        255 for uint8, required for float images).

    Returns
    -------
    ndarray of float64, shape (n_pairs,)
        SSIM per pair, 1 for identical images.

    Raises
    ------
    InputValidationError
        Batches of different image sizes or lengths, a window larger than the
        images, or pair indices out of range.
    ConfigError
        Float images without ``data_range``, or an even ``win_size``.

    Examples
    --------
    >>> import numpy as np
    >>> from retest import ssim
    >>> a = np.tile(np.arange(0, 256, 16, dtype=np.uint8), (16, 1))[None]  # one 16×16 ramp
    >>> b = a // 2
    >>> ssim(a, a).round(4).tolist(), ssim(a, b).round(4).tolist()
    ([1.0], [0.647])
    >>> ssim(np.concatenate([a, b]), a, pairs=([0, 1], [0, 0])).round(4).tolist()
    [1.0, 0.647]
    """
    from retest.dedup.ssim import ssim_pairs

    q, r, qi, ri = _ssim_inputs(
        images1,
        images2,
        pairs,
        {
            "win_size": win_size,
            "gaussian_weights": gaussian_weights,
            "sigma": sigma,
            "use_sample_covariance": use_sample_covariance,
            "data_range": data_range,
        },
    )
    return ssim_pairs(q, r, qi, ri)


def dssim(
    images1: ArrayLike,
    images2: ArrayLike,
    *,
    pairs: tuple[ArrayLike, ArrayLike] | None = None,
    win_size: int | None = None,
    gaussian_weights: bool = False,
    sigma: float = 1.5,
    use_sample_covariance: bool = True,
    data_range: float | None = None,
) -> NDArray[np.float64]:
    """Structural dissimilarity ``(1 − SSIM) / 2`` of image pairs (0 = identical).

    The distance ``retest dedup`` ranks near-duplicate shortlists by; see
    :func:`ssim` for the computation.

    Parameters
    ----------
    images1, images2 : array of shape (n, H, W) or (n, H, W, C)
        Batches of channel-last images of one size.
    pairs : (array of int, array of int), optional
        Index pairs into the two batches; default image ``i`` with image ``i``.
    win_size, gaussian_weights, sigma, use_sample_covariance, data_range
        As for :func:`ssim`.

    Returns
    -------
    ndarray of float64, shape (n_pairs,)
        DSSIM per pair, in [0, 1] up to float32 rounding (identical images give
        about 1e-7 either side of 0).

    Raises
    ------
    InputValidationError
        As for :func:`ssim`.
    ConfigError
        As for :func:`ssim`.

    Examples
    --------
    >>> import numpy as np
    >>> from retest import dssim
    >>> a = np.tile(np.arange(0, 256, 16, dtype=np.uint8), (16, 1))[None]
    >>> dssim(a, a // 2).round(4).tolist(), dssim(a, 255 - a).round(4).tolist()
    ([0.1765], [0.8706])
    """
    from retest.dedup.ssim import dssim_pairs

    q, r, qi, ri = _ssim_inputs(
        images1,
        images2,
        pairs,
        {
            "win_size": win_size,
            "gaussian_weights": gaussian_weights,
            "sigma": sigma,
            "use_sample_covariance": use_sample_covariance,
            "data_range": data_range,
        },
    )
    return dssim_pairs(q, r, qi, ri)


# -- sampling


def sample(
    pool: Sequence[CandidateInfo],
    strategy: str,
    *,
    random_state: RandomStateLike,
    **inputs: Any,
) -> SampleResult:
    """Draw a new test set from a candidate pool with the sampler ``strategy``.

    Parameters
    ----------
    pool : sequence of CandidateInfo
        The candidates: id, class, selection frequency, annotation count,
        blacklist / near-duplicate / review state, keyword.
    strategy : str
        A registered sampler: ``class-balanced``, ``threshold``,
        ``matched-frequency``, ``top-images``, ``keyword-count``,
        ``train-test`` (``retest.sampling.base.SAMPLERS`` lists them).
    random_state : int or numpy.random.Generator
        Seed; required, so every sample can be drawn again.
    **inputs
        What the sampler takes, e.g. ``per_class``, ``classes``, ``threshold``,
        ``targets``, ``keyword_counts``, ``previous``
        (``retest.sampling.base.SAMPLER_INPUTS`` describes each).

    Returns
    -------
    SampleResult
        ``members`` (id, class and how each was drawn), ``is_valid`` (False when
        a class came up short, never silently), ``shortfall`` per class,
        ``class_counts()``.

    Raises
    ------
    InputValidationError
        ``pool`` is not a sequence of CandidateInfo, or is empty without
        ``classes`` (with it, every class is reported short).
    UnknownNameError
        No sampler is called ``strategy`` (with close matches).
    ConfigError
        An input the sampler does not take, or a required input missing.

    Examples
    --------
    >>> from retest import CandidateInfo, sample
    >>> pool = [CandidateInfo(f"{c}-{i}", c, frequency=i / 5, n_assignments=10)
    ...         for c in ("cat", "dog") for i in range(6)]
    >>> s = sample(pool, "top-images", per_class=2, random_state=0)
    >>> s.is_valid, s.ids
    (True, ['cat-4', 'cat-5', 'dog-4', 'dog-5'])
    >>> sample(pool, "class-balanced", per_class=7, random_state=0).shortfall[0].missing
    1
    """
    from retest.sampling.base import run_sampler, sampler_spec
    from retest.sampling.eligibility import CandidateInfo

    if isinstance(pool, (str, bytes)) or not isinstance(pool, Sequence):
        raise InputValidationError(
            "pool must be a list of CandidateInfo (one per candidate). "
            f"Got {type(pool).__name__}."
        )
    for i, c in enumerate(pool):
        if not isinstance(c, CandidateInfo):
            raise InputValidationError(
                f"pool[{i}] is {c!r} of type {type(c).__name__}, not a CandidateInfo; "
                "build each candidate as CandidateInfo(id, class_name, ...)."
            )
    spec = sampler_spec(strategy)
    extra = sorted(set(inputs) - set(spec.inputs))
    if extra:
        takes = ", ".join(spec.inputs) or "no inputs"
        raise ConfigError(
            f"sampler {strategy!r} does not take {', '.join(extra)}; it takes {takes}."
        )
    if not pool and inputs.get("classes") is None:
        # with no candidate and no class list there is no class to come up short
        raise InputValidationError(
            "pool is empty: there is nothing to sample. Pass candidates, or "
            "classes=[...] to get each class's shortfall."
        )
    return run_sampler(strategy, pool, random_state=random_state, **inputs)
