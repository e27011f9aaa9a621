"""``retest demo``: the whole job on Fashion-MNIST, as an i.i.d. control.

The original dataset is Fashion-MNIST with a smaller training set: a seeded,
class-stratified hold-out of ``pool_size`` (10,000) training images becomes the
candidate pool and the other 50,000 the reference training set; the 10,000 test
images are the reference test set. Because the pool is drawn from the same
distribution as the test set, a correct pipeline shows **no real drop**: the
mean gap stays within sampling error and the fit of new vs original accuracy has
slope ≈ 1 (the i.i.d. control).

Steps (the data steps are runs of the checkpoint stage ``demo`` whose state is
the step's result, :mod:`retest.project._checkpoint`, so a rerun reuses finished
ones; ``evaluate`` is resumed by the prediction cache, and ``compare`` and
``label-errors`` are cheap enough to redo):

``split`` → ``reference`` → ``ingest`` → ``dedup`` → ``near-duplicates`` →
``sample`` → ``export`` → ``evaluate`` → ``compare`` → ``label-errors``.

Decisions
---------
* Which pool images may be sampled is decided by the project's shared rule,
  :func:`retest.project._eligibility.candidate_eligibility`, as for any project:
  exact copies of an original, pool images whose nearest original lies within
  the near-original threshold (CIFAR-10.1's "plain L2 ≤ 1000 on 32×32×3",
  squared and scaled to 28×28 grey values: 255,208), and all but one member of
  each within-pool near-duplicate group are excluded. The demo has no human
  reviewer, so pairs awaiting a near-duplicate review do not block sampling
  (``include_unreviewed``; their number is reported): excluding them would drop
  the pool images closest to the originals and bias the i.i.d. control.
* Pool labels are Fashion-MNIST's own; class-balanced sampling needs no
  annotations (``min_annotations`` 0), so no annotation events are written.
* Label errors of the test set: confident learning on the mean of the testbed
  models' scores (softmax of decision scores where a model has no
  probabilities; :func:`retest.label_errors.ensemble_pred_probs` ``mode="auto"``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback, report
from retest.config import CONFIG_NAME
from retest.datasets.base import fetch_dataset
from retest.errors import ConfigError
from retest.evaluate.fits import LinearFit
from retest.evaluate.table import ComparisonTable
from retest.label_errors.ensemble import ensemble_pred_probs
from retest.label_errors.ranking import LabelError
from retest.project import (
    AGAINST,
    Checkpoint,
    Eligibility,
    Project,
    candidate_eligibility,
    check_fresh,
    copies,
)
from retest.records import LabeledSet
from retest.stages.dedup import dedup_report, run_dedup
from retest.stages.evaluate import evaluate_project, project_models
from retest.stages.export import export_revision
from retest.stages.ingest import add_source
from retest.stages.label_errors import LabelErrorInputs, run_label_errors
from retest.stages.reference import register_reference_arrays
from retest.stages.revisions import create_revision
from retest.store.artifacts import write_bytes, write_json
from retest.store.rows import split_reference_id

__all__ = [
    "DEMO_STAGE",
    "STEPS",
    "DemoResult",
    "DemoSettings",
    "run_demo",
]

DEMO_STAGE = "demo"
PROJECT_NAME = "fashion-mnist-demo"
POOL_NAME = "fashion-mnist-pool"
STEPS = (
    "split", "reference", "ingest", "dedup", "near-duplicates", "sample",
    "export", "evaluate", "compare", "label-errors",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class DemoSettings:
    """What a demo run does; fixed for a demo folder (recorded in ``demo/settings.json``)."""

    quick: bool = False
    seed: int = 0
    pool_size: int = 10_000
    per_class: int = 200
    knn_k: int = 10
    n_boot: int = 100_000

    @classmethod
    def for_run(cls, *, quick: bool = False, seed: int = 0) -> DemoSettings:
        """The demo's settings: ``quick`` uses the quick testbed and a 4,000-image
        pool (400 per class; the near-duplicate search is the slowest data step)."""
        return cls(quick=quick, seed=seed, pool_size=4_000 if quick else 10_000)

    @property
    def preset(self) -> str:
        return "quick" if self.quick else "full"

    def key(self) -> dict[str, Any]:
        """Settings that decide the data steps (changing them needs a new folder)."""
        return {
            "seed": self.seed,
            "pool_size": self.pool_size,
            "per_class": self.per_class,
            "knn_k": self.knn_k,
            "near_duplicates": "candidate_eligibility",
        }


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo produced; ``summary`` is the one-line answer."""

    root: Path
    settings: DemoSettings
    revision: str
    table: ComparisonTable
    fit: LinearFit | None
    near_duplicates: Mapping[str, Any]
    label_errors: tuple[LabelError, ...]
    class_names: tuple[str, ...]
    paths: Mapping[str, Path]
    steps_run: tuple[str, ...]
    steps_reused: tuple[str, ...]
    predictions_computed: int
    mean_gap: float
    gap_se: float
    summary: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        fit = self.fit.summary() if self.fit is not None else None
        return {
            "root": str(self.root),
            "settings": {"quick": self.settings.quick, **self.settings.key()},
            "revision": self.revision,
            "table": self.table.to_records(),
            "fit": fit,
            "near_duplicates": dict(self.near_duplicates),
            "label_errors": [e.as_dict(self.class_names) for e in self.label_errors],
            "paths": {k: str(v) for k, v in self.paths.items()},
            "steps_run": list(self.steps_run),
            "steps_reused": list(self.steps_reused),
            "predictions_computed": self.predictions_computed,
            "mean_gap": self.mean_gap,
            "gap_se": self.gap_se,
            "summary": self.summary,
            **dict(self.extra),
        }


class _Steps:
    """Runs a step unless its checkpoint says it finished; then its stored result
    is returned. ``demo/steps/<step>.json`` is a copy for people, never read."""

    def __init__(self, project: Project, progress: ProgressCallback | None) -> None:
        self.project = project
        self.progress = progress
        self.dir = project.root / "demo" / "steps"
        self.run: list[str] = []
        self.reused: list[str] = []

    def __call__(self, name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        cp = Checkpoint(self.project, DEMO_STAGE, name)
        stored = cp.load("result") if cp.done else None
        if stored is not None:
            stored.pop("created")
            self.finish(name, reused=True)
            return stored
        t0 = time.perf_counter()
        result = fn()
        result["seconds"] = round(time.perf_counter() - t0, 2)
        path = self.dir / f"{name}.json"
        write_json(path, result)
        cp.save("result", json.loads(json.dumps(result)))
        cp.finish(artifact=path.relative_to(self.project.root).as_posix())
        self.finish(name, reused=False)
        return result

    def finish(self, name: str, *, reused: bool) -> None:
        (self.reused if reused else self.run).append(name)
        done = len(self.run) + len(self.reused)
        report(self.progress, "demo steps", done, len(STEPS))


def _open_project(root: Path, settings: DemoSettings) -> Project:
    marker = root / "demo" / "settings.json"
    if (root / CONFIG_NAME).is_file():
        project = Project.open(root)
        if marker.is_file():
            old = json.loads(marker.read_text())
            if old != settings.key():
                project.close()
                raise ConfigError(
                    f"{root} holds a demo run with settings {old}, not {settings.key()}. "
                    "Pass another --dir (or the same --seed) to keep both runs."
                )
        elif project.store.candidates.count():
            project.close()
            raise ConfigError(
                f"{root} is a retest project that is not a demo. Pass an empty or new --dir."
            )
    else:
        if root.is_dir() and any(p.name != "demo" for p in root.iterdir()):
            raise ConfigError(
                f"{root} is not empty and not a retest project. Pass an empty or new --dir."
            )
        # the folder was checked above: nothing but an earlier run's demo/ records
        project = Project.init(
            root, name=PROJECT_NAME, classes_from="fashion-mnist", force=True
        )
    write_json(marker, settings.key())
    return project


def stratified_holdout(
    labels: NDArray[np.int64], n: int, seed: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(kept, held-out) sorted indices; ``n`` held out, class-stratified, seeded."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(labels.shape[0])
    kept, held = train_test_split(
        idx, test_size=n, stratify=labels, random_state=seed, shuffle=True
    )
    return np.sort(kept).astype(np.int64), np.sort(held).astype(np.int64)


def _load(
    data_root: str | os.PathLike[str] | None, progress: ProgressCallback | None
) -> tuple[LabeledSet, LabeledSet]:
    src = fetch_dataset("fashion_mnist", root=data_root, progress=progress)
    return src.load("train"), src.load("test")


def _nearest(project: Project) -> dict[str, dict[str, tuple[str, float]]]:
    """``candidate → {"train"|"test"|"pool": (nearest id, squared L2)}``."""
    out: dict[str, dict[str, tuple[str, float]]] = {}
    for nl in project.store.neardup.iter_neighbours(metric="l2"):
        per: dict[str, tuple[str, float]] = {}
        for ref, d in zip(nl.ref_ids, nl.distances, strict=True):
            parsed = split_reference_id(ref)
            kind = parsed[0] if parsed is not None else "pool"
            if kind not in per:
                per[kind] = (ref, float(d))
        out[nl.candidate_id] = per
    return out


def near_duplicate_report(
    project: Project, elig: Eligibility, ingest_dups: int
) -> dict[str, Any]:
    """What the shared eligibility rule excluded, and the pairs behind it by kind.

    ``excluded`` is exactly the candidates the rule excludes as copies (of an
    original or of another pool image); ``test``/``train`` count pool images whose
    nearest test/train image lies within the rule's near-original threshold, and
    ``pool_pairs`` the within-pool pairs within it (each pair once).
    """
    th = elig.near_original_threshold
    pairs: dict[str, list[dict[str, Any]]] = {"train": [], "test": [], "pool": []}
    if th is not None:
        for cid, per in sorted(_nearest(project).items()):
            for kind, (ref, d) in per.items():
                if d > th or (kind == "pool" and cid < ref):
                    continue  # each within-pool pair once
                pairs[kind].append({"candidate": cid, "reference": ref, "sq_l2": d})
    for v in pairs.values():
        v.sort(key=lambda p: (p["sq_l2"], p["candidate"]))
    excluded = sorted(copies(elig))
    return {
        "threshold_sq_l2": th,
        "test": len(pairs["test"]),
        "train": len(pairs["train"]),
        "pool_pairs": len(pairs["pool"]),
        "pool_exact_duplicates": ingest_dups,
        "reasons": elig.counts(),
        "unreviewed_included": elig.n_unreviewed_included,
        "excluded": excluded,
        "n_excluded": len(excluded),
        "pairs": pairs,
    }


def run_demo(
    directory: str | os.PathLike[str],
    *,
    settings: DemoSettings | None = None,
    workers: int | None = None,
    data_root: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
) -> DemoResult:
    """Run (or resume) the Fashion-MNIST demo in ``directory``.

    Parameters
    ----------
    directory : path
        Project folder: new, empty, or an earlier demo run with the same settings.
    settings : DemoSettings, optional
        ``quick`` selects the quick testbed preset; the data steps follow the seed.
    workers : int, optional
        Train/evaluate the testbed on a local Dask cluster with this many workers
        (default: in this process, one model after the other).
    data_root : path, optional
        Folder of the four Fashion-MNIST ``.gz`` files (default: Debian's
        ``/usr/share/datasets/fashion-mnist`` when installed, else downloaded).
    """
    s = settings or DemoSettings()
    root = Path(directory).resolve()
    train_all, test = _load(data_root, progress)
    names = tuple(train_all.class_names or ())
    with _open_project(root, s) as project:
        steps = _Steps(project, progress)
        split_path = root / "demo" / "split.npz"

        def split() -> dict[str, Any]:
            kept, held = stratified_holdout(train_all.labels, s.pool_size, s.seed)
            buf = _npz_bytes(kept=kept, held_out=held)
            write_bytes(split_path, buf)
            pool = root / "demo" / "pool.npz"
            write_bytes(
                pool,
                _npz_bytes(
                    images=train_all.images[held],  # type: ignore[index]
                    labels=train_all.labels[held],  # type: ignore[index]
                    class_names=np.array(names),
                    train_index=held,
                ),
            )
            return {
                "n_train": int(kept.size),
                "n_pool": int(held.size),
                "split": str(split_path),
                "pool": str(pool),
            }

        sp = steps("split", split)
        with np.load(split_path) as z:
            kept = z["kept"]
        train = LabeledSet(
            "fashion_mnist-train-kept",
            train_all.labels[kept],
            names,
            train_all.images[kept],  # type: ignore[index]
        )

        def reference() -> dict[str, Any]:
            out = {}
            for split_name, ds in (("train", train), ("test", test)):
                assert ds.images is not None
                rep = register_reference_arrays(
                    project,
                    ds.images,
                    ds.labels,
                    split=split_name,
                    class_names=names,
                    progress=progress,
                )
                out[split_name] = rep.to_json()
            return out

        steps("reference", reference)

        def ingest() -> dict[str, Any]:
            rep = add_source(
                project, "arrays", sp["pool"], name=POOL_NAME, progress=progress
            )
            return rep.to_json()

        ing = steps("ingest", ingest)

        def dedup() -> dict[str, Any]:
            res = run_dedup(
                project,
                against=AGAINST,
                metrics=("l2",),
                k=s.knn_k,
                chunk_size=1000,
                backend="numpy",
                progress=progress,
            )
            return {
                "fingerprint": res.fingerprint,
                "n_candidates": res.n_candidates,
                "n_references": res.n_references,
            }

        steps("dedup", dedup)

        def eligibility() -> Eligibility:
            check_fresh(project)
            return candidate_eligibility(project, include_unreviewed=True)

        def near_dups() -> dict[str, Any]:
            res = near_duplicate_report(project, eligibility(), int(ing["duplicates"]))
            dedup_report(project, top=16, metrics=("l2",))
            return res

        nd = steps("near-duplicates", near_dups)

        def sample() -> dict[str, Any]:
            rev = create_revision(
                project,
                strategy="class-balanced",
                seed=s.seed,
                per_class=s.per_class,
                eligibility=eligibility(),
            )
            return {
                "revision": rev.revision.name,
                "valid": rev.revision.valid,
                "shortfall": dict(rev.revision.shortfall),
            }

        rev = steps("sample", sample)["revision"]

        def export() -> dict[str, Any]:
            res = export_revision(
                project, rev, format="npy", overwrite=True, progress=progress
            )
            return {"revision": rev, "path": str(res.out), "n_images": res.n_images}

        steps("export", export)
        return _evaluate_and_report(project, steps, s, rev, nd, workers, progress)


def _evaluate_and_report(
    project: Project,
    steps: _Steps,
    s: DemoSettings,
    revision: str,
    nd: Mapping[str, Any],
    workers: int | None,
    progress: ProgressCallback | None,
) -> DemoResult:
    """Train/evaluate the testbed (cached) and compare: the same call as ``retest
    evaluate --preset <preset> --seed <seed>``; then label errors and the summary."""
    root = project.root
    out = project.reports_dir / "demo"
    t0 = time.perf_counter()
    models = project_models(project, preset=s.preset, seed=s.seed, progress=progress)
    ev = evaluate_project(
        project,
        models,
        revisions=[revision],
        out_dir=out,
        workers=workers,
        n_boot=s.n_boot,
        seed=s.seed,
        progress=progress,
    )
    seconds = {"evaluate": round(time.perf_counter() - t0, 2)}
    steps.finish("evaluate", reused=not ev.computed)
    steps.finish("compare", reused=False)
    test, new, rep = ev.original, ev.revisions[0], ev.reports[revision]
    preds = ev.pairs(revision)
    t0 = time.perf_counter()
    ens = ensemble_pred_probs(
        [p[0] for p in preds.values()], n_classes=len(project.class_names), mode="auto"
    )
    inputs = LabelErrorInputs(
        test.labels,
        ens.pred_probs,
        {"ensemble": ens.mode, "models": list(ens.models), "dataset": test.name},
        images=test.images,
        class_names=project.class_names,
    )
    le = run_label_errors(inputs, out / "label_errors", top=24)
    steps.finish("label-errors", reused=False)
    seconds["label-errors"] = round(time.perf_counter() - t0, 2)
    gaps = rep.table.column("gap")
    mean_gap = float(np.mean(gaps))
    p = float(np.mean(rep.table.column("new_acc")))
    # SE of one model's gap (binomial at the mean accuracy, both sets).
    se = float(np.sqrt(p * (1 - p) * (1 / new.n + 1 / test.n)))
    summary = _summary(mean_gap, se, rep.fit, int(nd["test"]))
    paths = {
        "project": root,
        "revision": Path(str(project.revisions_dir / new.name / "npy")),
        "predictions": project.arrays_dir / "predictions",
        **{f"report_{k}": v for k, v in rep.paths.items()},
        **{f"label_errors_{k}": v for k, v in le.paths.items()},
        "dedup_sheet": out.parent / "dedup" / "closest_l2.png",
    }
    result = DemoResult(
        root,
        s,
        new.name,
        rep.table,
        rep.fit,
        {k: v for k, v in nd.items() if k not in ("excluded", "pairs")},
        le.ranked,
        project.class_names,
        paths,
        tuple(steps.run),
        tuple(steps.reused),
        ev.computed,
        mean_gap,
        se,
        summary,
        {"seconds": seconds},
    )
    write_json(out / "summary.json", result.as_dict())
    return result


def _summary(
    mean_gap: float, se: float, fit: LinearFit | None, n_test_dups: int
) -> str:
    gap = round(100 * mean_gap, 1) + 0.0  # no "-0.0"
    parts = [f"mean gap {gap:.1f} points (2·SE {200 * se:.1f})"]
    if fit is not None:
        lo, hi = fit.slope_ci
        parts.append(f"slope {fit.slope:.2f} [{lo:.2f}, {hi:.2f}]")
    parts.append(
        f"{n_test_dups} near-duplicates of the test set found in the training pool"
    )
    return "; ".join(parts)


def _npz_bytes(**arrays: Any) -> bytes:
    import io

    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **arrays)
    return buf.getvalue()
