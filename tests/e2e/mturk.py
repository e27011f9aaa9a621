"""MTurk batch results as the requester UI downloads them, for the end-to-end tests.

Simulated workers answer the tasks of a `retest crowd export` folder: what they
see is each token's JPEG, recognised as the nearest known input image. Nothing
here imports retest, so the CLI-only tests run against any version of the CLI.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

HONEST, SEED = 10, 7
MTURK_COLUMNS = [
    "HITId", "HITTypeId", "Title", "Description", "Keywords", "Reward",
    "CreationTime", "MaxAssignments", "RequesterAnnotation",
    "AssignmentDurationInSeconds", "AutoApprovalDelayInSeconds", "Expiration",
    "NumberOfSimilarHITs", "LifetimeInSeconds", "AssignmentId", "WorkerId",
    "AssignmentStatus", "AcceptTime", "SubmitTime", "AutoApprovalTime",
    "ApprovalTime", "RejectionTime", "RequesterFeedback", "WorkTimeInSeconds",
    "LifetimeApprovalRate", "Last30DaysApprovalRate", "Last7DaysApprovalRate",
]  # fmt: skip
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
               "Shirt", "Sneaker", "Bag", "Ankle boot"]  # fmt: skip


def mturk_id(rng: np.random.Generator, n: int, first: str = "") -> str:
    alphabet = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
    return first + "".join(rng.choice(alphabet, n - len(first)))


def mturk_time(minute: int) -> str:
    return f"Tue Nov 24 {10 + minute // 60:02d}:{minute % 60:02d}:00 PST 2026"


def seen_images(
    batch_dir: Path, known: np.ndarray, known_labels: np.ndarray
) -> dict[str, int]:
    """Token → index into ``known`` (N×28×28) of the image its JPEG shows.

    Near-identical images share their label, so a near miss cannot change it.
    """
    flat = known.reshape(len(known), -1).astype(np.float32)
    out = {}
    for path in sorted((batch_dir / "images").glob("*.jpg")):
        img = np.asarray(Image.open(path).convert("L"), np.float32).reshape(1, -1)
        d = ((flat - img) ** 2).sum(1)
        j = int(d.argmin())
        assert d[j] / flat.shape[1] < 10.0**2, f"{path.name} looks like no input image"
        out[path.stem] = j
    return out


def write_results(
    batch_dir: Path, known: np.ndarray, known_labels: np.ndarray
) -> tuple[list[dict[str, str]], str]:
    """Ten honest workers and one spammer answer every task of the batch (seeded).

    Honest workers select an image showing the task's class with that image's
    own probability (0.45–1, i.e. some images are harder than others) and an
    image of another class with probability 0.05; the spammer selects all.
    Returns the rows (MTurk's columns, ``Input.*``, ``Answer.selected``,
    ``Approve``, ``Reject``) and the spammer's WorkerId.
    """
    rng = np.random.default_rng(SEED)
    names = {n: i for i, n in enumerate(CLASS_NAMES)}
    seen = seen_images(batch_dir, known, known_labels)
    truth = {tok: int(known_labels[j]) for tok, j in seen.items()}
    batch = list(csv.DictReader((batch_dir / "batch_input.csv").open(newline="")))
    workers = [mturk_id(rng, 14, "A") for _ in range(HONEST + 1)]
    spammer = workers[-1]
    hit_type = mturk_id(rng, 30)
    rows = []
    for t, task in enumerate(batch):
        tokens = [v for k, v in task.items() if k.startswith("token_") and v]
        cls = names[task["class_name"]]
        p = {
            tok: rng.uniform(0.45, 1.0) if truth[tok] == cls else 0.05 for tok in tokens
        }
        hit = mturk_id(rng, 30, "3")
        for w, worker in enumerate(workers):
            if worker == spammer:
                chosen = tokens
            else:
                chosen = [tok for tok in tokens if rng.random() < p[tok]]
            accept = t * 20 + w
            row = {
                "HITId": hit,
                "HITTypeId": hit_type,
                "Title": "Which of these images show a given kind of clothing?",
                "Description": "Select every image that shows the named object.",
                "Keywords": "image, labeling, categorization, clothing",
                "Reward": "$0.25",
                "CreationTime": mturk_time(0),
                "MaxAssignments": str(HONEST + 1),
                "RequesterAnnotation": "BatchId:5237716;OriginalHitTemplateId:928390909;",
                "AssignmentDurationInSeconds": "3600",
                "AutoApprovalDelayInSeconds": "259200",
                "Expiration": "Tue Dec 01 10:00:00 PST 2026",
                "NumberOfSimilarHITs": "",
                "LifetimeInSeconds": "",
                "AssignmentId": mturk_id(rng, 30, "3"),
                "WorkerId": worker,
                "AssignmentStatus": "Submitted",
                "AcceptTime": mturk_time(accept),
                "SubmitTime": mturk_time(accept + 3),
                "AutoApprovalTime": "Fri Nov 27 10:00:00 PST 2026",
                "ApprovalTime": "",
                "RejectionTime": "",
                "RequesterFeedback": "",
                "WorkTimeInSeconds": str(180 + w),
                "LifetimeApprovalRate": "0% (0/0)",
                "Last30DaysApprovalRate": "0% (0/0)",
                "Last7DaysApprovalRate": "0% (0/0)",
                **{f"Input.{k}": v for k, v in task.items()},
                "Answer.selected": "|".join(chosen),
                "Approve": "",
                "Reject": "",
            }
            rows.append(row)
    return rows, spammer


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    cols = list(rows[0])
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerows(rows)
    return path


def reviewed(rows: list[dict[str, str]], spammer: str) -> list[dict[str, str]]:
    """The same batch downloaded after review: the spammer rejected, the rest approved."""
    out = []
    for r in rows:
        r = dict(r)
        if r["WorkerId"] == spammer:
            r.update(
                AssignmentStatus="Rejected",
                RejectionTime="Wed Nov 25 09:00:00 PST 2026",
                RequesterFeedback="Every image was selected, also those of other classes.",
                Reject="Every image was selected, also those of other classes.",
            )
        else:
            r.update(
                AssignmentStatus="Approved",
                ApprovalTime="Wed Nov 25 09:00:00 PST 2026",
                Approve="x",
            )
        out.append(r)
    return out
