"""The input contract of model files, its check, and grayscale/RGB adapters.

What a model file (``retest evaluate --model-file``: TorchScript ``.pt``/``.ts``,
ONNX ``.onnx``) receives, per batch:

* dtype float32, scale [0, 1] (the stored uint8 pixels / 255), then the runner's
  ``mean``/``std`` if set;
* layout NCHW ``(N, C, H, W)`` (ONNX: ``--onnx-layout NCHW|NHWC|flat``);
* channels: those of the project's original images: C = 1 for grayscale
  (Fashion-MNIST 28×28), C = 3 for RGB (CIFAR 32×32);
* output ``(N, n_classes)`` scores: logits (softmax is applied) or
  probabilities, class ids in the project's order.

A model trained on the other channel count is adapted with ``--model-channels``:
``3`` stacks a grey image three times, ``1`` turns RGB into grey (ITU-R 601-2
luma, as Pillow's ``convert("L")``). :func:`check_model_input` runs each model
file on two images of the original test set before anything else runs, and turns
a failure into one line naming the model, what it was given and the contract.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback
from retest.errors import ConfigError, InputValidationError
from retest.records import Predictions

__all__ = ["CONTRACT", "ChannelAdapter", "check_model_input", "to_channels"]

CONTRACT = (
    "model files get float32 in [0, 1], NCHW (N, C, H, W) with the originals' "
    "channels (1 grey, 3 RGB), and return (N, n_classes) logits or probabilities"
)

_LUMA = np.array([0.299, 0.587, 0.114], np.float64)


def to_channels(images: NDArray[np.uint8], channels: int) -> NDArray[np.uint8]:
    """uint8 images ``(N, H, W)`` or ``(N, H, W, C)`` with ``channels`` channels.

    >>> g = np.arange(4, dtype=np.uint8).reshape(1, 2, 2)
    >>> to_channels(g, 3).shape, to_channels(to_channels(g, 3), 1).tolist()
    ((1, 2, 2, 3), [[[0, 1], [2, 3]]])
    """
    x = np.asarray(images)
    have = 1 if x.ndim == 3 else int(x.shape[-1])
    if channels == have:
        return x
    if channels == 3 and have == 1:
        grey = x if x.ndim == 3 else x[..., 0]
        return np.repeat(grey[..., None], 3, axis=-1)
    if channels == 1 and have == 3:
        luma = x.astype(np.float64) @ _LUMA
        return np.clip(np.rint(luma), 0, 255).astype(np.uint8)
    raise ConfigError(
        f"--model-channels {channels}: cannot adapt images with {have} channels; "
        "1 (grey) and 3 (RGB) are supported."
    )


class ChannelAdapter:
    """A model runner fed images converted to ``channels`` channels first."""

    def __init__(self, runner: Any, channels: int) -> None:
        if channels not in (1, 3):
            raise ConfigError(f"--model-channels must be 1 or 3. Got {channels}.")
        self.runner, self.channels = runner, channels
        self.name, self.n_classes = runner.name, runner.n_classes
        self.fitted = getattr(runner, "fitted", True)

    def describe(self) -> dict[str, Any]:
        return {**self.runner.describe(), "input_channels": self.channels}

    def predict(
        self,
        images: NDArray[Any],
        *,
        dataset: str = "data",
        batch_size: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> Predictions:
        x = to_channels(images, self.channels)
        return self.runner.predict(  # type: ignore[no-any-return]
            x, dataset=dataset, batch_size=batch_size, progress=progress
        )


def check_model_input(runner: Any, images: NDArray[np.uint8], *, spec: str) -> None:
    """Run ``runner`` on the first two ``images``; a failure is one line.

    Raises
    ------
    InputValidationError
        The model does not take the images (names the shape it got and the
        contract) or returns scores of another class count.
    """
    x = np.asarray(images[:2])
    channels = 1 if x.ndim == 3 else int(x.shape[-1])
    given = f"{tuple(x.shape[1:])} uint8 images with {channels} channel" + (
        "s" if channels > 1 else ""
    )
    other = 3 if channels == 1 else 1
    try:
        pred = runner.predict(x, dataset="input-check")
    except Exception as err:  # the model's own code: any failure is a mismatch
        first = (str(err).strip().splitlines() or [type(err).__name__])[-1]
        hint = (
            f"; if it was trained on {'RGB' if other == 3 else 'grey'} images, pass "
            f"--model-channels {other}"
            if not isinstance(runner, ChannelAdapter)
            else ""
        )
        raise InputValidationError(
            f"--model-file {spec}: the model fails on the test set's {given} "
            f"({type(err).__name__}: {first[:200]}); {CONTRACT}{hint}."
        ) from None
    if pred.n != len(x):
        raise InputValidationError(
            f"--model-file {spec}: returned {pred.n} rows for {len(x)} images; "
            f"{CONTRACT}."
        )
