"""Feature extractors for the ``features`` near-duplicate metric.

An :class:`Embedder` maps uint8 images (N, H, W, C) to float32 features (N, d).
Built-ins: ``reference-mlp`` (the dedup default, trained on the project's
original training images: :mod:`retest.models.reference_features`), a seeded
random projection (deterministic; tests and quick runs, never a default), any
torch module or TorchScript file, an ONNX model (onnxruntime) and any callable.
The published ImageNetV2 pipeline used VGG-16 fc7 on raw 0–255 pixels
(docs/algorithms.md#features); wrap such a network with :class:`TorchEmbedder`
(``scale=1.0`` keeps that quirk).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from retest.errors import ConfigError, InputValidationError
from retest.registry import Registry

__all__ = [
    "EMBEDDERS",
    "CallableEmbedder",
    "Embedder",
    "FourierEmbedder",
    "OnnxEmbedder",
    "RandomProjectionEmbedder",
    "TorchEmbedder",
    "embed",
    "make_embedder",
    "parse_embedder_spec",
]


@runtime_checkable
class Embedder(Protocol):
    """``name``, output ``dim`` and ``__call__(images uint8 NHWC) -> float32 (N, dim)``."""

    name: str
    dim: int

    def __call__(self, images: NDArray[np.uint8]) -> NDArray[np.float32]: ...


def _check_images(images: Any) -> NDArray[np.uint8]:
    a = np.asarray(images)
    if a.ndim == 3:
        a = a[..., None]
    if a.ndim != 4 or a.dtype != np.uint8:
        raise InputValidationError(
            f"embedders take uint8 images of shape (n, H, W[, C]). Got {a.dtype} {a.shape}."
        )
    return a


def _check_out(out: Any, n: int, name: str) -> NDArray[np.float32]:
    f = np.asarray(out, dtype=np.float32).reshape(n, -1)
    if not np.isfinite(f).all():
        rows = np.flatnonzero(~np.isfinite(f).all(axis=1))
        raise InputValidationError(
            f"embedder {name!r} produced NaN/inf features for images {rows[:5].tolist()}."
        )
    return f


class RandomProjectionEmbedder:
    """Gaussian random projection of the pixels scaled to [0, 1] (seeded).

    Preserves L2 distances approximately (Johnson–Lindenstrauss), so near-copies
    stay close; the projection matrix depends only on ``seed`` and the input size.
    """

    def __init__(self, dim: int = 64, *, seed: int = 0) -> None:
        if dim < 1:
            raise ConfigError(f"dim must be positive. Got {dim}.")
        self.dim = int(dim)
        self.seed = int(seed)
        self.name = f"random-projection-{dim}-s{seed}"
        self._mats: dict[int, NDArray[np.float32]] = {}

    def _matrix(self, d_in: int) -> NDArray[np.float32]:
        if d_in not in self._mats:
            rng = np.random.default_rng([self.seed, d_in])
            m = rng.standard_normal((d_in, self.dim)) / np.sqrt(self.dim)
            self._mats[d_in] = m.astype(np.float32)
        return self._mats[d_in]

    def __call__(self, images: NDArray[np.uint8]) -> NDArray[np.float32]:
        a = _check_images(images)
        x = a.reshape(a.shape[0], -1).astype(np.float32) / 255.0
        out = np.asarray(x @ self._matrix(x.shape[1]), dtype=np.float32)
        return out


class FourierEmbedder:
    """Magnitudes of the lowest 2-D Fourier frequencies of the mean-removed image.

    Invariant to circular shifts and brightness offsets, nearly so to small real
    shifts; scaled to unit norm (× 100) so contrast changes cancel. A cheap,
    weight-free stand-in for a CNN embedding in tests and quick runs; it is not
    rotation invariant (a 90° turn is a different pose:
    docs/algorithms.md#what-is-a-near-duplicate).
    """

    def __init__(self, k: int = 10) -> None:
        if k < 2:
            raise ConfigError(f"k must be at least 2. Got {k}.")
        self.k = int(k)
        self.name = f"fourier-{k}"
        self.dim = -1

    def __call__(self, images: NDArray[np.uint8]) -> NDArray[np.float32]:
        a = _check_images(images).astype(np.float32).mean(axis=3)
        a -= a.mean(axis=(1, 2), keepdims=True)
        f = np.abs(np.fft.fft2(a))
        k = min(self.k, a.shape[1] // 2, a.shape[2] // 2)
        low = np.concatenate([f[:, :k, :k], f[:, -k + 1 :, :k]], axis=1)
        out = low.reshape(a.shape[0], -1)
        out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-6
        self.dim = out.shape[1]
        return np.asarray(out * 100.0, dtype=np.float32)


class CallableEmbedder:
    """Wrap any ``fn(images uint8 NHWC) -> (N, dim)`` as an embedder."""

    def __init__(
        self, fn: Callable[[NDArray[np.uint8]], Any], *, name: str, dim: int
    ) -> None:
        self.fn, self.name, self.dim = fn, name, int(dim)

    def __call__(self, images: NDArray[np.uint8]) -> NDArray[np.float32]:
        a = _check_images(images)
        out = _check_out(self.fn(a), a.shape[0], self.name)
        if out.shape[1] != self.dim:
            raise InputValidationError(
                f"embedder {self.name!r} returned {out.shape[1]} features, expected {self.dim}."
            )
        return out


def _nchw(
    a: NDArray[np.uint8], scale: float, mean: Any, std: Any
) -> NDArray[np.float32]:
    x = a.astype(np.float32) * np.float32(scale)
    if mean is not None:
        x -= np.asarray(mean, np.float32)
    if std is not None:
        x /= np.asarray(std, np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


class TorchEmbedder:
    """A torch ``nn.Module`` (or a TorchScript file) run in eval mode on CPU.

    Parameters
    ----------
    model : torch.nn.Module or path
        Module, or the path of a TorchScript file (``torch.jit.save``).
    scale, mean, std
        Input = (pixels · scale − mean) / std, NCHW float32. ``scale=1.0`` with no
        mean/std is the published fc7 featurisation's raw 0–255 input.
    batch_size : int
    """

    def __init__(
        self,
        model: Any,
        *,
        name: str | None = None,
        scale: float = 1 / 255,
        mean: Any = None,
        std: Any = None,
        batch_size: int = 64,
    ) -> None:
        import torch

        if isinstance(model, (str, os.PathLike)):
            path = Path(model)
            _model_path(str(path))
            model = torch.jit.load(str(path), map_location="cpu")
            name = name or path.stem
        self.model = model.eval()
        self.name = name or type(model).__name__
        self.scale, self.mean, self.std = scale, mean, std
        self.batch_size = int(batch_size)
        self.dim = -1  # known after the first call

    def __call__(self, images: NDArray[np.uint8]) -> NDArray[np.float32]:
        import torch

        a = _check_images(images)
        outs = []
        with torch.no_grad():
            for s in range(0, a.shape[0], self.batch_size):
                x = torch.from_numpy(
                    _nchw(a[s : s + self.batch_size], self.scale, self.mean, self.std)
                )
                outs.append(self.model(x).reshape(x.shape[0], -1).numpy())
        out = _check_out(np.concatenate(outs), a.shape[0], self.name)
        self.dim = out.shape[1]
        return out


class OnnxEmbedder:
    """An ONNX model run with onnxruntime (CPU); first input takes NCHW float32."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        scale: float = 1 / 255,
        mean: Any = None,
        std: Any = None,
        batch_size: int = 64,
    ) -> None:
        import onnxruntime as ort

        p = Path(path)
        _model_path(str(p))
        self.session = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name
        self.name = name or p.stem
        self.scale, self.mean, self.std = scale, mean, std
        self.batch_size = int(batch_size)
        self.dim = -1

    def __call__(self, images: NDArray[np.uint8]) -> NDArray[np.float32]:
        a = _check_images(images)
        outs = []
        for s in range(0, a.shape[0], self.batch_size):
            x = _nchw(a[s : s + self.batch_size], self.scale, self.mean, self.std)
            res = self.session.run(None, {self.input_name: x})[0]
            outs.append(np.asarray(res).reshape(x.shape[0], -1))
        out = _check_out(np.concatenate(outs), a.shape[0], self.name)
        self.dim = out.shape[1]
        return out


def _needs_training(**_: Any) -> Embedder:
    raise ConfigError(
        "embedder 'reference-mlp' is trained on the project's original training "
        "images; it is built by `retest dedup` (pipeline.dedup.run_dedup), not alone."
    )


EMBEDDERS: Registry[Callable[..., Embedder]] = Registry(
    "embedder", entry_point_group="retest.embedders"
)
EMBEDDERS.add("reference-mlp", _needs_training)
EMBEDDERS.add("random-projection", RandomProjectionEmbedder)
EMBEDDERS.add("fourier", FourierEmbedder)
EMBEDDERS.add("torchscript", TorchEmbedder)
EMBEDDERS.add("onnx", OnnxEmbedder)

_INT_ARGS = {
    "reference-mlp": ("reference-mlp[:SEED]", 1),
    "random-projection": ("random-projection[:DIM[:SEED]]", 2),
    "fourier": ("fourier[:K]", 1),
}


def parse_embedder_spec(spec: str) -> tuple[str, list[Any]]:
    """Check an embedder spec and split it into ``(head, args)`` without building it.

    Integer arguments are converted; a model path is returned as one string
    argument. Raises :class:`~retest.errors.ConfigError` (or ``UnknownNameError``
    with close matches) naming the spec and its expected form.
    """
    spec = spec.strip()
    head, _, rest = spec.partition(":")
    if head.endswith(".onnx"):
        return "onnx", [_model_path(spec)]
    if head.endswith((".pt", ".ts")):
        return "torchscript", [_model_path(spec)]
    if not head:
        raise ConfigError(
            f"--embedder needs a name, e.g. reference-mlp or fourier:10. Got {spec!r}."
        )
    EMBEDDERS.get(head)  # unknown names: "did you mean"
    if head in _INT_ARGS:
        form, most = _INT_ARGS[head]
        parts = rest.split(":") if rest else []
        try:
            args = [int(p) for p in parts]
        except ValueError:
            args = []
            parts = ["x"] * (most + 1)
        if len(parts) > most or any(a < 0 for a in args):
            raise ConfigError(
                f"embedder spec {spec!r} is not of the form {form} with "
                "non-negative integers."
            )
        low = {"random-projection": 1, "fourier": 2}.get(head, 0)
        if args and args[0] < low:
            what = "dim" if head == "random-projection" else "k"
            raise ConfigError(
                f"embedder spec {spec!r}: {what} must be at least {low}. Got {args[0]}."
            )
        return head, args
    if not rest:
        raise ConfigError(f"embedder {head!r} needs a model path: {head}:PATH.")
    return head, [_model_path(rest)]


def _model_path(path: str) -> str:
    """The path of a model file, or one line saying why it is not one (exit 1)."""
    p = Path(path)
    if p.is_dir():
        raise InputValidationError(
            f"embedder model file {path} is a directory; pass the model file itself "
            "(a TorchScript .pt/.ts or an .onnx file)."
        )
    if not p.is_file():
        raise InputValidationError(
            f"embedder model file {path} does not exist; check the path (a "
            "TorchScript .pt/.ts or an .onnx file)."
        )
    return path


def make_embedder(spec: str) -> Embedder:
    """Build an embedder from a CLI spec.

    ``random-projection[:DIM[:SEED]]``, ``fourier[:K]``, ``torchscript:PATH``,
    ``onnx:PATH``, or a
    path ending in ``.pt``/``.ts`` (TorchScript) or ``.onnx``.
    ``reference-mlp`` (the dedup default) needs the project's training images
    and is built by :func:`retest.stages.dedup._dedup.run_dedup`.
    """
    head, args = parse_embedder_spec(spec)
    factory = EMBEDDERS.get(head)
    if head == "random-projection":
        return factory(*args[:1], **({"seed": args[1]} if len(args) > 1 else {}))
    return factory(*args)


def embed(
    embedder: Embedder, images: NDArray[np.uint8], *, batch_size: int = 1024
) -> NDArray[np.float32]:
    """Run ``embedder`` over ``images`` in batches (bounded memory)."""
    a = _check_images(images)
    parts = [embedder(a[s : s + batch_size]) for s in range(0, a.shape[0], batch_size)]
    return (
        np.concatenate(parts)
        if parts
        else np.zeros((0, max(embedder.dim, 0)), np.float32)
    )
