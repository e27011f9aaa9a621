"""Screenshots of every page of the web app: ``python3 docs/screenshots.py [OUT_DIR]``.

Builds a small demo project in a temporary folder (Fashion-MNIST images from
/usr/share/datasets/fashion-mnist when present, else synthetic), fills it with
events (simulated grid-task answers, stage-1 picks, a near-duplicate list, a
revision, a blacklisted image, queued label-error suspects), serves the app on
127.0.0.1 and saves ``web_<page>.png`` with Playwright driving Debian's Chromium.
Everything is seeded, so reruns show the same pages.
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import uvicorn

from retest.pipeline.crowd import create_tasks, project_secret
from retest.project import Project, Suspect, add_person, queue_label_errors, save_state
from retest.store.artifacts import PixelArray
from retest.store.rows import (
    AnnotationEvent,
    BlacklistEvent,
    CandidateRow,
    KeywordRow,
    NeighbourList,
    ReferenceRow,
    ReviewState,
    Revision,
    RevisionMember,
    content_id,
)
from retest.web.app import create_app

FMNIST = Path("/usr/share/datasets/fashion-mnist")
CLASSES = ["t-shirt", "trouser", "pullover", "dress"]
KEYWORDS = {0: ["tee", "top"], 1: ["jeans", "slacks"], 2: ["sweater", "jumper"],
            3: ["gown", "frock"]}  # fmt: skip
REVIEWER = "demo-reviewer-token"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
N_REF, N_CAND = 30, 30  # per class


def _images(
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(reference images, labels, candidate images, labels), 28×28 grey."""
    if (FMNIST / "t10k-images-idx3-ubyte.gz").is_file():
        from retest.datasets.idx import read_idx

        x = np.asarray(read_idx(FMNIST / "t10k-images-idx3-ubyte.gz"), dtype=np.uint8)
        y = np.asarray(read_idx(FMNIST / "t10k-labels-idx1-ubyte.gz"), dtype=np.int64)
        ref = np.concatenate(
            [np.flatnonzero(y == c)[:N_REF] for c in range(len(CLASSES))]
        )
        cand = np.concatenate(
            [
                np.flatnonzero(y == c)[N_REF : N_REF + N_CAND]
                for c in range(len(CLASSES))
            ]
        )
        return x[ref], y[ref], x[cand], y[cand]
    k = len(CLASSES)
    yr, yc = np.repeat(np.arange(k), N_REF), np.repeat(np.arange(k), N_CAND)
    base = rng.integers(0, 255, (k, 28, 28), dtype=np.uint8)
    noise = lambda n: rng.integers(0, 60, (n, 28, 28), dtype=np.uint8)  # noqa: E731
    return base[yr] // 2 + noise(yr.size), yr, base[yc] // 2 + noise(yc.size), yc


def build(root: Path, seed: int = 0) -> Project:
    """The demo project: 4 classes, 120 originals, 120 candidates, events of every kind."""
    rng = np.random.default_rng(seed)
    xr, yr, xc, yc = _images(rng)
    for i in range(0, len(xc), 20):  # plant near-copies of originals of the class
        j = int(np.flatnonzero(yr == yc[i])[i % N_REF])
        xc[i] = np.clip(xr[j].astype(int) + rng.integers(-12, 13, xr[j].shape), 0, 255)
    proj = Project.init(root, name="fashion-demo", classes=CLASSES)
    st = proj.store
    PixelArray.create(proj.arrays_dir, "ref_test", shape=(28, 28)).append(xr)
    PixelArray.create(proj.arrays_dir, "pool", shape=(28, 28)).append(xc)
    st.classes.put_keywords(
        KeywordRow(c, kw, 40 - 15 * j)
        for c, kws in KEYWORDS.items()
        for j, kw in enumerate(kws)
    )
    kw_of = lambda c, i: KEYWORDS[int(c)][i % 2]  # noqa: E731
    st.references.add(
        ReferenceRow("test", i, int(c), content_id(xr[i]), kw_of(c, i), "ref_test", i)
        for i, c in enumerate(yr)
    )
    cands = [content_id(x) for x in xc]
    st.candidates.add(
        CandidateRow(cid, "flickr", str(1000 + i), int(yc[i]), kw_of(yc[i], i),
                     date_taken=f"2013-{1 + i % 12:02d}-{1 + i % 28:02d}",
                     array_name="pool", array_row=i)
        for i, cid in enumerate(cands)
    )  # fmt: skip
    _neighbours(st, xr, xc, cands)
    _dedup_config(root)
    _answers(proj, yc, cands, rng, seed)
    _original_answers(st, yr, rng)
    st.annotations.add(
        AnnotationEvent("alice", "select", int(yc[i]), cands[i], int(rng.random() < 0.7),
                        extra={"keyword": kw_of(yc[i], i)})
        for i in range(0, len(cands), 2)
    )  # fmt: skip
    picked = [e for e in st.annotations.list(kind="select") if e.value][::2]
    st.annotations.add(
        AnnotationEvent("bob", "verify", e.class_id, e.item_id, int(k % 4 != 3),
                        extra=dict(e.extra))
        for k, e in enumerate(picked)
    )  # fmt: skip
    save_state(proj, "plan/current",
               {"rule": "v4", "report": "reports/plan_v4.json",
                "needed": [[CLASSES[c], kw, 12 - 4 * j]
                           for c, kws in KEYWORDS.items() for j, kw in enumerate(kws)]},
               stage="plan")  # fmt: skip
    members = [
        RevisionMember(cands[i], int(yc[i]), 4) for i in range(len(cands)) if i % 3 == 0
    ]
    st.revisions.create(Revision("fashion-demo-a-0", "threshold", seed=seed), members)
    st.blacklist.add([BlacklistEvent(members[1].item_id, "not a photograph", "bob")])
    st.revisions.set_review(ReviewState("fashion-demo-a-0", 1, True, who="bob"))
    queue_label_errors(
        proj,
        [Suspect(f"test:{i}", int(yr[i]), (int(yr[i]) + 2) % 4, r + 1, 0.05 * (r + 1))
         for r, i in enumerate((3, 35, 64, 97, 110))],
        method="prune-by-noise-rate",
    )  # fmt: skip
    return proj


def _neighbours(st, xr, xc, cands) -> None:  # type: ignore[no-untyped-def]
    a = xc.reshape(len(xc), -1).astype(np.float64)
    b = xr.reshape(len(xr), -1).astype(np.float64)
    d = (a**2).sum(1)[:, None] + (b**2).sum(1)[None] - 2 * a @ b.T
    lists = []
    for i in range(len(cands)):
        order = np.argsort(d[i], kind="stable")[:4]
        lists.append(NeighbourList(cands[i], "l2", tuple(f"test:{j}" for j in order),
                                   tuple(float(d[i, j]) for j in order)))  # fmt: skip
    st.neardup.put_neighbours(lists)


def _dedup_config(root: Path) -> None:
    # What `retest dedup` records: the review targets follow the image shape.
    cfg = root / "reports" / "dedup" / "config.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(json.dumps({"shape": [28, 28], "metrics": ["l2"]}))


def _answers(proj, yc, cands, rng, seed) -> None:  # type: ignore[no-untyped-def]
    """Simulated workers: each candidate/control is checked with a per-image rate."""
    st = proj.store
    tasks = create_tasks(
        proj, images_per_task=24, pos_controls=3, neg_controls=3, seed=seed
    )
    rate = {c: float(rng.beta(4, 1.5)) for c in cands}
    events = []
    for t in tasks:
        pos = set(t.controls.get("pos", ()))
        for w in range(12):
            aid = f"A{t.id[:6]}{w}"
            status = "Rejected" if w == 11 else "Approved"
            for item in t.items:
                p = rate.get(item, 0.95 if item in pos else 0.05)
                events.append(AnnotationEvent(f"w{w}", "task", t.class_id, item,
                                              int(rng.random() < p), task_id=t.id,
                                              assignment_id=aid, assignment_status=status,
                                              worker=f"w{w}"))  # fmt: skip
    st.annotations.add(events)


def _original_answers(st, yr, rng) -> None:  # type: ignore[no-untyped-def]
    """Originals shown in tasks of their own class: the target histograms."""
    events = []
    for i, c in enumerate(yr):
        p = float(rng.beta(6, 1.5))
        events += [
            AnnotationEvent(f"w{w}", "task", int(c), f"test:{i}", int(rng.random() < p),
                            task_id=f"orig-{c}", assignment_id=f"O{c}-{w}",
                            assignment_status="Approved", worker=f"w{w}")
            for w in range(11)
        ]  # fmt: skip
    st.annotations.add(events)


def _serve(app) -> tuple[uvicorn.Server, str]:  # type: ignore[no-untyped-def]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def shoot(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proj = build(Path(tmp) / "fashion-demo")
        task = proj.store.tasks.list()[0]
        rita = add_person(proj, "Rita", "reviewer", by="screenshots")
        app = create_app(proj, reviewer_token=REVIEWER, secret=project_secret(proj))
        server, url = _serve(app)
        pages = {
            "index": "/",
            "label_select": "/label/0/top?stage=select",
            "label_verify": "/label/0/tee?stage=verify",
            "keywords": "/keywords/0",
            "tasks": "/tasks",
            "task": f"/task/{task.id}",
            "task_results": f"/task/{task.id}/results",
            "neardup": "/neardup?metric=l2",
            "stats": "/stats",
            "class_stats": "/stats/2",
            "review": "/review/fashion-demo-a-0/0",
            "label_errors": "/label-errors",
            "quality": "/quality",
        }
        written = []
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path="/usr/bin/chromium", args=ARGS
                )
                pg = browser.new_page(viewport={"width": 1400, "height": 900})
                pg.goto(rita.link(url))  # a reviewer sees every page
                pg.wait_for_selector("#who:has-text('Rita ·')")
                for name, path in pages.items():
                    pg.goto(url + path)
                    pg.wait_for_load_state("networkidle")
                    if name in ("label_select", "task"):
                        # the keyboard at work: two images checked, focus on a third
                        for key in (
                            "Space",
                            "ArrowRight",
                            "ArrowRight",
                            "Space",
                            "ArrowRight",
                        ):
                            pg.keyboard.press(key)
                    dest = out / f"web_{name}.png"
                    pg.screenshot(path=str(dest))
                    written.append(dest)
                # the zoom (z) on a focused image
                pg.goto(url + pages["task"])
                pg.wait_for_load_state("networkidle")
                pg.keyboard.press("ArrowRight")
                pg.keyboard.press("z")
                pg.wait_for_selector("#zoom.on img")
                pg.wait_for_timeout(200)
                dest = out / "web_task_zoom.png"
                pg.screenshot(path=str(dest))
                written.append(dest)
                browser.close()
        finally:
            server.should_exit = True
            proj.close()
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "img"
    for f in shoot(target):
        print(f"{f} ({f.stat().st_size // 1024} KB)")
