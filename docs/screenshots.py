"""Screenshots of every page of the web app: ``python3 docs/screenshots.py [OUT_DIR]``.

Builds a small demo project in a temporary folder (Fashion-MNIST images from
/usr/share/datasets/fashion-mnist when present, else synthetic) run as a team
campaign: six web labelers with personal links (one of them excluded for her
controls, one revoked) and six imported crowd workers answer the grid tasks,
with the project's own instructions and quality bar; plus stage-1 picks, a
near-duplicate list, a revision, a blacklisted image and queued label-error
suspects. It serves the app on 127.0.0.1 and saves ``web_<page>.png`` with
Playwright driving Debian's Chromium, each page as the person who would see it
(a labeler's task, progress and finish pages; a reviewer's the rest).
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

from retest.labeling.tasks import hash_worker_id
from retest.project import Project, Suspect, add_person, queue_label_errors, save_state
from retest.project._people import revoke_person, set_exclusion, sign_in_link
from retest.stages.crowd import create_tasks, project_secret
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
LABELERS = ["Ana", "Bo", "Cy", "Dee", "Eli", "Fay"]
"""Web labelers with personal links: Ana is midway, Fay is careless (excluded)
and Dee's link is revoked."""
N_CROWD = 6  # imported MTurk workers (hashed WorkerIds)
CONFIG = r"""
[instructions]
default = "Check every **product photo** that shows the class; packshots and worn items count.\n\n- no drawings or sketches\n- check an image when in doubt"

[quality]
min_control_accuracy = 0.8
min_controls = 10
"""


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


def build(root: Path, seed: int = 0) -> tuple[Project, dict[str, str]]:
    """The demo project (4 classes, 120 originals, 120 candidates, events of
    every kind) and its people's sign-in tokens (name → token)."""
    rng = np.random.default_rng(seed)
    xr, yr, xc, yc = _images(rng)
    for i in range(0, len(xc), 20):  # plant near-copies of originals of the class
        j = int(np.flatnonzero(yr == yc[i])[i % N_REF])
        xc[i] = np.clip(xr[j].astype(int) + rng.integers(-12, 13, xr[j].shape), 0, 255)
    Project.init(root, name="fashion-demo", classes=CLASSES).close()
    with (root / "retest.toml").open("a", encoding="utf-8") as f:
        f.write(CONFIG)  # the project's own instructions and quality bar
    proj = Project.open(root)
    st = proj.store
    tokens = {n: add_person(proj, n, "labeler", by="owner").token for n in LABELERS}
    tokens["Rita"] = add_person(proj, "Rita", "reviewer", by="owner").token
    secret = project_secret(proj)
    crowd = [hash_worker_id(f"A{w}7XK2EXAMPLE", secret) for w in range(N_CROWD)]
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
    _answers(proj, cands, rng, seed, crowd)
    _original_answers(st, yr, rng, crowd)
    set_exclusion(proj, "Fay", excluded=True, by="Rita",
                  reason="below the bar on the controls")  # fmt: skip
    revoke_person(proj, "Dee", by="owner")
    st.annotations.add(
        AnnotationEvent("Ana", "select", int(yc[i]), cands[i], int(rng.random() < 0.7),
                        extra={"keyword": kw_of(yc[i], i)})
        for i in range(0, len(cands), 2)
    )  # fmt: skip
    picked = [e for e in st.annotations.list(kind="select") if e.value][::2]
    st.annotations.add(
        AnnotationEvent("Bo", "verify", e.class_id, e.item_id, int(k % 4 != 3),
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
    st.blacklist.add([BlacklistEvent(members[1].item_id, "not a photograph", "Rita")])
    st.revisions.set_review(ReviewState("fashion-demo-a-0", 1, True, who="Rita"))
    queue_label_errors(
        proj,
        [Suspect(f"test:{i}", int(yr[i]), (int(yr[i]) + 2) % 4, r + 1, 0.05 * (r + 1))
         for r, i in enumerate((3, 35, 64, 97, 110))],
        method="prune-by-noise-rate",
    )  # fmt: skip
    return proj, tokens


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


def _answers(proj, cands, rng, seed, crowd) -> None:  # type: ignore[no-untyped-def]
    """Grid answers as the web app and `crowd import` store them: each image is
    checked with a per-image rate (controls: 0.95 / 0.05; Fay, careless, near
    chance). Ana stops two tasks short of the end; one crowd assignment was
    rejected on MTurk."""
    st = proj.store
    tasks = create_tasks(
        proj, images_per_task=24, pos_controls=3, neg_controls=3, seed=seed
    )
    rate = {c: float(rng.beta(4, 1.5)) for c in cands}
    events = []
    for k, t in enumerate(tasks):
        pos = set(t.controls.get("pos", ()))
        people = [n for n in LABELERS if n != "Ana" or k < len(tasks) - 2]
        workers = [(n, f"local:{n}", f"web:{n}:{t.id}:demo{k:04d}", "Submitted")
                   for n in people]  # fmt: skip
        workers += [(f"mturk:{h[:12]}", h, f"3W{t.id[:8]}{w}",
                     "Rejected" if w == N_CROWD - 1 and k % 2 else "Approved")
                    for w, h in enumerate(crowd)]  # fmt: skip
        for who, worker, aid, status in workers:
            careless = worker == "local:Fay"
            for item in t.items:
                p = rate.get(item, 0.95 if item in pos else 0.05)
                p = 0.5 + (p - 0.5) * 0.3 if careless else p
                events.append(AnnotationEvent(who, "task", t.class_id, item,
                                              int(rng.random() < p), task_id=t.id,
                                              assignment_id=aid, assignment_status=status,
                                              worker=worker))  # fmt: skip
    st.annotations.add(events)


def _original_answers(st, yr, rng, crowd) -> None:  # type: ignore[no-untyped-def]
    """Originals shown in tasks of their own class: the target histograms."""
    events = []
    for i, c in enumerate(yr):
        p = float(rng.beta(6, 1.5))
        events += [
            AnnotationEvent(f"mturk:{h[:12]}", "task", int(c), f"test:{i}",
                            int(rng.random() < p), task_id=f"orig-{c}",
                            assignment_id=f"O{c}-{w}", assignment_status="Approved",
                            worker=h)
            for w, h in enumerate(crowd)
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
        proj, tokens = build(Path(tmp) / "fashion-demo")
        task = proj.store.tasks.list()[0]
        app = create_app(proj, reviewer_token=REVIEWER, secret=project_secret(proj))
        server, url = _serve(app)
        # (who opens it, address): a labeler's pages as Ana, the rest as Rita
        pages = {
            "index": ("Rita", "/"),
            "label_select": ("Ana", "/label/0/top?stage=select"),
            "label_verify": ("Bo", "/label/0/tee?stage=verify"),
            "keywords": ("Rita", "/keywords/0"),
            "tasks": ("Ana", "/tasks"),
            "task": ("Ana", "/next/task"),  # her next task: progress, instructions
            "done": ("Bo", "/done"),  # every task answered
            "task_results": ("Rita", f"/task/{task.id}/results"),
            "neardup": ("Rita", "/neardup?metric=l2"),
            "stats": ("Rita", "/stats"),
            "class_stats": ("Rita", "/stats/2"),
            "review": ("Rita", "/review/fashion-demo-a-0/0"),
            "label_errors": ("Rita", "/label-errors"),
            "quality": ("Rita", "/quality"),
        }
        written = []

        def save(pg, name: str) -> None:  # type: ignore[no-untyped-def]
            dest = out / f"web_{name}.png"
            pg.screenshot(path=str(dest))
            written.append(dest)

        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path="/usr/bin/chromium", args=ARGS
                )
                tabs = {}
                for who in ("Ana", "Bo", "Rita"):  # each signs in with their link
                    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                    tabs[who] = ctx.new_page()
                    tabs[who].goto(sign_in_link(url, tokens[who]))
                    tabs[who].wait_for_selector(f"#who:has-text('{who} ·')")
                for name, (who, path) in pages.items():
                    pg = tabs[who]
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
                    save(pg, name)
                # the zoom (z) on a focused image
                pg = tabs["Ana"]
                pg.goto(url + pages["task"][1])
                pg.wait_for_load_state("networkidle")
                pg.keyboard.press("ArrowRight")
                pg.keyboard.press("z")
                pg.wait_for_selector("#zoom.on img")
                pg.wait_for_timeout(200)
                save(pg, "task_zoom")
                # Dee's link after `retest people revoke Dee`
                pg = browser.new_context(viewport={"width": 1400, "height": 900})
                pg = pg.new_page()
                pg.goto(sign_in_link(url, tokens["Dee"]))
                pg.wait_for_load_state("networkidle")
                save(pg, "signin")
                browser.close()
        finally:
            server.should_exit = True
            proj.close()
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "img"
    for f in shoot(target):
        print(f"{f} ({f.stat().st_size // 1024} KB)")
