"""Flickr search client, candidate downloader and search-result loading.

See docs/algorithms.md#flickr-search, #image-decoding.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from retest.errors import ConfigError
from retest.sources.flickr import (
    EXTRAS,
    FlickrClient,
    FlickrError,
    FlickrSearchParams,
    download_candidates,
    load_search_results,
    search_classes,
    write_search_results,
)

NOW = datetime(2024, 5, 6, 7, 8, 9)


def _photo(pid: int, *, url_type: str | None = "url_o") -> dict[str, Any]:
    p: dict[str, Any] = {
        "id": str(pid),
        "owner": "x@N00",
        "title": f"photo {pid}",
        "datetaken": "2012-08-01 10:00:00",
        "dateupload": "1344000000",  # 2012-08-03 13:20:00 UTC
        "url_s": f"https://farm/{pid}_s.jpg",  # small sizes never chosen
    }
    if url_type is not None:
        p[url_type] = f"https://farm/{pid}{url_type}.jpg"
        p["url_z"] = f"https://farm/{pid}_z.jpg"  # lower priority than the above
        p["o_width"], p["o_height"] = "4000", "3000"
    return p


def _flickr_handler(photos_by_text: dict[str, list[dict[str, Any]]]):  # type: ignore[no-untyped-def]
    def handle(q: dict[str, str]) -> tuple[int, bytes]:
        if q.get("api_key") != "KEY":
            return 200, json.dumps(
                {"stat": "fail", "code": 100, "message": "Invalid API Key"}
            ).encode()
        photos = photos_by_text.get(q["text"], [])
        per, page = int(q["per_page"]), int(q["page"])
        body = {
            "photos": {
                "page": page,
                "pages": max(1, math.ceil(len(photos) / per)),
                "perpage": per,
                "total": len(photos),
                "photo": photos[(page - 1) * per : page * per],
            },
            "stat": "ok",
        }
        return 200, json.dumps(body).encode()

    return handle


@pytest.fixture
def flickr(http_server):  # type: ignore[no-untyped-def]
    dog = [_photo(100 + i) for i in range(8)]
    dog[1] = _photo(101, url_type=None)  # no usable URL: skipped, still counted
    dog[2] = _photo(102, url_type="url_k")
    dog[3] = _photo(103, url_type="url_-")
    dog[3].pop("url_z")
    hound = [_photo(200 + i) for i in range(2)]
    http_server.add(
        "/services/rest/", handler=_flickr_handler({"dog": dog, "domestic dog": hound}),
        fail_first=1, content_type="application/json",
    )  # fmt: skip
    return http_server


def test_search_records_pagination_retry_and_limits(flickr, no_sleep) -> None:  # type: ignore[no-untyped-def]
    client = FlickrClient(
        "KEY", base_url=flickr.url + "/services/rest/", sleep=no_sleep.append
    )
    params = FlickrSearchParams(
        max_images=10, per_page=3, max_uploaded_date="2014-07-11"
    )
    recs = search_classes(
        client,
        {"n02084071": ["dog", "domestic dog"]},
        params,
        uploader="alice",
        clock=lambda: NOW,
    )
    assert no_sleep == [1.0]  # one transient 500, retried after 1 s
    # limit int(10 / 2) = 5 per synonym; photo 101 has no URL and still counts
    assert [r["id_search_engine"] for r in recs] == [
        "100",
        "102",
        "103",
        "104",
        "200",
        "201",
    ]
    assert [r["url_type"] for r in recs[:3]] == ["url_o", "url_k", "url_-"]
    # pages 1 and 2 of "dog" were enough (5 photos); page 3 never asked for
    dog_pages = [q["page"] for q in flickr.queries if q.get("text") == "dog"]
    assert dog_pages == ["1", "1", "2"]  # first "1" got the 500
    q = flickr.queries[-1]
    assert q["method"] == "flickr.photos.search" and q["extras"] == EXTRAS
    assert (q["sort"], q["min_taken_date"], q["max_upload_date"]) == (
        "date-posted-asc",
        "2012-07-11",
        "2014-07-11",
    )
    assert recs[0] == {
        "id_ours": hashlib.sha1(b"100flickr").hexdigest(),
        "id_search_engine": "100",
        "url": "https://farm/100url_o.jpg",
        "url_type": "url_o",
        "wnid": "n02084071",
        "search_key": "dog",
        "search_engine": "flickr",
        "uploader": "alice",
        "date_upload_our_db": "2024-05-06 07:08:09",
        "date_taken": "2012-08-01 10:00:00",
        "date_upload_search_engine": "2012-08-03 13:20:00",
        "width": 4000,
        "height": 3000,
        "max_taken_date": "2013-07-11",
        "max_uploaded_date": "2014-07-11",
        "min_taken_date": "2012-07-11",
        "min_uploaded_date": "2012-07-11",
        "search_sort": "date-posted-asc",
        "max_images": 10,
    }
    assert recs[-1]["search_key"] == "domestic dog"


def test_search_without_limit_walks_all_pages(flickr, no_sleep) -> None:  # type: ignore[no-untyped-def]
    client = FlickrClient(
        "KEY", base_url=flickr.url + "/services/rest/", sleep=no_sleep.append
    )
    recs = search_classes(
        client, {"n1": ["dog"]}, FlickrSearchParams(per_page=3), uploader="u"
    )
    assert len(recs) == 7 and recs[0]["max_images"] is None


def test_bad_key_is_not_retried_and_missing_key_is_explained(
    flickr, no_sleep, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    flickr.routes["/services/rest/"].fail_first = 0
    client = FlickrClient(
        "WRONG", base_url=flickr.url + "/services/rest/", sleep=no_sleep.append
    )
    with pytest.raises(FlickrError, match="Invalid API Key"):
        search_classes(client, {"n1": ["dog"]}, FlickrSearchParams())
    assert no_sleep == []
    monkeypatch.delenv("RETEST_FLICKR_KEY", raising=False)
    with pytest.raises(ConfigError, match="RETEST_FLICKR_KEY"):
        FlickrClient.from_env()
    monkeypatch.setenv("RETEST_FLICKR_KEY", "KEY")
    assert FlickrClient.from_env().api_key == "KEY"


def test_search_gives_up_after_five_retries(http_server, no_sleep) -> None:  # type: ignore[no-untyped-def]
    http_server.add("/rest", b"", fail_first=99)
    client = FlickrClient(
        "KEY", base_url=http_server.url + "/rest", sleep=no_sleep.append
    )
    with pytest.raises(FlickrError, match="after 6 attempt"):
        client.call("flickr.photos.search", text="x")
    assert no_sleep == [1.0, 2.0, 4.0, 8.0, 16.0]


# ---------------------------------------------------------------------- downloader


def _jpeg_with_orientation(w: int, h: int, orientation: int) -> bytes:
    arr = np.zeros((h, w, 3), dtype=np.uint8)
    arr[: h // 2, : w // 2] = (255, 0, 0)
    exif = Image.Exif()
    exif[274] = orientation
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=95, exif=exif)
    return buf.getvalue()


def _png(w: int, h: int) -> bytes:
    buf = io.BytesIO()
    Image.new("LA", (w, h), (128, 255)).save(buf, format="PNG")
    return buf.getvalue()


def _rec(cid: str, url: str) -> dict[str, Any]:
    return {"id_ours": cid, "url": url, "wnid": "n1", "width": None, "height": None}


def test_downloader_failures_exif_sizes_and_resume(
    http_server, tmp_path: Path, no_sleep
) -> None:  # type: ignore[no-untyped-def]
    u = http_server.add
    recs = [
        _rec("a", u("/a.jpg", _jpeg_with_orientation(60, 30, 6))),
        _rec("b", u("/b.png", _png(1000, 400))),
        _rec("c", u("/c.jpg", b"", status=404)),
        _rec("d", u("/d.jpg", b"<html>nope</html>", content_type="text/html")),
        _rec("e", u("/e.jpg", _png(10, 10), fail_first=1)),
        _rec("f", u("/f.jpg", _png(10, 10))),
    ]
    seen: list[tuple[str, int, int | None]] = []
    out = tmp_path / "imgs"
    rep = download_candidates(
        recs, out, workers=3, sleep=no_sleep.append, blacklist={"f": "wrong class"},
        progress=lambda t, d, n: seen.append((t, d, n)),
    )  # fmt: skip
    assert rep.downloaded == ["a", "b", "e"]
    assert set(rep.failures) == {"c", "d"}
    assert rep.failures["c"].startswith("HTTP 404")
    assert rep.failures["d"].startswith("not an image")
    assert rep.blacklisted == ["f"] and no_sleep == [1.0]
    assert seen[-1] == ("download", 5, 5)
    by_id = {r["id_ours"]: r for r in rep.records}
    assert (by_id["a"]["width"], by_id["a"]["height"]) == (30, 60)  # EXIF 6 applied
    assert (by_id["b"]["width"], by_id["b"]["height"]) == (1000, 400)
    assert by_id["c"]["width"] is None and recs[0]["width"] is None  # input untouched
    with Image.open(out / "original" / "a.jpg") as im:
        assert im.size == (30, 60) and im.mode == "RGB"
        assert np.asarray(im)[5, 25, 0] > 200  # red quadrant moved to the top-right
    with Image.open(out / "scaled_256" / "b.jpg") as im:
        assert im.size == (256, 256)
    with Image.open(out / "scaled_500" / "b.jpg") as im:
        assert im.size == (500, 200)
    assert (
        rep.sha256["b"]
        == hashlib.sha256((out / "original" / "b.jpg").read_bytes()).hexdigest()
    )

    # a run interrupted after b's scaled files but before its original: b is redone
    (out / "original" / "b.jpg").unlink()
    before = http_server.hits.copy()
    rep2 = download_candidates(recs, out, workers=2, sleep=no_sleep.append)
    assert rep2.downloaded == ["b", "f"] and sorted(rep2.skipped) == ["a", "e"]
    assert http_server.hits["/a.jpg"] == before["/a.jpg"]
    assert (rep2.records[0]["width"], rep2.records[0]["height"]) == (30, 60)


def test_downloader_too_big(http_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = http_server.add("/big.png", _png(300, 300))
    rep = download_candidates([_rec("x", url)], tmp_path, max_bytes=100)
    assert rep.failures["x"].startswith("too big")
    rep = download_candidates([_rec("x", url)], tmp_path, max_pixels=1000)
    assert rep.failures["x"].startswith("too big")


# ---------------------------------------------------------------------- pool loading


def test_load_search_results_order_blacklist_duplicates(tmp_path: Path) -> None:
    def r(cid: str, wnid: str) -> dict[str, str]:
        return {"id_ours": cid, "wnid": wnid, "url": f"https://x/{cid}"}

    write_search_results(
        tmp_path / "2019-01-02_bob.json", [r("p1", "n2"), r("p3", "n2")]
    )
    write_search_results(
        tmp_path / "2019-01-01_ann.json", [r("p1", "n1"), r("p2", "n1"), r("p9", "n1")]
    )
    (tmp_path / "blacklist.txt").write_text("{}")
    pool = load_search_results(tmp_path, blacklist={"p9": "Too big"})
    assert list(pool.candidates) == ["p1", "p2", "p3"]
    assert pool.candidates["p1"]["wnid"] == "n1"  # earlier file name wins
    assert pool.candidates["p1"]["source_filename"] == "2019-01-01_ann.json"
    assert [(d["id_ours"], d["wnid"]) for d in pool.duplicates] == [("p1", "n2")]
    assert pool.blacklisted == ["p9"]
    assert {k: [x["id_ours"] for x in v] for k, v in pool.by_wnid().items()} == {
        "n1": ["p1", "p2"],
        "n2": ["p3"],
    }
    bl = tmp_path / "candidate_blacklist.json"
    bl.write_text(json.dumps({"p2": "wrong class"}))
    files = [tmp_path / "2019-01-02_bob.json", tmp_path / "2019-01-01_ann.json"]
    assert list(load_search_results(files, blacklist=bl).candidates) == [
        "p1",
        "p9",
        "p3",
    ]


# ------------------------------------------------------- CLI: plan search, download

KEY = "SECRETKEY123"


def _jpeg(w: int, h: int, seed: int) -> bytes:
    arr = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _api_photo(server: Any, pid: int) -> dict[str, Any]:
    """A photo as flickr.photos.search returns it with the retest extras."""
    url = server.add(f"/img/{pid}_z.jpg", _jpeg(64, 48, pid), content_type="image/jpeg")
    return {
        "id": str(pid), "owner": "12345678@N00", "secret": "abcdef0123",
        "server": "65535", "farm": 66, "title": f"photo {pid}", "ispublic": 1,
        "isfriend": 0, "isfamily": 0, "dateupload": "1344000000",
        "datetaken": "2012-08-01 10:00:00", "datetakengranularity": 0,
        "datetakenunknown": "0", "url_s": url.replace("_z", "_s"), "height_s": 180,
        "width_s": 240, "url_z": url, "height_z": 48, "width_z": 64,
    }  # fmt: skip


@pytest.fixture
def plan_server(http_server, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Flickr for three keywords; ``broken`` holds (text, page) answered with 500."""
    photos = {
        "jetliner": [_api_photo(http_server, 1000 + i) for i in range(5)],
        "airbus": [_api_photo(http_server, 2000 + i) for i in range(3)],
        "tabby": [_api_photo(http_server, 3000 + i) for i in range(2)],
    }
    broken: set[tuple[str, str]] = set()

    def handle(q: dict[str, str]) -> tuple[int, bytes]:
        if q.get("api_key") != KEY:
            fail = {
                "stat": "fail",
                "code": 100,
                "message": "Invalid API Key (Key not found)",
            }
            return 200, json.dumps(fail).encode()
        if (q["text"], q["page"]) in broken:
            return 500, b"Internal Server Error"
        got, per, page = photos.get(q["text"], []), int(q["per_page"]), int(q["page"])
        body = {
            "photos": {
                "page": page, "pages": max(1, math.ceil(len(got) / per)),
                "perpage": per, "total": str(len(got)),
                "photo": got[(page - 1) * per : page * per],
            },
            "stat": "ok",
        }  # fmt: skip
        return 200, json.dumps(body).encode()

    http_server.add("/services/rest/", handler=handle, content_type="application/json")
    plan = tmp_path / "plan_v4.json"
    plan.write_text(json.dumps({
        "rule": "v4", "size": 4,
        "allocation": {"airplane": {"jetliner": 2, "airbus": 1}, "cat": {"tabby": 1}},
    }))  # fmt: skip
    return http_server, broken, plan


def _cli(*args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from retest.cli.main import app

    return CliRunner().invoke(app, list(args), env=env)


def _search_args(server: Any, plan: Path, out: Path, *extra: str) -> list[str]:
    return [
        "flickr", "search", "--plan", str(plan), "--out", str(out), "--factor", "2",
        "--per-page", "2", "--endpoint", server.url + "/services/rest/",
        "--retries", "0", "--uploader", "tester", "--rate", "50", *extra,
    ]  # fmt: skip


def _rest(server: Any) -> list[tuple[str, str]]:
    return [
        (q["text"], q["page"]) for q in server.queries if q["path"] == "/services/rest/"
    ]


def test_cli_plan_search_resumes_at_the_failed_page(
    plan_server, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    server, broken, plan = plan_server
    out = tmp_path / "results"
    env = {"RETEST_FLICKR_KEY": KEY}
    broken.add(("jetliner", "2"))
    res = _cli(*_search_args(server, plan, out), env=env)
    assert res.exit_code == 1, res.output
    err = res.stderr.strip()
    assert err.startswith("error:") and "\n" not in err and "500" in err
    assert _rest(server) == [("jetliner", "1"), ("jetliner", "2")]
    broken.clear()
    server.queries.clear()
    res = _cli(*_search_args(server, plan, out, "--json"), env=env)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    # page 1 of jetliner is not fetched again; limits 4, 2 and 2 photos
    assert _rest(server) == [("jetliner", "2"), ("airbus", "1"), ("tabby", "1")]
    assert (summary["pages_reused"], summary["pages_fetched"]) == (1, 3)
    files = sorted(out.glob("*.json"))
    assert [f.name for f in files] == [
        "0000_airplane_jetliner.json", "0001_airplane_airbus.json", "0002_cat_tabby.json",
    ]  # fmt: skip
    jet = json.loads(files[0].read_text())
    assert [r["id_search_engine"] for r in jet] == ["1000", "1001", "1002", "1003"]
    assert {(r["wnid"], r["search_key"], r["max_images"]) for r in jet} == {
        ("airplane", "jetliner", 4)
    }
    assert jet[0]["url_type"] == "url_z" and jet[0]["width"] is None
    assert jet[0]["uploader"] == "tester"
    assert jet[0]["id_ours"] == hashlib.sha1(b"1000flickr").hexdigest()
    assert not (out / ".pages" / "0000_airplane_jetliner").exists()
    q = server.queries[-1]
    assert (q["min_upload_date"], q["max_taken_date"], q["extras"]) == (
        "2012-07-11", "2013-07-11", EXTRAS,
    )  # fmt: skip
    # the key is sent to the API but written nowhere
    assert all(KEY not in f.read_text() for f in out.rglob("*") if f.is_file())
    # a third run has nothing left to do
    server.queries.clear()
    res = _cli(*_search_args(server, plan, out, "--json"), env=env)
    assert res.exit_code == 0 and _rest(server) == []
    assert json.loads(res.stdout)["already_done"] == 3
    pool = load_search_results(out)
    assert len(pool.candidates) == 8


def test_cli_download_resumes_rate_limits_and_feeds_the_flickr_source(
    plan_server, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import time

    from retest.sources.files import FlickrSource

    server, _, plan = plan_server
    out, imgs = tmp_path / "results", tmp_path / "images"
    assert _cli(*_search_args(server, plan, out), "--api-key", KEY).exit_code == 0
    server.routes["/img/1001_z.jpg"].status = 404
    server.routes["/img/1001_z.jpg"].body = b"gone"
    args = ["flickr", "download", "--results", str(out), "--out", str(imgs),
            "--workers", "3", "--retries", "0", "--json"]  # fmt: skip
    t0 = time.perf_counter()
    res = _cli(*args, "--rate", "10")
    elapsed = time.perf_counter() - t0
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert (got["downloaded"], got["failed"], got["already_done"]) == (7, 1, 0)
    assert elapsed >= 0.7  # 8 requests at 10/s: starts 0.1 s apart
    failures = json.loads((imgs / "download_report.json").read_text())["failures"]
    assert next(iter(failures.values())).startswith("HTTP 404")
    with Image.open(
        imgs / "original" / f"{hashlib.sha1(b'2000flickr').hexdigest()}.jpg"
    ) as im:
        assert im.size == (64, 48)
    before = sum(n for p, n in server.hits.items() if p.startswith("/img/"))
    res = _cli(*args, "--rate", "50")
    assert res.exit_code == 0
    again = json.loads(res.stdout)
    assert (again["downloaded"], again["already_done"], again["failed"]) == (0, 7, 1)
    after = sum(n for p, n in server.hits.items() if p.startswith("/img/"))
    assert after == before + 1  # only the failed image is asked for again
    src = FlickrSource(out, images_dir=imgs)
    assert len(src) == 8 and src.records[0]["wnid"] == "airplane"


def test_rate_limiter_spaces_requests_across_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from retest.sources.flickr import RateLimiter

    now = [100.0]
    slept: list[float] = []
    lim = RateLimiter(4.0, clock=lambda: now[0], sleep=slept.append)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: lim.wait(), range(6)))
    assert sorted(slept) == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.25])
    with pytest.raises(ConfigError, match="positive"):
        RateLimiter(0)


def test_cli_flickr_bad_inputs(plan_server, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    server, _, plan = plan_server
    monkeypatch.delenv("RETEST_FLICKR_KEY", raising=False)

    def expect(args: list[str], code: int, *needles: str) -> None:
        res = _cli(*args)
        assert res.exit_code == code, res.output
        err = res.stderr.strip()
        assert err.startswith("error:") and "\n" not in err, err
        assert all(n in err for n in needles), err

    out = tmp_path / "o"
    expect(_search_args(server, plan, out), 2, "RETEST_FLICKR_KEY", "--api-key")
    expect(_search_args(server, plan, out, "--api-key", "WRONG"), 1, "Invalid API Key")
    expect(
        _search_args(server, plan, out, "--api-key", KEY, "--rate", "0"), 2, "--rate"
    )
    expect(_search_args(server, tmp_path / "nope.json", out, "--api-key", KEY), 1,
           "nope.json")  # fmt: skip
    (tmp_path / "bad.json").write_text('{"rule": "v4"}')
    expect(_search_args(server, tmp_path / "bad.json", out, "--api-key", KEY), 1,
           "bad.json", "allocation")  # fmt: skip
    expect(["flickr", "download", "--results", str(tmp_path / "none"), "--out",
            str(out)], 1, "none")  # fmt: skip
    expect(["flickr", "download", "--results", str(plan), "--out", str(out),
            "--workers", "0"], 2, "--workers")  # fmt: skip
