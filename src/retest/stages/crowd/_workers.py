"""Per-worker control accuracy and a suggested approve / reject decision."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retest.labeling.tasks import Task, control_accuracy, hash_worker_id
from retest.project import Project
from retest.stages.crowd._tasks import task_from_row
from retest.stages.crowd.mturk import read_results

__all__ = ["MIN_CONTROL_ACCURACY", "worker_ids_from_results", "worker_report"]


MIN_CONTROL_ACCURACY = 0.6
"""Default bar for :func:`worker_report`, applied to positive and negative controls
separately. Both must be above chance (0.5): a worker who checks every box gets
positive-control accuracy 1.0 but negative-control accuracy 0.0, one who checks
none the reverse, and either averages 0.5 overall, which a single overall bar of
0.5 would approve. 0.6 lets an honest worker miss one control in three."""


def _pooled(hits: int, total: int) -> float | None:
    return hits / total if total else None


def worker_report(
    project: Project,
    *,
    min_accuracy: float = MIN_CONTROL_ACCURACY,
    worker_ids: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Per worker: assignments, control accuracies, statuses and a suggested decision.

    ``pos_accuracy`` is the share of positive controls (originals of the task's
    class) the worker selected, ``neg_accuracy`` the share of negative controls
    (originals of the nearest other class) left unselected, both pooled over the
    worker's assignments; ``control_accuracy`` is the mean per-assignment overall
    accuracy. The decision is ``reject`` when either kind is below
    ``min_accuracy`` (a kind the worker never saw is not judged), ``approve``
    otherwise, and ``review`` when the worker's tasks had no controls at all.
    ``statuses`` counts the worker's assignments by their stored status, so a
    re-import that rejected them shows here. ``worker_ids`` maps hashed worker ids
    to the raw MTurk WorkerIds (see :func:`worker_ids_from_results`); the raw id is
    only reported (``worker_id``), never stored. Computed from the stored events, so
    it covers every import so far.

    Parameters
    ----------
    project : Project
    min_accuracy : float
    worker_ids : mapping of str to str, optional

    Returns
    -------
    list of dict
        One row per worker.
    """
    tasks: dict[str, Task] = {}
    by_assignment: dict[str, dict[str, object]] = {}
    selected: dict[str, set[str]] = defaultdict(set)
    store = project.store
    for e in store.annotations.list(kind="task"):
        if e.assignment_id is None or e.task_id is None:
            continue
        by_assignment.setdefault(
            e.assignment_id,
            {"worker": e.worker, "task": e.task_id, "status": e.assignment_status},
        )
        if e.value:
            selected[e.assignment_id].add(e.item_id)
    stats: dict[str, dict[str, Any]] = {}
    for aid, info in by_assignment.items():
        tid = str(info["task"])
        if tid not in tasks:
            tasks[tid] = task_from_row(store.tasks.get(tid))
        task = tasks[tid]
        w = stats.setdefault(
            str(info["worker"]),
            {"accs": [], "pos": [0, 0], "neg": [0, 0], "statuses": defaultdict(int)},
        )
        w["statuses"][str(info["status"] or "Submitted")] += 1
        chosen = selected[aid]
        w["pos"][0] += sum(1 for i in task.pos_controls if i in chosen)
        w["pos"][1] += len(task.pos_controls)
        w["neg"][0] += sum(1 for i in task.neg_controls if i not in chosen)
        w["neg"][1] += len(task.neg_controls)
        acc = control_accuracy(task, chosen)["overall"]
        if not math.isnan(acc):
            w["accs"].append(acc)
    ids = worker_ids or {}
    report = []
    for worker, w in sorted(stats.items()):
        pos, neg = _pooled(*w["pos"]), _pooled(*w["neg"])
        accs = w["accs"]
        low = [
            f"{name} {v:.2f} < {min_accuracy:g}"
            for name, v in (("pos", pos), ("neg", neg))
            if v is not None and v < min_accuracy
        ]
        if pos is None and neg is None:
            decision, reason = "review", "no control images in their tasks"
        elif low:
            decision, reason = "reject", "; ".join(low)
        else:
            decision, reason = "approve", ""
        report.append(
            {
                "worker": worker,
                "worker_id": ids.get(worker),
                "assignments": sum(w["statuses"].values()),
                "control_accuracy": sum(accs) / len(accs) if accs else None,
                "pos_accuracy": pos,
                "neg_accuracy": neg,
                "statuses": dict(sorted(w["statuses"].items())),
                "decision": decision,
                "reason": reason,
            }
        )
    return report


def worker_ids_from_results(
    results_csv: str | os.PathLike[str], *, secret: bytes
) -> dict[str, str]:
    """Hashed worker id → raw MTurk WorkerId for every worker of a results file.

    The store keeps only the hashes; the requester needs the raw ids to approve or
    reject on MTurk, and the results file they downloaded has them. Nothing is
    written.
    """
    rows, _ = read_results(Path(results_csv))
    out: dict[str, str] = {}
    for _, row in rows:
        raw = (row.get("WorkerId") or "").strip()
        if raw:
            out[hash_worker_id(raw, secret)] = raw
    return out
