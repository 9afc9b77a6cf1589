"""A ``Summary`` as bytes and back, bit for bit: what the cache keeps of each scanned region
and of each merged subtree. No pickle: a cache file is data, never code to run."""

from __future__ import annotations

import numpy as np

from ..model import kinds
from .digests import content_digest
from .summary import SliceStats, Summary, join_slices

FORMAT = 1
_I8, _F8 = np.dtype("<i8"), np.dtype("<f8")
_SLICE_DTYPES = (_I8, _I8, _F8, _F8, _F8, _F8, _I8, _I8, _I8)  # idx, then SliceStats.FIELDS


def to_bytes(s: Summary) -> bytes:
    """``s`` as bytes (its slices joined into one run: the same slices, merged alike)."""
    k = kinds.N_KINDS
    sl = join_slices(s.slices) if s.slices else None
    flagged = s.flagged
    width = 2 * len(flagged[0][0]) + 1 if flagged else 0
    flag = np.array([[*a, *b, c] for a, b, c in flagged], _I8).reshape(len(flagged), width)
    nloc = [len(i) for i in s.loc_index]
    head = [FORMAT, k, int(s.n), int(s.elements), -1 if sl is None else len(sl.idx)]
    head += [len(flagged), width, *nloc]
    parts = [
        np.array(head, _I8),
        np.asarray(s.counts, _I8),
        np.array([s.mean, s.std, s.total, s.min, s.max], _F8),
        *(np.asarray(i, _I8) for i in s.loc_index),
        *(np.asarray(v, _F8) for v in s.loc_value),
    ]
    if sl is not None:
        parts += [np.asarray(c, d) for c, d in zip((sl.idx, *sl.columns()), _SLICE_DTYPES)]
    parts.append(flag)
    body = b"".join(p.tobytes() for p in parts)
    return content_digest(body) + body


def from_bytes(data: bytes) -> Summary:
    """The Summary ``to_bytes`` wrote (arrays writable: a merge may spend them); bytes that
    are not exactly what it wrote are a ``ValueError``."""
    check, buf = bytes(data[:16]), bytearray(data[16:])
    if content_digest(buf) != check:
        raise ValueError("a summary whose bytes do not match their digest")
    at = 0

    def take(n: int, dtype: np.dtype) -> np.ndarray:
        nonlocal at
        if n < 0 or at + n * dtype.itemsize > len(buf):
            raise ValueError(f"a summary cut short at {len(buf)} bytes")
        out = np.frombuffer(buf, dtype, n, at)
        at += n * dtype.itemsize
        return out

    fmt, k = take(2, _I8)
    if fmt != FORMAT or k != kinds.N_KINDS:
        raise ValueError(f"a summary of format {fmt} with {k} kinds")
    n, elements, nslices, nflag, width = (int(v) for v in take(5, _I8))
    nloc = take(k, _I8).tolist()
    counts = take(k, _I8)
    mean, std, total, mn, mx = (float(v) for v in take(5, _F8))
    loc_index = [take(m, _I8) for m in nloc]
    loc_value = [take(m, _F8) for m in nloc]
    slices = None
    if nslices >= 0:
        cols = [take(nslices, d) for d in _SLICE_DTYPES]
        slices = [SliceStats(*cols)]
    flag = take(nflag * width, _I8).reshape(nflag, width)
    if at != len(buf):
        raise ValueError(f"a summary of {len(buf)} bytes holds {at}")
    ndim = (width - 1) // 2
    flagged = [
        (tuple(int(v) for v in r[:ndim]), tuple(int(v) for v in r[ndim:-1]), int(r[-1]))
        for r in flag
    ]
    return Summary(
        counts=counts, n=n, mean=mean, std=std, total=total, min=mn, max=mx,
        elements=elements, loc_index=loc_index, loc_value=loc_value, slices=slices,
        flagged=flagged,
    )  # fmt: skip
