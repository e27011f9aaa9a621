"""PyTorch models as runners: TorchScript files, ``nn.Module`` + state-dict weights,
and the testbed's small CNN (trained here on CPU).

torch is optional (``pip install 'retest[torch]'``) and imported only when a torch
runner is used. Inference and training pin the thread count, fork and seed the RNG (and on
non-CPU devices enable ``torch.use_deterministic_algorithms``), so the same
inputs and seed give the same outputs; the caller's torch state is restored.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback, report
from retest.errors import (
    ConfigError,
    DataIntegrityError,
    InputValidationError,
    MissingDependencyError,
)
from retest.models.base import (
    RUNNER_KINDS,
    BatchedRunner,
    array_digest,
    check_train_labels,
    softmax,
)

__all__ = ["TorchRunner", "import_torch", "small_cnn"]

_HINT = "PyTorch is needed for torch models: pip install 'retest[torch]'"


def import_torch() -> Any:
    """Import torch or fail with an install hint."""
    try:
        return importlib.import_module("torch")
    except ImportError as err:  # pragma: no cover - torch is installed in CI
        raise MissingDependencyError(f"{_HINT} ({err}).") from err


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


@contextmanager
def _deterministic(
    threads: int | None, seed: int | None = None, device: str = "cpu"
) -> Iterator[Any]:
    """Pinned threads and a forked, seeded RNG (restored afterwards).

    CPU kernels are deterministic for a fixed thread count, so
    ``torch.use_deterministic_algorithms`` is switched on only for other devices:
    on CPU it would only cost an import of ``torch._inductor`` (seconds).
    """
    torch = import_torch()
    old_threads = torch.get_num_threads()
    strict = device != "cpu"
    old_det = torch.are_deterministic_algorithms_enabled()
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        if threads is not None:
            torch.set_num_threads(int(threads))
        if strict:
            torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            yield torch
        finally:
            if strict:
                torch.use_deterministic_algorithms(old_det)
            torch.set_num_threads(old_threads)


def small_cnn(in_channels: int, n_classes: int, image_size: tuple[int, int]) -> Any:
    """Two conv blocks (16, 32 channels) + a 64-unit head; ~100k weights at 28 px."""
    nn = import_torch().nn
    h, w = (int(image_size[0]) // 2) // 2, (int(image_size[1]) // 2) // 2
    if h < 1 or w < 1:
        raise ConfigError(
            f"small_cnn needs images of at least 4×4 pixels. Got {image_size}."
        )
    return nn.Sequential(
        nn.Conv2d(in_channels, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * h * w, 64),
        nn.ReLU(),
        nn.Linear(64, n_classes),
    )


class TorchRunner(BatchedRunner):
    """Run (and optionally train) a torch model on CPU or ``device``.

    Parameters
    ----------
    name : str
        Model name.
    module : nn.Module or callable, optional
        The network, or a factory ``(in_channels, n_classes, (height, width)) ->
        nn.Module`` called at ``fit`` time with the training images' shape.
    n_classes : int
        Number of classes the output must have.
    path : str, optional
        A TorchScript file, loaded lazily (so the runner pickles to Dask workers).
    outputs : {"logits", "probs"}
        What the network returns; logits go through a softmax.
    mean, std : float, optional
        Input normalisation after scaling uint8 pixels to [0, 1].
    epochs, lr, train_batch_size, random_state, max_train
        Training settings (Adam, seeded shuffling and initialisation).
    """

    default_batch_size = 512

    def __init__(
        self,
        name: str,
        module: Any = None,
        *,
        n_classes: int,
        path: str | None = None,
        device: str = "cpu",
        threads: int | None = 1,
        outputs: str = "logits",
        mean: float | None = None,
        std: float | None = None,
        epochs: int = 2,
        lr: float = 1e-3,
        train_batch_size: int = 128,
        random_state: int = 0,
        max_train: int | None = None,
    ) -> None:
        super().__init__(name, n_classes=n_classes, threads=threads)
        if outputs not in ("logits", "probs"):
            raise ConfigError(f"outputs must be 'logits' or 'probs'. Got {outputs!r}.")
        if module is None and path is None:
            raise ConfigError(
                f"model {name!r}: give a module, a factory or a TorchScript path."
            )
        self.module = module
        self.path = path
        self.device = device
        self.outputs = outputs
        self.mean, self.std = mean, std
        self.epochs, self.lr, self.train_batch_size = (
            int(epochs),
            float(lr),
            int(train_batch_size),
        )
        self.random_state, self.max_train = int(random_state), max_train
        self.fitted = (
            module is not None and not _is_factory(module)
        ) or path is not None
        self.train_digest: str | None = None
        self.source_sha256 = _sha256(Path(path)) if path is not None else None
        self._net: Any = None if path is not None or _is_factory(module) else module

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self.path is not None:
            state["_net"] = None  # TorchScript modules are reloaded from the file
        return state

    def describe(self) -> dict[str, Any]:
        arch = (
            None
            if self.module is None
            else getattr(self.module, "__qualname__", repr(self.module))
        )
        return {
            "runner": "torch",
            "arch": arch,
            "source_sha256": self.source_sha256,
            "train_digest": self.train_digest,
            "outputs": self.outputs,
            "mean": self.mean,
            "std": self.std,
            "training": [
                self.epochs,
                self.lr,
                self.train_batch_size,
                self.random_state,
                self.max_train,
            ],
        }

    def _network(self) -> Any:
        if self._net is None:
            torch = import_torch()
            if self.path is None:
                raise ConfigError(
                    f"model {self.name!r} is not trained yet; call fit() first."
                )
            try:
                self._net = torch.jit.load(self.path, map_location=self.device)
            except Exception as err:
                raise DataIntegrityError(
                    f"cannot load TorchScript file {self.path} ({type(err).__name__}: {err})."
                ) from err
        return self._net

    def _tensor(self, batch: NDArray[Any]) -> Any:
        torch = import_torch()
        x = np.asarray(batch)
        if x.dtype == np.uint8:
            x = x.astype(np.float32) / np.float32(255.0)
            if x.ndim == 3:
                x = x[:, None, :, :]
            elif x.ndim == 4:
                x = x.transpose(0, 3, 1, 2)
        x = np.ascontiguousarray(x, dtype=np.float32)
        if self.mean is not None:
            x = x - np.float32(self.mean)
        if self.std is not None:
            x = x / np.float32(self.std)
        return torch.from_numpy(x).to(self.device)

    def _scores(self, batch: NDArray[Any]) -> NDArray[Any]:
        net = self._network()
        with (
            _deterministic(self.threads, device=self.device) as torch,
            torch.inference_mode(),
        ):
            net.eval()
            out = net(self._tensor(batch))
            arr = out.detach().cpu().numpy()
        if arr.ndim == 2 and arr.shape[1] != self.n_classes:
            return arr  # the base class reports the class-count mismatch
        return softmax(arr) if self.outputs == "logits" and arr.ndim == 2 else arr

    def fit(
        self,
        images: NDArray[Any],
        labels: NDArray[Any],
        *,
        progress: ProgressCallback | None = None,
    ) -> TorchRunner:
        """Train with Adam and cross-entropy for ``epochs`` (seeded)."""
        x = np.asarray(images)
        y = check_train_labels(
            labels, x.shape[0], n_classes=self.n_classes, model=self.name
        )
        digest = array_digest(x, y)
        if self.max_train is not None and x.shape[0] > self.max_train:
            from retest.models.sklearn_runner import stratified_subset

            keep = stratified_subset(y, self.max_train, random_state=self.random_state)
            x, y = x[keep], y[keep]
        with _deterministic(
            self.threads, seed=self.random_state, device=self.device
        ) as torch:
            net = self._build(x)
            self._train(torch, net, x, y, progress)
        self._net, self.fitted, self.train_digest = net, True, digest
        return self

    def _build(self, x: NDArray[Any]) -> Any:
        if self.module is None:
            raise ConfigError(
                f"model {self.name!r} is a TorchScript file and cannot be trained here."
            )
        if _is_factory(self.module):
            channels = 1 if x.ndim == 3 else int(x.shape[-1])
            size = (int(x.shape[1]), int(x.shape[2]))
            return self.module(channels, self.n_classes, size).to(self.device)
        return self.module.to(self.device)

    def _train(
        self,
        torch: Any,
        net: Any,
        x: NDArray[Any],
        y: NDArray[np.int64],
        progress: ProgressCallback | None,
    ) -> None:
        gen = torch.Generator().manual_seed(self.random_state)
        opt = _Adam(torch, list(net.parameters()), lr=self.lr)
        loss_fn = torch.nn.CrossEntropyLoss()
        n, bs = x.shape[0], self.train_batch_size
        steps_per_epoch = -(-n // bs)
        total, task = self.epochs * steps_per_epoch, f"train {self.name}"
        report(progress, task, 0, total)
        net.train()
        yt = torch.from_numpy(y)
        for epoch in range(self.epochs):
            order = torch.randperm(n, generator=gen).numpy()
            for step in range(steps_per_epoch):
                idx = np.sort(order[step * bs : (step + 1) * bs])
                opt.zero_grad()
                loss = loss_fn(net(self._tensor(x[idx])), yt[idx].to(self.device))
                loss.backward()
                opt.step()
                report(progress, task, epoch * steps_per_epoch + step + 1, total)
        net.eval()


class _Adam:
    """Plain Adam (Kingma & Ba), written out because ``torch.optim`` imports
    ``torch._dynamo`` on first use, which costs seconds in every Dask worker."""

    def __init__(
        self,
        torch: Any,
        params: list[Any],
        *,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.torch, self.params, self.lr, self.betas, self.eps = (
            torch,
            params,
            lr,
            betas,
            eps,
        )
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.t = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        b1, b2 = self.betas
        self.t += 1
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        with self.torch.no_grad():
            for p, m, v in zip(self.params, self.m, self.v, strict=True):
                if p.grad is None:
                    continue
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                denom = (v / c2).sqrt_().add_(self.eps)
                p.addcdiv_(m, denom, value=-self.lr / c1)


def _is_factory(obj: Any) -> bool:
    if obj is None or not callable(obj):
        return False
    return not isinstance(obj, import_torch().nn.Module)


def _sha256(path: Path) -> str:
    if not path.is_file():
        raise DataIntegrityError(f"model file {path} does not exist.")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_torchscript(
    path: str, *, name: str, n_classes: int, **options: Any
) -> TorchRunner:
    """Runner kind "torchscript": a file written by ``torch.jit.save``."""
    import_torch()
    return TorchRunner(name, path=path, n_classes=n_classes, **options)


def load_torch_state_dict(
    path: str, *, name: str, n_classes: int, module: Any, **options: Any
) -> TorchRunner:
    """Runner kind "torch": an ``nn.Module`` (or "pkg.mod:factory") + a state-dict file."""
    torch = import_torch()
    if isinstance(module, str):
        mod_name, _, attr = module.partition(":")
        factory: Callable[[], Any] = getattr(importlib.import_module(mod_name), attr)
        module = factory()
    p = Path(path)
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
        module.load_state_dict(state)
    except FileNotFoundError as err:
        raise DataIntegrityError(f"weights file {p} does not exist.") from err
    except (RuntimeError, KeyError) as err:
        raise InputValidationError(
            f"weights {p} do not fit model {name!r}: {str(err).splitlines()[0]}"
        ) from err
    runner = TorchRunner(name, module, n_classes=n_classes, **options)
    runner.source_sha256 = _sha256(p)
    return runner


for _kind, _fn in (("torchscript", load_torchscript), ("torch", load_torch_state_dict)):
    if _kind not in RUNNER_KINDS:
        RUNNER_KINDS.add(_kind, _fn)
