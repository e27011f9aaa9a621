"""Flickr search client, candidate downloader and search-result loading (SPEC §1.4–1.5)."""

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
