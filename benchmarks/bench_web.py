"""The labeling web app at campaign scale: page and write latency, write throughput.

Builds a project with ``--events`` stored annotation events (default 1,000,000:
grid-task answers of 48 images, plus stage-1/2 labels), starts a real
``retest serve`` on 127.0.0.1 and measures

* every page's latency with nobody else on the server (``--reps`` each);
* a write load: ``--clients`` concurrent clients (a process each) answering
  grid tasks for ``--seconds`` (each request with a fresh submission key; every
  10th is sent twice, as a double click would), while a labeler answers tasks
  and another client reads pages. The labeler (``--labeler``) is Chromium
  (Debian's ``/usr/bin/chromium`` through Playwright) using the keyboard, or
  the same requests sent over HTTP (also when Chromium is absent), taking
  ``--browser-think`` seconds per task; ``chromium-static`` has Chromium load
  pages of 48 images from another server instead (a browser on the machine
  that gives retest no work). Twice: with
  each client sending its next answer as soon as the last is answered (the
  server's capacity; latency there is mostly queueing, 8 clients waiting on
  each other), then at ``--rate`` answers a second offered by the clients
  together at random (Poisson) times, latency counted from when each answer
  was due (what a campaign at that rate sees);
* afterwards, in the database: events lost (accepted answers without their 48
  events) and duplicated (a replayed submission stored twice).

``--baseline COMMIT`` runs the same against an older checkout of retest (a git
worktree under ``/tmp``) on a copy of the same project, for comparison.

Run ``python3 benchmarks/bench_web.py [--events N] [--baseline COMMIT]``; writes
``benchmarks/results/web.json`` (``--out``) and a plot of every answer's latency
over time beside it (``web.png``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

RESULTS = Path(__file__).parent / "results" / "web.json"
TOKEN, REVIEWER = "bench-labeler-token", "bench-reviewer-token"


def labeler_headers(name: str, people: bool | None = None) -> dict[str, str]:
    """The headers of labeler ``name``: a personal token (a version with people,
    see :func:`add_people`), else the shared labelers' token and a typed name.
    ``people`` None: as the server of the running phase (:data:`PEOPLE`)."""
    if PEOPLE if people is None else people:
        return {"X-Retest-Token": f"{TOKEN}-{name}"}
    return {"X-Retest-Token": TOKEN, "X-Retest-Annotator": name}


def add_people(root: Path, names: list[str]) -> None:
    """Give each labeler of the run a personal token (this checkout's store)."""
    from retest.labeling.people import name_key, token_hash
    from retest.store.sqlite import SQLiteStore

    s = SQLiteStore(root / "retest.db", verify=False)
    try:
        for n in names:
            if s.people.by_token(token_hash(f"{TOKEN}-{n}")) is None:
                s.people.add(n, name_key(n), "labeler", token_hash(f"{TOKEN}-{n}"))
    finally:
        s.close()


PEOPLE = True
"""Whether the server measured now has people (set by :func:`run`)."""


def has_people(src: Path | None) -> bool:
    return src is None or (src / "retest" / "cli" / "people.py").is_file()


N_CLASSES, REFS_PER_CLASS, N_CANDIDATES, KW_PER_CLASS = 10, 1000, 20_000, 5


# -- the project -------------------------------------------------------------
def build_project(root: Path, n_events: int, seed: int = 0) -> dict[str, Any]:
    """A Fashion-MNIST-sized project with ``n_events`` annotation events."""
    from retest.project import Project, Suspect, queue_label_errors
    from retest.stages.crowd import create_tasks
    from retest.store.artifacts import PixelArray
    from retest.store.rows import (
        AnnotationEvent,
        CandidateRow,
        KeywordRow,
        NeighbourList,
        ReferenceRow,
        Revision,
        RevisionMember,
        content_id,
    )

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    proj = Project.init(
        root, name="bench", classes=[f"class{i}" for i in range(N_CLASSES)]
    )
    store = proj.store
    kws = {c: [f"kw{c}_{k}" for k in range(KW_PER_CLASS)] for c in range(N_CLASSES)}
    store.classes.put_keywords(
        [KeywordRow(c, kw, 200) for c in range(N_CLASSES) for kw in kws[c]]
    )
    n_refs = N_CLASSES * REFS_PER_CLASS
    refs = rng.integers(0, 255, (n_refs, 16, 16, 3), dtype=np.uint8)
    PixelArray.create(proj.arrays_dir, "ref_test", shape=(16, 16, 3)).append(refs)
    store.references.add(
        ReferenceRow("test", i, i % N_CLASSES, content_id(refs[i]),
                     kws[i % N_CLASSES][i % KW_PER_CLASS], "ref_test", i)
        for i in range(n_refs)
    )  # fmt: skip
    cands = rng.integers(0, 255, (N_CANDIDATES, 16, 16, 3), dtype=np.uint8)
    PixelArray.create(proj.arrays_dir, "pool", shape=(16, 16, 3)).append(cands)
    ids = [content_id(c) for c in cands]
    store.candidates.add(
        CandidateRow(id=cid, source="arrays", source_ref=str(i),
                     class_id=i % N_CLASSES, keyword=kws[i % N_CLASSES][(i // N_CLASSES) % KW_PER_CLASS],
                     array_name="pool", array_row=i, date_taken=f"2013-01-{i % 28 + 1:02d}")
        for i, cid in enumerate(ids)
    )  # fmt: skip
    tasks = create_tasks(proj, images_per_task=48, pos_controls=3, neg_controls=3,
                         min_assignments=10, seed=seed)  # fmt: skip
    # stage-1/2 labels: 5 % of the events
    label_events = []
    n_labels = n_events // 20
    for k in range(n_labels):
        i = k % N_CANDIDATES
        kind = "select" if k < N_CANDIDATES else "verify"
        label_events.append(AnnotationEvent(f"lab{k % 7}", kind, i % N_CLASSES, ids[i],
                                            int(rng.random() < 0.6)))  # fmt: skip
    store.annotations.add(label_events)
    # grid answers: whole assignments until n_events is reached
    left = n_events - len(label_events)
    batch: list[AnnotationEvent] = []
    a = 0
    while left > 0:
        t = tasks[a % len(tasks)]
        worker = f"w{a // len(tasks)}"
        status = "Rejected" if rng.random() < 0.03 else "Approved"
        items = list(t.items)[:left]
        picks = rng.random(len(items)) < 0.5
        when = f"2024-01-01T{a // 3600 % 24:02d}:{a // 60 % 60:02d}:{a % 60:02d}"
        batch.extend(
            AnnotationEvent(worker, "task", t.class_id, item, int(p), when, "mturk",
                            t.id, f"A{a:08d}", status, worker)
            for item, p in zip(items, picks, strict=True)
        )  # fmt: skip
        left -= len(items)
        a += 1
        if len(batch) >= 50_000:
            store.annotations.add(batch)
            batch = []
    if batch:
        store.annotations.add(batch)
    # a revision to review, neighbour lists to review, a label-error queue
    members = [RevisionMember(ids[i], i % N_CLASSES) for i in range(2000)]
    store.revisions.create(Revision("bench-a-0", "threshold", {"per_class": 200}, seed=1),
                           members)  # fmt: skip
    store.neardup.put_neighbours(
        NeighbourList(ids[i], "l2", (f"test:{i % n_refs}", ids[(i + 1) % N_CANDIDATES]),
                      (float(rng.uniform(1e6, 1e8)), float(rng.uniform(1e6, 1e8))))
        for i in range(0, 4000, 2)
    )  # fmt: skip
    queue_label_errors(
        proj, [Suspect(f"test:{i}", i % N_CLASSES, (i + 1) % N_CLASSES, rank=i)
                for i in range(300)], method="both")  # fmt: skip
    n = store.annotations.count()
    proj.close()
    return {"events": n, "tasks": len(tasks), "build_seconds": time.perf_counter() - t0,
            "task_ids": [t.id for t in tasks], "candidates": ids[:50],
            "task_items": {t.id: len(dict.fromkeys(t.items)) for t in tasks}}  # fmt: skip


# -- the server ----------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(root: Path, src: Path | None) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    code = "from retest.cli.main import main; main()"
    args = [sys.executable, "-c", code, "serve", "-p", str(root), "--port", str(port)]
    if not has_people(src):
        args += ["--token", TOKEN]  # the shared labelers' token of older versions
    env = dict(os.environ)
    serve_py = None if src is None else src / "retest" / "cli" / "serve.py"
    if serve_py is None or "reviewer_token" in serve_py.read_text():
        args += ["--reviewer-token", REVIEWER]  # a version with roles
    if src is not None:
        env["PYTHONPATH"] = str(src)
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 900:
        try:
            httpx.get(base + "/static/app.css", timeout=2)
            return proc, base
        except httpx.TransportError:
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                raise RuntimeError(f"server died: {out}") from None
            time.sleep(0.2)
    raise RuntimeError("server did not start")


# -- measuring -----------------------------------------------------------------
def pages(info: dict[str, Any]) -> dict[str, str]:
    t = info["task_ids"][0]
    return {
        "index": "/",
        "label select": "/label/0/kw0_0?stage=select",
        "label verify": "/label/0/kw0_1?stage=verify",
        "keywords": "/keywords/0",
        "tasks": "/tasks",
        "task": f"/task/{t}",
        "task results": f"/task/{t}/results",
        "stats": "/stats",
        "class stats": "/stats/0",
        "review": "/review/bench-a-0/0",
        "neardup": "/neardup?metric=l2",
        "label errors": "/label-errors",
        "image": f"/img/i/{info['candidates'][0]}",
    }


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _summary(xs: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in xs]
    return {"n": len(ms), "p50_ms": _pct(ms, 0.5), "p95_ms": _pct(ms, 0.95),
            "p99_ms": _pct(ms, 0.99), "max_ms": max(ms) if ms else float("nan")}  # fmt: skip


def measure_pages(
    base: str, urls: dict[str, str], reps: int, timeout: float, started: float
) -> dict[str, Any]:
    """First load of each page right after the server started (a page whose data
    is still computed in the background answers 503 "still computing"), the
    seconds from the start until each such page was ready, then ``reps`` loads."""
    out: dict[str, Any] = {}
    h = {"X-Retest-Token": REVIEWER}
    with httpx.Client(base_url=base, headers=h, timeout=timeout) as c:
        for name, url in urls.items():  # first loads (build caches)
            t0 = time.perf_counter()
            r = c.get(url)
            out[name] = {
                "first_ms": (time.perf_counter() - t0) * 1000,
                "status": r.status_code,
            }
        for name, url in urls.items():
            while out[name]["status"] == 503 and time.perf_counter() - started < 900:
                time.sleep(0.5)
                out[name]["status"] = c.get(url).status_code
                out[name]["ready_after_start_s"] = time.perf_counter() - started
        for name, url in urls.items():
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                c.get(url)
                times.append(time.perf_counter() - t0)
            out[name].update(_summary(times))
    return out


class _Conn:
    """A keep-alive HTTP/1.1 connection from the standard library.

    The load generator runs on the same two cores as the server, so its own
    cost matters: httpx spent 0.86 ms of CPU per request here against 0.21 ms
    for ``http.client``, and 8 httpx clients took a core the server then lacked.
    """

    def __init__(self, base: str, headers: dict[str, str], timeout: float) -> None:
        host, port = base.split("//", 1)[1].rsplit(":", 1)
        self.args, self.headers = (host, int(port), timeout), headers
        self.conn = http.client.HTTPConnection(*self.args)

    def request(self, method: str, url: str, body: Any = None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        hdr = (
            self.headers
            if data is None
            else {**self.headers, "Content-Type": "application/json"}
        )
        for attempt in (0, 1):
            try:
                self.conn.request(method, url, data, hdr)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()  # a dropped keep-alive connection: reconnect once
                self.conn = http.client.HTTPConnection(*self.args)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.conn.close()


def _client(base: str, task_ids: list[str], k: int, seconds: float, timeout: float,
            rate: float, start: Any, out: Any, people: bool) -> None:  # fmt: skip
    """One person answering grid tasks, in a process of its own: as threads of
    the measuring process the clients would share one interpreter lock with each
    other and with the reader, and the measured latencies would include waits
    for it.

    ``rate`` 0: each answer is sent when the previous one is answered (closed
    loop: the server's capacity). Otherwise answers are due at Poisson arrivals
    of ``rate`` a second, and an answer's latency counts from when it was due,
    not from when it was sent: a client held up by a slow answer sends the next
    one late, and that wait is part of what the person would have seen (the
    "coordinated omission" correction)."""
    c = _Conn(base, labeler_headers(f"bench{k}", people), timeout)
    rng = np.random.default_rng(k)
    lat: list[float] = []
    sent: list[float] = []  # when each request was due, from the start
    accepted: list[tuple[str, str]] = []
    errors: list[str] = []
    replays = n = 0
    start.wait()
    cpu0 = time.process_time()
    due = begin = time.perf_counter()
    stop = due + seconds
    while time.perf_counter() < stop:
        if rate:
            due += rng.exponential(1 / rate)
            if due >= stop:
                break
            time.sleep(max(0.0, due - time.perf_counter()))
        task = task_ids[(k * 7919 + n) % len(task_ids)]
        key = f"b{k}n{n}x{os.getpid()}"
        body = {"submission": key, "task_id": task, "selected_tokens": []}
        for attempt in range(2 if n % 10 == 0 else 1):
            t0 = time.perf_counter()
            if rate and not attempt:
                t0 = due  # the first send counts from when it was due
            try:
                status, text = c.request("POST", "/api/task", body)
            except (http.client.HTTPException, OSError) as err:
                errors.append(repr(err))
                continue
            lat.append(time.perf_counter() - t0)
            sent.append(t0 - begin)
            if status == 200:
                accepted.append((key, task))
                replays += bool(json.loads(text).get("replayed"))
            else:
                errors.append(f"{status} {text[:80]!r}")
        n += 1
    c.close()
    out.put({"lat": lat, "sent": sent, "begin": begin, "accepted": accepted,
             "errors": errors, "replays": replays,
             "cpu_s": time.process_time() - cpu0})  # fmt: skip


def write_load(base: str, info: dict[str, Any], clients: int, seconds: float,
               timeout: float, rate: float = 0.0) -> dict[str, Any]:  # fmt: skip
    """Concurrent grid answers, one process per client; every 10th request is
    sent twice (same key). ``rate``: answers a second offered by all clients
    together (0: as fast as the server answers; see :func:`_client`)."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(clients + 1), ctx.Queue()
    procs = [ctx.Process(target=_client, args=(base, info["task_ids"], k, seconds,
                                               timeout, rate / clients, start, out,
                                               PEOPLE))
             for k in range(clients)]  # fmt: skip
    for pr in procs:
        pr.start()
    start.wait()  # every client is ready: all start now
    t0 = time.perf_counter()
    parts = [out.get() for _ in procs]
    wall = time.perf_counter() - t0
    for pr in procs:
        pr.join()
    lat = [x for r in parts for x in r["lat"]]
    accepted = [a for r in parts for a in r["accepted"]]
    errors = [e for r in parts for e in r["errors"]]
    return {"offered_per_s": rate or None, "latency": _summary(lat), "requests": len(lat),
            "answered": len(accepted), "replays_answered": sum(r["replays"] for r in parts),
            "writes_per_s": len(lat) / wall, "errors": errors[:5],
            "client_cpu_ms_per_write": 1000 * sum(r["cpu_s"] for r in parts) / max(1, len(lat)),
            "n_errors": len(errors), "wall_s": wall, "accepted_list": accepted,
            "timeline": sorted(zip((r["begin"] + t for r in parts for t in r["sent"]), lat,
                                   strict=True))}  # fmt: skip


def reader_load(base: str, urls: dict[str, str], stop: threading.Event,
                timeout: float, pause: float = 0.25) -> dict[str, list[float]]:  # fmt: skip
    """A second person reading pages while the writes run: a page every
    ``pause`` seconds (4 a second, faster than anyone reads; back to back, the
    reader would be a load generator that takes whatever the writers leave).
    Only answered pages count: a fast error page must not improve the figures."""
    out: dict[str, list[float]] = {k: [] for k in urls}
    c = _Conn(base, {"X-Retest-Token": REVIEWER}, timeout)
    while not stop.is_set():
        for name, url in urls.items():
            if stop.wait(pause):
                break
            t0 = time.perf_counter()
            try:
                status, _ = c.request("GET", url)
            except (http.client.HTTPException, OSError):
                continue
            if status == 200:
                out[name].append(time.perf_counter() - t0)
    c.close()
    return out


def browser_labeler(base: str, stop: threading.Event, result: dict[str, Any],
                    think: float = 0.0) -> None:  # fmt: skip
    """A labeler in Chromium answering grid tasks with the keyboard, ``think``
    seconds on each task page before answering (0: as fast as it can)."""
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        result["browser"] = "absent: the labeler's requests are sent over HTTP instead"
        http_labeler(base, stop, result, think)
        return
    times: list[float] = []
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
        )
        pg = b.new_context(viewport={"width": 1400, "height": 900}).new_page()
        pg.goto(f"{base}/?token={labeler_headers('browser')['X-Retest-Token']}")
        if pg.locator("#annotator-name").count():
            pg.fill("#annotator-name", "browser")
            pg.click("#identity-form button")
        pg.goto(f"{base}/next/task")
        while not stop.is_set():
            try:
                pg.wait_for_selector(".cell", timeout=30_000)
                if think and stop.wait(think):
                    break
                pg.keyboard.press("ArrowRight")
                pg.keyboard.press("Space")
                t0 = time.perf_counter()
                with pg.expect_navigation(timeout=30_000):
                    pg.keyboard.press("Enter")
                pg.wait_for_load_state("load")
                times.append(time.perf_counter() - t0)
                result.setdefault("navigations", []).append(t0)
            except Exception as err:
                result["browser_error"] = repr(err)[:200]
                break
        b.close()
    result["browser"] = _summary(times)


def http_labeler(base: str, stop: threading.Event, result: dict[str, Any],
                 think: float = 0.0) -> None:  # fmt: skip
    """The requests of :func:`browser_labeler`'s labeler without a browser:
    the answer, the next-task redirect, the task page, its images over six
    connections at once (as Chromium fetches them), the style sheet and script;
    then ``think`` seconds. What the server does for a labeler, apart from
    the browser's own work on the machine."""
    import re
    from concurrent.futures import ThreadPoolExecutor

    hdr = labeler_headers("browser")
    c = _Conn(base, hdr, 60.0)
    pool = [_Conn(base, hdr, 60.0) for _ in range(6)]
    times: list[float] = []
    after, answer = "", None
    with ThreadPoolExecutor(6) as ex:
        while not stop.is_set():
            t0 = time.perf_counter()
            if answer is not None:
                c.request("POST", "/api/task", answer)
            c.conn.request("GET", f"/next/task?after={after}", headers=hdr)
            r = c.conn.getresponse()
            r.read()
            url = r.getheader("location") or "/tasks"
            if not url.startswith("/task/"):
                break  # every task answered
            _, page = c.request("GET", url)
            html = page.decode()
            imgs = re.findall(r'/img/t/[^"\']+', html)
            list(ex.map(lambda k, imgs=imgs: [pool[k].request("GET", u) for u in imgs[k::6]],
                        range(6)))  # fmt: skip
            for static in ("/static/app.css", "/static/app.js"):
                c.request("GET", static)
            times.append(time.perf_counter() - t0)
            result.setdefault("navigations", []).append(t0)
            after = url.rsplit("/", 1)[1]
            key = re.search(r'data-submission="([^"]+)"', html)
            tokens = [u.rsplit("/", 1)[1] for u in imgs[:1]]
            answer = {"submission": key.group(1) if key else f"http-{len(times):08d}",
                      "task_id": after, "selected_tokens": tokens}  # fmt: skip
            if stop.wait(think):
                break
    for conn in (c, *pool):
        conn.close()
    result["http_labeler"] = _summary(times)


def static_browser(base: str, stop: threading.Event, result: dict[str, Any],
                   think: float = 0.0) -> None:  # fmt: skip
    """Chromium loading pages of 48 small PNGs from Python's ``http.server`` (not
    from retest), one every ``think`` seconds: what a browser on the same
    machine costs the server when the server does none of its work."""
    chromium = shutil.which("chromium")
    if chromium is None:
        result["browser"] = "absent"
        return
    from PIL import Image
    from playwright.sync_api import sync_playwright

    site = Path(tempfile.mkdtemp(prefix="bench-web-static-"))
    rng = np.random.default_rng(0)
    for k in range(15):  # pages that link in a ring, each with its own images
        (site / f"p{k}").mkdir()
        for i in range(48):
            px = rng.integers(0, 256, (28, 28), dtype=np.uint8)
            Image.fromarray(px).resize((84, 84), Image.Resampling.NEAREST).save(
                site / f"p{k}" / f"{i}.png"
            )
        cells = "".join(f'<img src="{i}.png" width=96 height=96>' for i in range(48))
        (site / f"p{k}" / "index.html").write_text(f"<html><body>{cells}</body></html>")
    port = _free_port()
    srv = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                            "127.0.0.1", "--directory", str(site)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    times: list[float] = []
    try:
        time.sleep(0.5)
        with sync_playwright() as p:
            b = p.chromium.launch(
                executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
            )
            pg = b.new_context(viewport={"width": 1400, "height": 900}).new_page()
            while not stop.is_set():
                t0 = time.perf_counter()
                pg.goto(f"http://127.0.0.1:{port}/p{len(times) % 15}/index.html")
                pg.wait_for_load_state("load")
                times.append(time.perf_counter() - t0)
                result.setdefault("navigations", []).append(t0)
                if stop.wait(think):
                    break
            b.close()
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(site, ignore_errors=True)
    result["static_browser"] = _summary(times)


def check_db(root: Path, info: dict[str, Any], before: int, accepted: list[tuple[str, str]],
             labeler_tasks: int) -> dict[str, Any]:  # fmt: skip
    """Events lost or duplicated by the load, counted in the database."""
    from retest.store.sqlite import SQLiteStore

    s = SQLiteStore(root / "retest.db", verify=False)
    new = s.annotations.list(kind="task", after_id=before)
    s.close()
    by_assignment: dict[str, int] = {}
    for e in new:
        a = e.assignment_id or ""
        if ":bench" in a or a.startswith("web:bench"):
            by_assignment[a] = by_assignment.get(a, 0) + 1
    unique = len({k for k, _ in accepted})  # keys with a 200 answer
    stored = len(by_assignment)  # assignments stored by the bench clients
    short = sum(
        1 for a, n in by_assignment.items() if n != info["task_items"][a.split(":")[2]]
    )
    return {"new_task_events": len(new), "answered_submissions": unique,
            "stored_assignments": stored, "lost_submissions": max(0, unique - stored),
            "duplicated_assignments": max(0, stored - unique),
            "incomplete_assignments": short}  # fmt: skip


def _phase(proc: subprocess.Popen[str], base: str, info: dict[str, Any],
           urls: dict[str, str], rate: float, args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    """The write load at one offered rate, with the reader and the labeler
    (``--labeler``) running meanwhile. The answers' latencies over time and the
    labeler's page loads are kept for :func:`plot_timeline` (not in the JSON)."""
    stop = threading.Event()
    under: dict[str, list[float]] = {}
    bres: dict[str, Any] = {}
    read_urls = {k: urls[k] for k in ("label select", "task", "tasks", "image")}
    rt = threading.Thread(
        target=lambda: under.update(reader_load(base, read_urls, stop, args.timeout))
    )
    labeler = {"chromium": browser_labeler, "http": http_labeler,
               "chromium-static": static_browser}[args.labeler]  # fmt: skip
    bt = threading.Thread(target=labeler, args=(base, stop, bres, args.browser_think))
    rt.start()
    bt.start()
    load_before, cpu_before = os.getloadavg(), _cpu_seconds(proc.pid)
    load = write_load(base, info, args.clients, args.seconds, args.timeout, rate)
    load["loadavg_before_after"] = [load_before, os.getloadavg()]
    # the server's CPU time per answer (the reader and the browser it served
    # meanwhile included): the cost that does not depend on the machine's load
    cpu = _cpu_seconds(proc.pid) - cpu_before
    load["server_cpu_ms_per_write"] = 1000 * cpu / max(1, load["requests"])
    stop.set()
    rt.join()
    bt.join()
    timeline = {"answers": load.pop("timeline"), "labeler": bres.pop("navigations", [])}
    return {"write_load": load,
            "pages_under_load": {k: _summary(v) for k, v in under.items()},
            "browser_labeler": bres, "timeline": timeline}  # fmt: skip


def plot_timeline(res: dict[str, Any], path: Path, title: str) -> None:
    """Each answer's latency against when it was due, per write phase, with the
    labeler's page loads marked: stalls that follow them stand out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = res["phases"]
    fig, axes = plt.subplots(len(phases), 1, figsize=(11, 3.2 * len(phases)),
                             squeeze=False)  # fmt: skip
    for ax, (name, ph) in zip(axes[:, 0], phases.items(), strict=True):
        tl = ph.pop("timeline")
        if not tl["answers"]:
            continue
        t0 = tl["answers"][0][0]
        t = np.array([a[0] for a in tl["answers"]]) - t0
        ms = np.array([a[1] for a in tl["answers"]]) * 1000
        ax.scatter(t, ms, s=2, alpha=0.5, label="answer latency")
        for k, nav in enumerate(tl["labeler"]):
            ax.axvline(nav - t0, color="tab:red", lw=0.6, alpha=0.6,
                       label="labeler submits a task" if k == 0 else None)  # fmt: skip
        w = ph["write_load"]
        ax.axhline(50, color="k", ls="--", lw=0.8, label="50 ms")
        ax.set_yscale("log")
        ax.set_ylabel("ms")
        ax.set_title(f"{name}: {w['writes_per_s']:.0f} answers/s, "
                     f"p50 {w['latency']['p50_ms']:.0f} ms, p95 {w['latency']['p95_ms']:.0f} ms",
                     fontsize=10)  # fmt: skip
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("seconds into the phase")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(
    root: Path, info: dict[str, Any], src: Path | None, args: argparse.Namespace
) -> dict[str, Any]:
    """Idle pages, then the write load twice: as fast as the server answers
    (its capacity) and at ``--rate`` offered answers a second (the latency
    a campaign at that rate sees)."""
    from retest.store.sqlite import SQLiteStore

    global PEOPLE
    PEOPLE = has_people(src)
    if PEOPLE:
        add_people(root, [f"bench{k}" for k in range(args.clients)] + ["browser"])
    proc, base = start_server(root, src)
    started = time.perf_counter()  # accepting connections
    try:
        urls = pages(info)
        reps = args.reps if src is None else max(2, args.reps // 10)
        load_idle = os.getloadavg()
        idle = measure_pages(base, urls, reps, args.timeout, started)
        s = SQLiteStore(root / "retest.db", verify=False)
        before = int(s.annotations.list(kind="task")[-1].id or 0)
        s.close()
        phases = {"capacity": _phase(proc, base, info, urls, 0.0, args)}
        if args.rate:
            phases[f"at {args.rate:g}/s"] = _phase(
                proc, base, info, urls, args.rate, args
            )
        accepted = [
            a for ph in phases.values() for a in ph["write_load"].pop("accepted_list")
        ]
        db = check_db(root, info, before, accepted, 0)
        sign_in = "personal links" if PEOPLE else "shared token, typed names"
        return {"server": "baseline" if src else "current", "sign_in": sign_in,
                "idle_pages": idle, "loadavg_idle": load_idle, "phases": phases,
                "database": db}  # fmt: skip
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def as_schema(root: Path, src: Path) -> None:
    """Give an older checkout the project in its own schema version.

    Version 6 only added the people tables, version 5 only moved grid answers
    out of the item index: a version-6 database becomes a version-5 one by
    dropping those tables, and a version-4 one by rebuilding that index too."""
    import sqlite3

    schema = (src / "retest" / "store" / "_sqlite_schema.py").read_text()
    if "_V6" in schema:
        return
    if "_V5" in schema:  # version 6 only added the people tables
        with sqlite3.connect(root / "retest.db") as c:
            c.executescript(
                "DROP TABLE IF EXISTS sessions; DROP TABLE IF EXISTS people;"
                "DROP TABLE IF EXISTS people_events;"
                "UPDATE schema_version SET version = 5;"
            )
        c.close()
        return
    if "_V4" not in schema:
        raise SystemExit(f"--baseline: {src.parent} predates schema version 4")
    with sqlite3.connect(root / "retest.db") as c:
        c.executescript(
            "DROP INDEX IF EXISTS annotations_item_labels;"
            "CREATE INDEX IF NOT EXISTS annotations_item ON annotations(item_id);"
            "UPDATE schema_version SET version = 4;"
        )
    c.close()


def baseline_src(commit: str) -> Path:
    repo = Path(__file__).resolve().parents[1]
    dest = Path(tempfile.gettempdir()) / f"retest-baseline-{commit[:10]}"
    if not dest.exists():
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(dest), commit],
                       check=True, capture_output=True)  # fmt: skip
    return dest / "src"


def _table(res: dict[str, Any]) -> str:
    lines = [f"sign-in: {res['sign_in']}; load average before the idle pages: "
             f"{res['loadavg_idle']}",
             "| page | p50 ms | p95 ms | first ms | ready after start s |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    for name, r in res["idle_pages"].items():
        ready = r.get("ready_after_start_s")
        lines.append(
            f"| {name} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {r['first_ms']:.0f} | "
            f"{'' if ready is None else f'{ready:.1f}'} |"
        )
    for phase, ph in res["phases"].items():
        w = ph["write_load"]
        lat = w["latency"]
        lines.append(
            f"\nwrites, {phase}: {w['requests']} in {w['wall_s']:.1f} s = "
            f"{w['writes_per_s']:.0f}/s, p50 {lat['p50_ms']:.0f} ms, p95 {lat['p95_ms']:.0f} ms, "
            f"p99 {lat['p99_ms']:.0f} ms, errors {w['n_errors']}; server CPU "
            f"{w['server_cpu_ms_per_write']:.1f} ms per write; load average before/after "
            f"{w['loadavg_before_after']}"
        )
        for name, r in ph["pages_under_load"].items():
            lines.append(
                f"  pages meanwhile: {name} p50 {r['p50_ms']:.0f} ms p95 {r['p95_ms']:.0f} ms (n={r['n']})"
            )
        lines.append(f"  browser labeler: {ph['browser_labeler']}")
    lines.append(f"database: {res['database']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--root", type=Path, default=None, help="keep the project here")
    ap.add_argument("--baseline", default=None, help="git commit of the old web app")
    ap.add_argument(
        "--rate",
        type=float,
        default=300.0,
        help="offered answers a second of the second write phase (0: none)",
    )
    ap.add_argument(
        "--labeler",
        choices=("chromium", "http", "chromium-static"),
        default="chromium",
        help="the labeler: Chromium through Playwright, its requests over HTTP, "
        "or Chromium loading static pages from another server",
    )
    ap.add_argument(
        "--browser-think",
        type=float,
        default=0.0,
        help="seconds the labeler spends on a task page",
    )
    ap.add_argument("--out", type=Path, default=RESULTS,
                    help="results JSON; the latency plot goes beside it (.png)")  # fmt: skip
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-web-"))
    root = args.root or work / "proj"
    meta = root / "bench_info.json"
    if meta.is_file():
        info = json.loads(meta.read_text())
    else:
        info = build_project(root, args.events)
        meta.write_text(json.dumps(info))
    print(f"project: {info['events']} events, {info['tasks']} tasks "
          f"(built in {info['build_seconds']:.0f} s)")  # fmt: skip
    out: dict[str, Any] = {"machine": platform.platform(), "cpus": os.cpu_count(),
                           "events": info["events"], "clients": args.clients,
                           "seconds": args.seconds, "rate": args.rate, "labeler": args.labeler,
                           "labeler_think_s": args.browser_think}  # fmt: skip
    copy = None
    if args.baseline:
        copy = work / "baseline"
        shutil.copytree(root, copy)  # the same project, before the current run's writes
    out["current"] = run(root, info, None, args)
    print(_table(out["current"]))
    who = f"{args.labeler} labeler, {args.browser_think:g} s per task"
    plot_timeline(out["current"], args.out.with_suffix(".png"),
                  f"retest serve at {info['events']:,} events, {args.clients} clients, {who}")  # fmt: skip
    if args.baseline and copy is not None:
        out["baseline_commit"] = args.baseline
        src = baseline_src(args.baseline)
        as_schema(copy, src)
        out["baseline"] = run(copy, info, src, args)
        print("\nbaseline", args.baseline)
        print(_table(out["baseline"]))
        plot_timeline(out["baseline"], args.out.with_name(args.out.stem + "_baseline.png"),
                      f"baseline {args.baseline}, {who}")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    if args.root is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
