"""Crowd labeling tasks (ImageNet-style grids) and their quality controls.

A task shows a grid of images for one target class; the labeler checks every image
that contains the class. Composition follows the ImageNetV2 HIT generator
(docs/algorithms.md#crowd-tasks): 42 candidates + 3 originals of the class (positive
controls) + 3 originals of the nearest class (negative controls), shuffled with a seed.
When a class has fewer candidates than a full grid, its last grid is topped up with
candidates drawn from the class's earlier grids; a class with fewer candidates
than one grid gets extra controls instead (half positive, rounded up).

The published code seeded NumPy's global RNG once; here the whole batch draws
from one ``numpy.random.Generator`` in a fixed order (classes in the given order),
so the same inputs and seed give the same tasks.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retest._validation import RandomStateLike, check_random_state
from retest.errors import ConfigError, InputValidationError

__all__ = [
    "Task",
    "compose_tasks",
    "control_accuracy",
    "hash_worker_id",
    "image_token",
    "task_id",
]


@dataclass(frozen=True, slots=True)
class Task:
    """One grid task.

    Attributes
    ----------
    task_id : str
        Stable id: sha256 of the class and the shown images in order.
    class_id : int
        Target class.
    items : tuple of str
        Image ids in display order (candidates and controls mixed).
    candidates, pos_controls, neg_controls : tuple of str
        The three groups the grid was made from.
    neg_class_id : int
        Class of the negative controls.
    """

    task_id: str
    class_id: int
    items: tuple[str, ...]
    candidates: tuple[str, ...]
    pos_controls: tuple[str, ...]
    neg_controls: tuple[str, ...]
    neg_class_id: int


def task_id(class_id: int, items: Sequence[str]) -> str:
    """Content-derived task id (the same grid always gets the same id)."""
    h = hashlib.sha256(f"{class_id}|".encode())
    h.update("\x1f".join(items).encode())
    return h.hexdigest()[:32]


def _chunks(ids: Sequence[str], size: int) -> list[list[str]]:
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


def _draw(
    pool: Sequence[str], n: int, rng: np.random.Generator, what: str
) -> list[str]:
    if n > len(pool):
        raise InputValidationError(
            f"{what}: need {n} distinct original images but only {len(pool)} exist. "
            "Register more original images or lower the number of controls."
        )
    idx = rng.choice(len(pool), size=n, replace=False)
    return [pool[int(i)] for i in idx]


def compose_tasks(
    candidates_by_class: Mapping[int, Sequence[str]],
    originals_by_class: Mapping[int, Sequence[str]],
    nearest_class: Mapping[int, int],
    *,
    images_per_task: int = 48,
    pos_controls: int = 3,
    neg_controls: int = 3,
    random_state: RandomStateLike = 0,
) -> list[Task]:
    """Split each class's candidates into grid tasks with controls.

    See docs/algorithms.md#crowd-tasks.

    Parameters
    ----------
    candidates_by_class : mapping of int to sequence of str
        Candidate ids to label, per target class, in the order to use.
    originals_by_class : mapping of int to sequence of str
        Original (reference) image ids per class, the pool for controls.
    nearest_class : mapping of int to int
        The class whose originals serve as negative controls for each class.
    images_per_task : int
        Grid size (48 in ImageNetV2).
    pos_controls, neg_controls : int
        Controls per full grid (3 and 3).
    random_state : int or Generator
        Seed for top-up draws, control draws and the shuffle.

    Returns
    -------
    list of Task
        In class order, then chunk order.
    """
    per_task = images_per_task - pos_controls - neg_controls
    if per_task <= 0 or pos_controls < 0 or neg_controls < 0:
        raise ConfigError(
            f"images_per_task ({images_per_task}) must exceed pos_controls + neg_controls "
            f"({pos_controls} + {neg_controls})."
        )
    rng = check_random_state(random_state)
    tasks: list[Task] = []
    for cls, cands in candidates_by_class.items():
        ids = list(cands)
        if len(set(ids)) != len(ids):
            raise InputValidationError(
                f"class {cls}: candidate ids repeat within the class."
            )
        if not ids:
            continue
        if cls not in nearest_class:
            raise InputValidationError(
                f"class {cls} has no nearest class for negative controls."
            )
        lines = _chunks(ids, per_task)
        tail = lines[-1]
        if len(lines) > 1 and len(tail) < per_task:
            head = ids[: len(ids) - len(tail)]
            tail.extend(_draw(head, per_task - len(tail), rng, f"class {cls} top-up"))
        neg_cls = nearest_class[cls]
        if neg_cls == cls:
            raise ConfigError(
                f"class {cls}: the nearest class for negative controls must be another "
                "class. Fix the nearest-class map."
            )
        for line in lines:
            extra = per_task - len(line)
            n_pos = pos_controls + math.ceil(extra / 2)
            n_neg = neg_controls + extra // 2
            pos = _draw(
                list(originals_by_class.get(cls, ())), n_pos, rng, f"class {cls}"
            )
            neg = _draw(
                list(originals_by_class.get(neg_cls, ())),
                n_neg,
                rng,
                f"class {neg_cls}",
            )
            items = line + pos + neg
            order = rng.permutation(len(items))
            shown = tuple(items[int(i)] for i in order)
            tasks.append(
                Task(
                    task_id(cls, shown),
                    int(cls),
                    shown,
                    tuple(line),
                    tuple(pos),
                    tuple(neg),
                    int(neg_cls),
                )
            )
    return tasks


def control_accuracy(
    task: Task, selected: set[str] | frozenset[str]
) -> dict[str, float]:
    """Accuracy of one answer on the task's controls.

    Returns ``overall`` = (positives selected + negatives not selected) / #controls,
    and ``pos`` / ``neg`` separately (NaN when a task has none of that kind).
    """
    pos_hits = sum(1 for i in task.pos_controls if i in selected)
    neg_hits = sum(1 for i in task.neg_controls if i not in selected)
    n_pos, n_neg = len(task.pos_controls), len(task.neg_controls)
    total = n_pos + n_neg
    return {
        "overall": (pos_hits + neg_hits) / total if total else float("nan"),
        "pos": pos_hits / n_pos if n_pos else float("nan"),
        "neg": neg_hits / n_neg if n_neg else float("nan"),
    }


def image_token(image_id: str, secret: bytes, *, length: int = 32) -> str:
    """Opaque, unguessable token for an image id (HMAC-SHA256, URL-safe hex).

    Workers see only tokens, so originals and candidates look alike; the
    token → id mapping stays in the project. A tampered token matches nothing.
    (ImageNetV2 used AES-CBC encryption of the id; an HMAC with a stored mapping
    gives the same guarantees without a cryptography dependency.)
    """
    if len(secret) < 16:
        raise ConfigError("the obfuscation secret must be at least 16 bytes long.")
    return hmac.new(secret, image_id.encode(), hashlib.sha256).hexdigest()[:length]


def hash_worker_id(worker_id: str, secret: bytes) -> str:
    """Pseudonymous worker id: sha256(worker_id + secret), as ImageNetV2 stored them."""
    return hashlib.sha256(worker_id.encode() + secret).hexdigest()
