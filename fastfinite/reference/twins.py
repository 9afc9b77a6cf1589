"""The NumPy twin of each Numba kernel: the same signature and the same outputs, bit for bit.

A twin runs where numba would cost more than it saves (small blocks), and wherever the
kernels are not compiled yet (``compute.dispatch``): a scan that starts on the twins and
goes on with the kernels gives the report a warm scan gives. ``TWINS`` lists every kernel
beside its twin for the test that compares them.

The same bits: every sum follows the order ``stats`` fixes (lanes, sub-blocks, chunks),
taken with ``np.add.accumulate``, which adds one value after another by definition (a
reduction may pair them up). Formulas on scalars are the kernels' own Python source
(``stats.chan``); elementwise formulas are written with the same operations in the same
order as the kernels'.

Shared with production, and independent where a twin is an oracle: the per-slice NumPy
arithmetic that production runs as well (``kernels.slices_numpy``: the totals, the slices
to rescue, the largest |z|) is imported, so the twins of ``finish_slices``,
``finish_whole_slices`` and ``slice_columns`` are built from it and hold it to the kernels;
the predicates of the kinds are the twins' own (``_risks``), independent of the production
form that finds positions (``compute.positions.kind_mask``), which the tests pin to them.
Production code reaches this module only through ``compute.dispatch``.
"""

from __future__ import annotations

import numpy as np

from ..kernels.slices_numpy import fold, in_order, max_abs_z, rescue_rows, slice_totals
from ..model import kinds
from ..model.kinds import N_KINDS, N_TARGET_SLOTS, cast_slot
from ..model.stats import CHUNK, LANES, SUB, TILE, combine

PIECE = 1 << 18  # values a twin holds in float64 temporaries at once (2 MB each)


def _row_lanes(v: np.ndarray, k: float, acc1: np.ndarray, acc2: np.ndarray) -> None:
    """``_lanes`` of ``d = v - k`` and ``d * d`` for one row of whole sub-blocks of finite
    values (``v``: 1-D), added to ``acc1`` and ``acc2`` (``(1, LANES)``): ``d`` laid out
    value-of-sub-block first, so that each sum in order runs over long contiguous rows
    (three times faster than the sub-blocks' short ones)."""
    nb = len(v) // SUB
    d = np.empty((SUB // LANES, nb, LANES))
    np.subtract(v.reshape(nb, SUB // LANES, LANES).transpose(1, 0, 2), k, out=d, dtype=np.float64)  # fmt: skip
    for acc in (acc1, acc2):
        if acc is acc2:
            np.multiply(d, d, out=d)
        acc[0] = in_order(np.concatenate([acc, in_order(d, 0)]), 0)


def _short_lanes(v: np.ndarray, k: np.ndarray, fin, acc1: np.ndarray, acc2: np.ndarray) -> None:
    """``_lanes`` of ``d = v - k`` and ``d * d`` for rows ``v`` shorter than a sub-block,
    of whole lanes (``fin``: their finite values, None for all), added to ``acc1`` and
    ``acc2``: ``d`` laid out lane-block first, so that each sum in order runs over the
    rows' lanes at once (a fifth quicker than ``_lanes``'s row by row)."""
    rows, n = v.shape
    d = np.empty((n // LANES, rows, LANES))
    np.subtract(v.reshape(rows, -1, LANES).transpose(1, 0, 2), k[None, :, None], out=d, dtype=np.float64)  # fmt: skip
    if fin is not None:
        d[~fin.reshape(rows, -1, LANES).transpose(1, 0, 2)] = 0.0
    acc1 += in_order(d, 0)
    acc2 += in_order(np.multiply(d, d, out=d), 0)


def _lanes(d: np.ndarray, acc: np.ndarray) -> None:
    """Rows ``d`` (2-D float64) summed as the row kernel sums them: in sub-blocks of
    ``SUB`` values, each in ``LANES`` lanes from 0.0 (a short one's missing values 0.0),
    the sub-blocks' lanes added in order to the rows' lanes so far, ``acc`` (rows,
    ``LANES``), in place."""
    rows, n = d.shape
    full = n // SUB
    if full:
        lanes = in_order(d[:, : full * SUB].reshape(rows, full, SUB // LANES, LANES), 2)
        for b in range(full):
            acc += lanes[:, b]
    if n > full * SUB:
        tail = d[:, full * SUB :]
        if not full and n % LANES == 0 and d.flags.c_contiguous:
            pad = d  # what the padded copy would hold, laid out as it would be
        else:
            pad = np.zeros((rows, -(-tail.shape[1] // LANES) * LANES))
            pad[:, : tail.shape[1]] = tail
        acc += _lane_sums(pad.reshape(rows, -1, LANES))


def _lane_sums(v: np.ndarray) -> np.ndarray:
    """``in_order(v, 1)`` of ``v`` (rows, sub-blocks, ``LANES``): of many rows of few
    sub-blocks, each sub-block added in turn to the rows' sums from 0.0 (the same
    additions in the same order; twice as fast as a reduction over the middle axis)."""
    rows, subs, _ = v.shape
    if rows < 64 or subs > 64:
        return in_order(v, 1)
    out = np.zeros((rows, LANES))
    for j in range(subs):
        out += v[:, j]
    return out


def _risks(v: np.ndarray, fin: np.ndarray, clean: bool, thr: np.ndarray) -> list:
    """The masks of every counter slot over ``v`` (``fin``: its finite values; ``clean``:
    all of them), None for a slot that cannot hold there (an unused cast slot, or no
    value beyond its threshold)."""
    masks: list = [None] * N_KINDS
    if not clean:
        masks[kinds.SLOT_NAN] = np.isnan(v)
        masks[kinds.SLOT_POSINF], masks[kinds.SLOT_NEGINF] = v == np.inf, v == -np.inf
    a = None
    for t in range(N_TARGET_SLOTS):
        over, under = thr[2 * t], thr[2 * t + 1]
        for kind, unused in (("overflow:", over == np.inf), ("underflow:", under < 0)):
            if unused:
                continue
            if a is None:
                with np.errstate(invalid="ignore"):
                    a = np.abs(v)
            with np.errstate(invalid="ignore"):
                masks[cast_slot(kind, t)] = (
                    ((a >= over) & fin) if kind == "overflow:" else ((a <= under) & (a > 0))
                )
    return masks


def _nonfinite(masks: list) -> list:
    """The NaN, +inf and -inf masks of ``_risks``'s."""
    return [masks[k] for k in (kinds.SLOT_NAN, kinds.SLOT_POSINF, kinds.SLOT_NEGINF)]


def _listed(masks, spans, counts, cap, seen, blocks, m) -> int:
    """Count the kinds of ``masks`` (one per kind, None for none; over values whose rows
    are ``spans``, ``(start, stop, first position)`` each, in order) into ``counts``, and
    list in ``blocks`` from column ``m`` the spans holding a kind whose positions are still
    wanted (``seen``: the values of each kind counted before in this call); returns ``m``
    after them (``rows.scan_rows``'s rule, by spans rather than sub-blocks)."""
    per = np.zeros((len(spans), N_KINDS), np.int64)
    for k, mk in enumerate(masks):
        if mk is not None:
            per[:, k] = mk.reshape(len(spans), -1).sum(axis=1)
    counts += per.sum(axis=0)
    for i in np.flatnonzero(per.any(axis=1)):
        wanted = (per[i] > 0) & (seen < cap)
        seen += per[i]
        if wanted.any():
            blocks[:, m] = spans[i]
            m += 1
    return m


def _first_finite(x2: np.ndarray, axis: int) -> np.ndarray:
    """The first finite value along ``axis`` of each line (0 for none), in float64."""
    if x2.shape[axis] == 0:
        return np.zeros(x2.shape[1 - axis])
    head = x2[:, 0] if axis == 1 else x2[0]
    if np.isfinite(head).all():  # each line's first value (most lines: not all looked at)
        return head.astype(np.float64)
    fin = np.isfinite(x2)
    first = np.argmax(fin, axis=axis)
    got = np.take_along_axis(x2, np.expand_dims(first, axis), axis).squeeze(axis)
    return np.where(fin.any(axis=axis), got, 0).astype(np.float64)


def scan_rows(x, rows, n, thr, counts, cap, seen, blocks, shift, s1, s2, mn, mx, cnan, cpos, cneg):  # fmt: skip
    """``kernels.rows.scan_rows``: counts, per-row statistics and the spans where the first
    positions of each kind lie (listed by rows, or pieces of a long row)."""
    x2 = x[: rows * n].reshape(rows, n)
    seen[:] = 0
    m = 0
    batch = max(1, PIECE // max(n, 1))
    for r0 in range(0, rows, batch):
        part = x2[r0 : r0 + batch]
        rs = part.shape[0]
        k = _first_finite(part, 1)
        shift[r0 : r0 + rs] = k
        acc1, acc2 = np.zeros((rs, LANES)), np.zeros((rs, LANES))
        lo, hi = np.full(rs, np.inf), np.full(rs, -np.inf)
        seg = max(SUB, PIECE // SUB * SUB) if rs == 1 else n
        for a in range(0, n, seg):  # a long row in pieces of whole sub-blocks
            v = part[:, a : a + seg]
            w = v.shape[1]
            if rs == 1 and w and w % SUB == 0:  # extrema neither NaN nor inf: all finite
                plo, phi = v.min(), v.max()
                if -np.inf < plo and phi < np.inf:
                    masks = _risks(v, True, True, thr)
                    spans = np.array([[r0 * n + a, r0 * n + a + w, r0 * n + a]])
                    m = _listed(masks, spans, counts, cap, seen, blocks, m)
                    with np.errstate(over="ignore", invalid="ignore"):
                        _row_lanes(v[0], k[0], acc1, acc2)
                    lo, hi = np.minimum(lo, plo), np.maximum(hi, phi)
                    continue
            fin = np.isfinite(v)
            clean = bool(fin.all())
            masks = _risks(v, fin, clean, thr)
            starts = np.arange(r0, r0 + rs) * n + a
            spans = np.stack([starts, starts + w, starts], axis=1)
            m = _listed(masks, spans, counts, cap, seen, blocks, m)
            if not clean:
                for c, mk in zip((cnan, cpos, cneg), _nonfinite(masks)):
                    c[r0 : r0 + rs] += mk.sum(axis=1)
            with np.errstate(over="ignore", invalid="ignore"):
                if w == n and 0 < n < SUB and n % LANES == 0:  # short rows, whole lanes
                    _short_lanes(v, k, None if clean else fin, acc1, acc2)
                else:
                    d = np.subtract(v, k[:, None], dtype=np.float64)  # v in float64, - k
                    if not clean:
                        d[~fin] = 0.0
                    _lanes(d, acc1)  # a long row's pieces continue its lanes
                    _lanes(np.multiply(d, d, out=d), acc2)
            if w:
                lo = np.minimum(lo, (v if clean else np.where(fin, v, np.inf)).min(axis=1))
                hi = np.maximum(hi, (v if clean else np.where(fin, v, -np.inf)).max(axis=1))
        s1[r0 : r0 + rs], s2[r0 : r0 + rs] = fold(acc1), fold(acc2)
        mn[r0 : r0 + rs], mx[r0 : r0 + rs] = lo, hi
    return m


def widen(src: np.ndarray, table: np.ndarray) -> np.ndarray:
    """bfloat16 or float8 bits as float32 values (``table``: float8's 256, or empty)."""
    if src.dtype.itemsize == 2:
        return (src.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return table[src]


def scan_narrow(src, table, rows, n, thr, counts, cap, seen, blocks, *stats_and_buffer):
    """``kernels.rows.scan_narrow``: ``scan_rows`` of the widened values (the kernel's
    buffer, the last argument, is not needed)."""
    return scan_rows(widen(src, table), rows, n, thr, counts, cap, seen, blocks, *stats_and_buffer[:8])  # fmt: skip


def scan_cols(x, rows, cols, pitch, thr, counts, cap, seen, blocks, shift, s1, s2, mn, mx, cnan, cpos, cneg, sc=None, ci=None):  # fmt: skip
    """``kernels.cols.scan_cols``: per-column statistics of a block of ``rows`` rows of
    ``cols`` values ``pitch`` apart in ``x``; spans listed tile by tile, row by row."""
    item = x.itemsize
    x2 = np.lib.stride_tricks.as_strided(x, (rows, cols), (pitch * item, item))
    k = _first_finite(x2, 0) if rows else np.zeros(cols)
    shift[:] = k
    seen[:] = 0
    m = 0
    for c in range(0, cols, TILE):
        t = x2[:, c : c + TILE]
        w = t.shape[1]
        fin = np.isfinite(t)
        clean = bool(fin.all())
        masks = _risks(t, fin, clean, thr)
        r = np.arange(rows)
        spans = np.stack([r * pitch + c, r * pitch + c + w, r * cols + c], axis=1)
        m = _listed(masks, spans, counts, cap, seen, blocks, m)
        if not clean:
            for out, mk in zip((cnan, cpos, cneg), _nonfinite(masks)):
                out[c : c + w] += mk.sum(axis=0)
    acc1, acc2 = np.zeros(cols), np.zeros(cols)
    lo, hi = np.full(cols, np.inf), np.full(cols, -np.inf)
    step = max(CHUNK, PIECE // max(cols, 1) // CHUNK * CHUNK)
    for r0 in range(0, rows, step):  # whole chunks at a time
        v = x2[r0 : r0 + step]
        fin = np.isfinite(v)
        clean = bool(fin.all())
        with np.errstate(over="ignore", invalid="ignore"):
            d = v.astype(np.float64) - k
            if not clean:
                d[~fin] = 0.0
            nch = -(-v.shape[0] // CHUNK)
            for acc, w in ((acc1, d), (acc2, d * d)):
                pad = np.zeros((nch * CHUNK, cols))
                pad[: v.shape[0]] = w
                chunks = in_order(pad.reshape(nch, CHUNK, cols), 1)  # each chunk from 0.0
                for q in range(nch):
                    acc += chunks[q]  # then added to the column's, in order
        lo = np.minimum(lo, (v if clean else np.where(fin, v, np.inf)).min(axis=0))
        hi = np.maximum(hi, (v if clean else np.where(fin, v, -np.inf)).max(axis=0))
    s1[:], s2[:], mn[:], mx[:] = acc1, acc2, lo, hi
    return m


def quick_check(x, thr) -> bool:
    """``kernels.checks.quick_check``: no non-finite value and no cast risk in 1-D ``x``."""
    fin = np.isfinite(x)  # the twins' own predicates (``_risks``), not ``compute.positions``'
    return not any(m is not None and m.any() for m in _risks(x, fin, bool(fin.all()), thr))


def moments(length, shift, s1, s2, cnan, cpos, cneg, n, mean, std) -> None:
    """``kernels.slices._moments``: per slice count, mean and std from the shifted sums."""
    c = length - cnan - cpos - cneg
    with np.errstate(all="ignore"):
        cs = np.maximum(c, 1).astype(np.float64)
        ok = (np.abs(s1) < np.inf) & (s2 < np.inf)
        q = s1 / cs
        v = s2 - s1 * q
        m = shift + q
        sd = np.sqrt(np.where(v > 0, v, 0.0) / cs)
    n[:] = c
    mean[:] = np.where(c > 0, np.where(ok, m, np.nan), 0.0)
    std[:] = np.where(c > 0, np.where(ok, sd, np.nan), 0.0)


def _bits(count, mean, std, z, bad, eps, z_threshold, thresholds) -> np.ndarray:
    """``kernels.slices._flag_block`` elementwise: each slice kind's predicate, at its bit
    (``kinds.slice_kinds``; a kind without a predicate here is a KeyError)."""
    fn = count.astype(np.float64)
    spread = count > 1
    with np.errstate(all="ignore"):
        r = np.where(fn * eps < 1.0, np.sqrt(1.0 - fn * eps), 0.0)
        near = (fn * eps >= 1.0) | (std * r <= fn * np.abs(mean) * eps)
        said = {
            "nonfinite": bad > 0,
            "zero_variance": spread & (std == 0),
            "near_zero_variance": spread & (std != 0) & (std < np.inf) & near,
            "outlier": spread & (z > z_threshold),
        }
        total, m2 = np.abs(mean * fn), std * std * fn
        per = {"sum_overflow:": total, "variance_overflow:": m2}
        for t, th in enumerate(thresholds):
            for kind, v in per.items():
                said[f"{kind}{t}"] = (count > 0) & (v >= th)
    names = kinds.slice_kinds(range(len(thresholds)))  # the dtypes by their index
    return sum(said[kind].astype(np.int64) << j for j, kind in enumerate(names))


def _flagged(every, where, flags) -> int:
    found = np.flatnonzero(every)
    where[: len(found)], flags[: len(found)] = found, every[found]
    return len(found)


def _finish(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, final, z=None, eps=0.0, z_threshold=0.0, thresholds=(), where=None, flags=None):  # fmt: skip
    """``kernels.slices._finish``: blocks of ``SLICE_BLOCK`` slices, their totals combined
    in order by ``stats.chan``."""
    moments(length, shift, s1, s2, cnan, cpos, cneg, n, mean, std)
    tn, tmean, tstd, lo, hi, tsum = slice_totals(n, mean, std, mn, mx)
    rescue = len(rescue_rows(n, mean, mn, mx))
    if not final:
        return tn, tmean, tstd, lo, hi, tsum, rescue
    z[:] = np.where(n > 0, max_abs_z(mean, std, mn, mx), 0.0)
    bits = _bits(n, mean, std, z, cnan + cpos + cneg, eps, z_threshold, thresholds)
    return tn, tmean, tstd, lo, hi, tsum, rescue, _flagged(bits, where, flags), int((n == 0).sum())  # fmt: skip


def finish_slices(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std):
    """``kernels.slices.finish_slices``."""
    return _finish(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, False)


def finish_whole_slices(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, z, eps, z_threshold, thresholds, where, flags):  # fmt: skip
    """``kernels.slices.finish_whole_slices``."""
    return _finish(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, True, z, eps, z_threshold, thresholds, where, flags)  # fmt: skip


def fold_slices(idx, n, mean, std, mn, mx, nan, pos, neg, *dense) -> None:
    """``kernels.slices.fold_slices``: slice statistics merged into dense per-slice arrays
    in place (``stats.combine``: ``stats.chan`` elementwise)."""
    dn, dmean, dstd, dmn, dmx, dnan, dpos, dneg = dense
    dn[idx], dmean[idx], dstd[idx] = combine(dn[idx], dmean[idx], dstd[idx], n, mean, std)
    dmn[idx] = np.where(mn < dmn[idx], mn, dmn[idx])
    dmx[idx] = np.where(mx > dmx[idx], mx, dmx[idx])
    for d, v in ((dnan, nan), (dpos, pos), (dneg, neg)):
        d[idx] += v


def slice_columns(n, mean, std, mn, mx, out_mean, out_std, out_min, out_max, out_z) -> None:
    """``kernels.slices.slice_columns``: a report's per-slice columns."""
    has = n > 0
    z = np.where(has, max_abs_z(mean, std, mn, mx), 0.0)
    cols = [np.where(has, c, np.nan) for c in (mean, std, mn, mx)]
    for out, c in zip((out_mean, out_std, out_min, out_max, out_z), (*cols, z)):
        out[:] = c


def slice_flags(count, mean, std, max_z, nan, pos, neg, eps, z_threshold, thresholds, where, flags) -> int:  # fmt: skip
    """``kernels.slices.slice_flags``: the flagged slices' positions and bits (bit ``j``
    for the ``j``-th kind of ``kinds.slice_kinds``); returns how many."""
    bits = _bits(count, mean, std, max_z, nan + pos + neg, eps, z_threshold, thresholds)
    return _flagged(bits, where, flags)


def scaled_counts(x, lim, counts, locs, nlocs) -> None:
    """``kernels.checks.scaled_counts``: on ``f = |float32(v)|`` of the finite non-zero
    values, overflow ``f >= over``, underflow ``f <= under``, subnormal between it and
    ``normal``."""
    over, under, normal = lim
    with np.errstate(all="ignore"):
        nonzero = np.isfinite(x) & (x != 0)
        f = np.abs(x.astype(np.float32))
    o = nonzero & (f >= over)
    u = nonzero & ~o & (f <= under)
    counts += [o.sum(), u.sum(), (nonzero & ~o & ~u & (f < normal)).sum(), nonzero.sum()]
    for row, m in enumerate((o, u)):
        found = np.flatnonzero(m)[: locs.shape[1] - nlocs[row]]
        locs[row, nlocs[row] : nlocs[row] + len(found)] = found
        nlocs[row] += len(found)


TWINS = {
    "scan_rows": scan_rows,
    "scan_narrow": scan_narrow,
    "scan_cols": scan_cols,
    "quick_check": quick_check,
    "finish_slices": finish_slices,
    "finish_whole_slices": finish_whole_slices,
    "fold_slices": fold_slices,
    "slice_columns": slice_columns,
    "slice_flags": slice_flags,
    "scaled_counts": scaled_counts,
}
