"""Dataset I/O and the Flickr downloader: throughput on this machine.

    python3 benchmarks/bench_datasets.py [--quick]

Measures (median of >= 3 repetitions; the machine is shared, numbers are noisy):
* ``download_candidates`` from a local HTTP server on 127.0.0.1: 800×600 JPEGs →
  EXIF fix + original / 256² / longer-side-500 JPEGs, for 1, 2, 4 and 8 workers
  (ratio against the single-worker run of the same session);
* ``read_idx`` of Fashion-MNIST train images (Debian copy, 47 MB raw) when present;
* ``read_cifar_batch`` of a 10,000-image CIFAR pickle batch.
"""

from __future__ import annotations

import argparse
import io
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
from PIL import Image

from retest.datasets.cifar10 import read_cifar_batch, write_cifar_batch
from retest.datasets.idx import read_idx
from retest.sources.flickr import download_candidates

OUT = Path(__file__).parent / "results" / "datasets.json"
FMNIST = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")


def _serve(images: dict[str, bytes], root: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Serve the images from a separate process (no GIL shared with the client)."""
    for name, body in images.items():
        (root / name.lstrip("/")).write_bytes(body)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + next(iter(images)), timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    return proc, url


def _median(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps, n_img = (3, 40) if args.quick else (3, 150)
    rng = np.random.default_rng(0)
    images = {}
    for i in range(n_img):
        # photo-like content: smooth gradients plus mild noise (pure noise is a
        # worst case for JPEG that no photo reaches)
        yy, xx = np.mgrid[0:600, 0:800]
        base = np.stack([xx / 800 * 255, yy / 600 * 255, (xx + yy + 7 * i) % 256], -1)
        arr = np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="JPEG", quality=90)
        images[f"/{i}.jpg"] = buf.getvalue()
    served = tempfile.TemporaryDirectory()
    proc, url = _serve(images, Path(served.name))
    recs = [{"id_ours": f"c{i}", "url": url + p} for i, p in enumerate(images)]
    results: dict[str, object] = {
        "machine": "2 cores",
        "repetitions": reps,
        "n_images": n_img,
    }
    rows = []
    for workers in (1, 2, 4, 8):

        def run(workers: int = workers) -> None:
            with tempfile.TemporaryDirectory() as d:
                rep = download_candidates(recs, d, workers=workers)
                assert len(rep.downloaded) == n_img, rep.failures

        sec = _median(run, reps)
        rows.append({"workers": workers, "seconds": sec, "images_per_s": n_img / sec})
    base = rows[0]["images_per_s"]
    for r in rows:
        r["speedup_vs_1_worker"] = r["images_per_s"] / base
    results["download_candidates"] = rows
    proc.terminate()
    proc.wait()
    served.cleanup()

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "batch"
        write_cifar_batch(
            p,
            rng.integers(0, 256, (10000, 32, 32, 3), dtype=np.uint8),
            np.zeros(10000, int),
        )
        sec = _median(lambda: read_cifar_batch(p), reps)
        results["read_cifar_batch_10k"] = {"seconds": sec, "images_per_s": 10000 / sec}
    if FMNIST.exists():
        sec = _median(lambda: read_idx(FMNIST), reps)
        results["read_idx_fashion_train"] = {
            "seconds": sec,
            "images_per_s": 60000 / sec,
        }

    print(f"{'benchmark':<34}{'seconds':>10}{'items/s':>12}{'ratio':>8}")
    for r in rows:
        print(
            f"{'download_candidates w=' + str(r['workers']):<34}{r['seconds']:>10.3f}"
            f"{r['images_per_s']:>12.1f}{r['speedup_vs_1_worker']:>8.2f}"
        )
    for key in ("read_cifar_batch_10k", "read_idx_fashion_train"):
        if key in results:
            v = results[key]
            assert isinstance(v, dict)
            print(f"{key:<34}{v['seconds']:>10.3f}{v['images_per_s']:>12.0f}{'':>8}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
