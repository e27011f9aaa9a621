"""Immutable records passed between layers.

Array records validate shape, dtype and range on construction, so a bad file is
caught where it is read, with a message naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._validation import check_labels, check_pred_probs, check_topk
from retest.errors import InputValidationError

__all__ = ["LabeledSet", "Predictions"]


@dataclass(frozen=True, slots=True)
class Predictions:
    """One model's predictions on one dataset.

    Parameters
    ----------
    model : str
        Model name.
    dataset : str
        Dataset (test set / revision) name.
    topk : ndarray of shape (n_samples, k)
        Predicted class ids, best first, distinct within a row. ``k`` may be 1.
    probs : ndarray of shape (n_samples, n_classes), optional
        Class scores (probabilities or logits) when the model gives them.
    n_classes : int, optional
        Number of classes; class ids must lie in ``[0, n_classes)``.

    Examples
    --------
    >>> from retest import Predictions
    >>> p = Predictions.from_labels("m", "test", [0, 2, 1])
    >>> p.n, p.k, p.top1.tolist()
    (3, 1, [0, 2, 1])
    """

    model: str
    dataset: str
    topk: NDArray[np.int64]
    probs: NDArray[np.float32] | None = field(default=None, repr=False)
    n_classes: int | None = None

    def __post_init__(self) -> None:
        if not self.model or not isinstance(self.model, str):
            raise InputValidationError(
                f"model name must be a non-empty string. Got {self.model!r}."
            )
        what = f"predictions of model {self.model!r} on {self.dataset!r}"
        topk = check_topk(self.topk, n_classes=self.n_classes, name=what)
        topk.setflags(write=False)
        object.__setattr__(self, "topk", topk)
        if self.probs is not None:
            probs = check_pred_probs(
                self.probs, n_samples=topk.shape[0], name=f"scores of {what}"
            )
            if self.n_classes is not None and probs.shape[1] != self.n_classes:
                raise InputValidationError(
                    f"scores of {what} have {probs.shape[1]} classes, expected {self.n_classes}."
                )
            probs.setflags(write=False)
            object.__setattr__(self, "probs", probs)

    @classmethod
    def from_labels(
        cls,
        model: str,
        dataset: str,
        labels: ArrayLike,
        *,
        n_classes: int | None = None,
    ) -> Predictions:
        """Predictions known only by the predicted class of each example."""
        return cls(
            model, dataset, np.asarray(labels).reshape(-1, 1), n_classes=n_classes
        )

    @classmethod
    def from_scores(
        cls,
        model: str,
        dataset: str,
        scores: ArrayLike,
        *,
        k: int = 5,
        probabilities: bool = True,
    ) -> Predictions:
        """Predictions from an (n, K) score matrix; keeps the scores and the top-k ids.

        Ties are broken by the lower class id (stable sort), so the result is
        deterministic. ``probabilities=True`` additionally requires rows that are
        non-negative and sum to 1.
        """
        what = f"scores of model {model!r} on {dataset!r}"
        s = check_pred_probs(scores, name=what, require_normalized=probabilities)
        kk = min(k, s.shape[1])
        order = np.argsort(-s, axis=1, kind="stable")[:, :kk]
        return cls(
            model, dataset, order.astype(np.int64), probs=s, n_classes=s.shape[1]
        )

    @property
    def n(self) -> int:
        """Number of examples."""
        return int(self.topk.shape[0])

    @property
    def k(self) -> int:
        """How many ranked classes each row holds."""
        return int(self.topk.shape[1])

    @property
    def top1(self) -> NDArray[np.int64]:
        """The best class per example."""
        return self.topk[:, 0]


@dataclass(frozen=True, slots=True)
class LabeledSet:
    """A labeled dataset: labels and, optionally, images and stable ids.

    Parameters
    ----------
    name : str
        Dataset name.
    labels : ndarray of shape (n_samples,)
        Class ids in ``[0, n_classes)``.
    class_names : tuple of str, optional
        Names in class-id order; fixes ``n_classes``.
    images : ndarray of shape (n_samples, H, W[, C]), optional
        uint8 pixels.
    ids : tuple of str, optional
        Stable per-example ids (e.g. sha256 of the pixels).

    Examples
    --------
    >>> import numpy as np
    >>> from retest.records import LabeledSet
    >>> images = np.zeros((3, 4, 4), np.uint8)
    >>> ds = LabeledSet("toy", [1, 0, 1], ("cat", "dog"), images)
    >>> ds.labels.dtype, ds.labels.flags.writeable, ds.class_names
    (dtype('int64'), False, ('cat', 'dog'))
    >>> LabeledSet("toy", [1, 0, 2], ("cat", "dog"))
    Traceback (most recent call last):
    ...
    retest.errors.InputValidationError: labels of 'toy' must be class ids in [0, 2). Got values [2] ...
    >>> LabeledSet("toy", [1, 0], ("cat", "dog"), images)
    Traceback (most recent call last):
    ...
    retest.errors.InputValidationError: 'toy': 3 images but 2 labels.
    """

    name: str
    labels: NDArray[np.int64]
    class_names: tuple[str, ...] | None = None
    images: NDArray[np.uint8] | None = field(default=None, repr=False)
    ids: tuple[str, ...] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        k = len(self.class_names) if self.class_names is not None else None
        labels = check_labels(self.labels, n_classes=k, name=f"labels of {self.name!r}")
        labels.setflags(write=False)
        object.__setattr__(self, "labels", labels)
        if self.class_names is not None:
            object.__setattr__(self, "class_names", tuple(self.class_names))
        n = labels.shape[0]
        if self.images is not None:
            imgs = np.asarray(self.images)
            if imgs.shape[0] != n:
                raise InputValidationError(
                    f"{self.name!r}: {imgs.shape[0]} images but {n} labels."
                )
            if imgs.dtype != np.uint8 or imgs.ndim not in (3, 4):
                raise InputValidationError(
                    f"{self.name!r}: images must be uint8 (N, H, W[, C]). "
                    f"Got {imgs.dtype} {imgs.shape}."
                )
            object.__setattr__(self, "images", imgs)
        if self.ids is not None:
            ids = tuple(self.ids)
            if len(ids) != n:
                raise InputValidationError(
                    f"{self.name!r}: {len(ids)} ids but {n} labels."
                )
            object.__setattr__(self, "ids", ids)

    @property
    def n(self) -> int:
        return int(self.labels.shape[0])

    @property
    def n_classes(self) -> int:
        if self.class_names is not None:
            return len(self.class_names)
        return int(self.labels.max()) + 1
