"""Torch kernel for the per-pair SSIM cross term (see :mod:`retest.build.ssim`).

Same algebra as the numpy kernel, but torch's single-threaded elementwise kernels
(vectorised, fused ``addcmul``) do each pass over a batch 2–3× faster than numpy,
and the pair batches run in Python threads (torch releases the GIL). Torch is
limited to one intra-op thread while this runs: its OpenMP workers spin-wait and
collapse when the cores are shared, which Python-level threads do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from retest.build.ssim import SSIMStats

_FIELDS = ("centred", "m", "mu_s", "mu2h", "varh")


class TorchKernel:
    """Reusable buffers for one (query stats, reference stats) pairing, one thread.

    Uniform windows are window sums along H then W by doubling (about
    ``2·log2(win_size)`` whole-array adds per axis, few Python-level calls);
    gaussian windows are two GEMMs with the cropped filter matrices.
    """

    def __init__(
        self,
        torch: Any,
        q: SSIMStats,
        r: SSIMStats,
        batch: int,
        fh: NDArray[np.float32],
        fw: NDArray[np.float32],
        box: bool,
        scale: float,
    ) -> None:
        self.torch, self.batch, self.box, self.scale = torch, batch, box, scale
        self.ws = q.params.resolved_win_size()
        self.c1t, self.c2 = torch.tensor(float(r.c1)), float(r.c2)
        self.qf = [torch.from_numpy(getattr(q, f)) for f in _FIELDS]
        self.rf = [torch.from_numpy(getattr(r, f)) for f in _FIELDS]
        self.fh, self.fw = torch.from_numpy(fh), torch.from_numpy(fw)
        h, w, _, c = r.centred.shape
        hp, wp = fh.shape[0], fw.shape[0]
        self.shape = (h, w, hp, wp, c)
        e = torch.empty
        self.qbuf = [e((h, w, batch, c)), *(e((hp, wp, batch, c)) for _ in range(4))]
        self.bufs = [e(h * w * batch * c) for _ in range(5)]
        self.cached: int | None = None

    def _buf(self, i: int, rows: int, cols: int, nb: int) -> Any:
        """Contiguous (rows, cols, nb, C) view of scratch buffer ``i``."""
        c = self.shape[4]
        return self.bufs[i][: rows * cols * nb * c].view(rows, cols, nb, c)

    def _queries(self, qi: NDArray[np.intp], nb: int) -> list[Any]:
        """Query fields laid out like the references (tiled once for one query)."""
        s0 = int(qi[0])
        if not bool((qi == s0).all()):
            idx = self.torch.from_numpy(qi)
            out = [self.torch.index_select(f, 2, idx) for f in self.qf]
            out[0].mul_(self.scale)
            return out
        if self.cached != s0:
            for src, dst in zip(self.qf, self.qbuf, strict=True):
                dst.copy_(src[:, :, s0 : s0 + 1].expand_as(dst))
            self.qbuf[0].mul_(self.scale)
            self.cached = s0
        return [b[:, :, :nb] for b in self.qbuf]

    def _refs(self, ri: NDArray[np.intp], nb: int) -> list[Any]:
        r0 = int(ri[0])
        if int(ri[-1]) - r0 == nb - 1 and bool((np.diff(ri) == 1).all()):
            return [f[:, :, r0 : r0 + nb] for f in self.rf]
        idx = self.torch.from_numpy(ri)
        return [self.torch.index_select(f, 2, idx) for f in self.rf]

    def _box(self, prod: Any, nb: int) -> Any:
        """Window sums along H then W, plus ``C2``."""
        g = _window_sum(
            self.torch, _window_sum(self.torch, prod, 0, self.ws), 1, self.ws
        )
        return g.add_(self.c2)

    def _gemm(self, prod: Any, nb: int) -> Any:
        h, w, hp, wp, c = self.shape
        t = self.torch.mm(self.fh, prod.reshape(h, w * nb * c)).view(hp, w, nb * c)
        g = self.torch.matmul(self.fw, t).view(hp, wp, nb, c)
        return g.add_(self.c2)

    def run(self, qi: NDArray[np.intp], ri: NDArray[np.intp]) -> NDArray[np.float64]:
        """Mean SSIM of pairs (q[qi], r[ri]); at most ``batch`` pairs."""
        torch, nb = self.torch, ri.size
        xq, mq, muq, mu2q, varq = self._queries(qi, nb)
        xr, mr, mur, mu2r, varr = self._refs(ri, nb)
        h, w, hp, wp, c = self.shape
        prod = self._buf(0, h, w, nb)
        torch.mul(xr, xq, out=prod)
        g = self._box(prod, nb) if self.box else self._gemm(prod, nb)
        g.addcmul_(mr, mq, value=-1.0)  # k·F(x'y') + C2 − k·μ'x μ'y
        a, b = self._buf(3, hp, wp, nb), self._buf(4, hp, wp, nb)
        torch.addcmul(self.c1t, mur, muq, out=a)
        g.mul_(a)
        torch.add(mu2r, mu2q, out=a)
        torch.add(varr, varq, out=b)
        a.mul_(b)
        g.div_(a)
        s = g.reshape(hp * wp, nb * c).sum(0).view(nb, c).sum(1, dtype=torch.float64)
        return s.numpy() / (hp * wp * c)


def _window_sum(torch: Any, x: Any, dim: int, ws: int) -> Any:
    """Sums of ``ws`` consecutive entries along ``dim`` ("valid" length n − ws + 1).

    Sums of width 1, 2, 4, … are built by doubling and the set bits of ``ws`` are
    added up: ~2·log2(ws) whole-array passes instead of ``ws − 1`` shifted adds.
    """
    n = x.shape[dim]
    length = n - ws + 1
    part, width, off, owned = x, 1, 0, False
    out: Any = None
    while True:
        if ws & width:
            piece = part.narrow(dim, off, length)
            if out is None:
                out = piece
            elif owned:
                out.add_(piece)
            else:  # first sum of two pieces: a fresh array we may update in place
                out, owned = torch.add(out, piece), True
            off += width
        if width * 2 > ws:
            break
        m = part.shape[dim] - width
        part = torch.add(part.narrow(dim, 0, m), part.narrow(dim, width, m))
        width *= 2
    return out if owned else out.clone()
