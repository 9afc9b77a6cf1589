"""Numba kernels: one pass over a contiguous block of float32 or float64 values, keeping
statistics per row (``scan_rows``) or per column (``scan_cols``).

The kernels know nothing of axes, sources or Python objects. The caller turns float16,
big-endian, strided, integer and bool data into a contiguous float32/float64 block first
(see ``fastfinite.blocks``).

Never the blanket ``fastmath`` switch: its ``nnan``/``ninf`` flags let LLVM delete the NaN
and inf tests this package exists for. ``reassoc`` and ``contract`` only allow reordering the
sums, which the vectorizer needs for float reductions.

How the pass stays fast: the block is cut into sub-blocks of ``SUB_BLOCK_BYTES``. One
branch-free loop (``_pass``) reads each value once and takes its extrema and the shifted sums
in float64. A non-finite value makes the sums non-finite, so a finite sum proves the sub-block
clean. LLVM vectorizes a float min/max reduction only under ``nnan``: that flag sits on the
min/max calls alone (``_extremum``), whose results are used only for clean sub-blocks; a
sub-block holding NaN or inf takes its extrema and sums again over the finite values
(``_extrema_finite``, ``_sums_finite``). One holding a non-finite value or crossing a cast
threshold goes through the exact classifying loop (``_classify``) and, while locations are
still wanted, ``_record``. The per-column kernel and ``quick_check`` (no sums) take the
extrema over integer keys that order like the floats instead, which also tell NaN and inf
apart from finite values (``_keys``, ``_clean``); in wide column tiles the per-column sums,
extrema and smallest magnitudes tell it after a chunk of rows is added, as ``_pass``'s sums
do (``_added_clean``), so those rows are read once. Per-row loops index flat arrays by offset:
numba counts references to every array view it makes, which costs more than a short row.
"""

from __future__ import annotations

import math
import platform

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils, config
from numba.extending import intrinsic, overload

from .kinds import N_KINDS, N_TARGET_SLOTS, NAN, NEGINF, POSINF
from .stats import SLICE_BLOCK, TINY

# numba bakes these constants from other modules into the kernels it caches, and keys its
# cache on this file's text alone: a change to one of them must change this line too, or
# a cache from before the change would run kernels with the old values
_BAKED = (13, 5, 0, 1, 2, 512, 2.0**-480)
if (N_KINDS, N_TARGET_SLOTS, NAN, POSINF, NEGINF, SLICE_BLOCK, TINY) != _BAKED:
    raise RuntimeError(
        "a constant the kernels take from kinds.py or stats.py changed: write the new "
        "(N_KINDS, N_TARGET_SLOTS, NAN, POSINF, NEGINF, SLICE_BLOCK, TINY) into "
        "kernels._BAKED, so that numba's cached kernels are compiled again"
    )


def _codegen_as_default() -> bool:
    """Whether numba generates code with its default settings. Only then are the kernels
    read from and written to numba's cache, which is keyed on the source and the CPU, not
    on these settings (numba/numba#10821): a kernel compiled for a profiler (no inlining,
    so its loops not in vectors) would be loaded by every later process, 20x slower."""
    return (
        int(config.OPT) == 3
        and not getattr(config.OPT, "is_opt_max", False)
        and not config.DEBUGINFO_DEFAULT
        and not config.ENABLE_PROFILING  # set by numba itself under a profiler it detects
        and bool(config.LOOP_VECTORIZE)
        and not config.SLP_VECTORIZE
        and not config.BOUNDSCHECK
        and not config.EXTEND_VARIABLE_LIFETIMES
    )


_CACHE = _codegen_as_default()

SUB_BLOCK_BYTES = 65536
PIECE_BYTES = 2048  # a dirty sub-block is taken again in pieces of this size
RUN = 256  # values ``_under_positions`` checks at once for an underflow
COL_TILE = 12288  # columns per tile of scan_cols: its accumulators (40 bytes each) stay in L2
assert COL_TILE % SLICE_BLOCK == 0  # scan_cols_finished's blocks are finish_whole_slices's
GROUP_VALUES = 4096  # scan_cols checks whole short rows in groups of about this many values
WIDE_TILE = 512  # scan_cols adds rows eight at a time in tiles at least this wide, else four
CHUNK_VALUES = 1 << 16  # values a wide tile of scan_cols adds before it checks them
CHUNK_ROWS = 512  # and rows at least: each chunk also saves and checks the tile's sums
NARROW_SPAN = 8  # a chunk's columns taken again under 1/8 of its tile: not a failure
RUN_GAP = 64  # dirty columns closer than this are taken again as one run (_dirty_runs)
# a 0 the kernels pass each other: a literal 0 would be typed Literal[int](0), and each
# kernel compiled once more for it (an int64 global is typed int64)
_ZERO = np.int64(0)
# rows of at most FAST_ROW_BYTES are read by the fast pass alone (_rows); those longer than a
# sub-block, FAST_BATCH_BYTES (or four rows) at a time: a row it lists is taken again from cache
FAST_ROW_BYTES = 1 << 20
FAST_BATCH_BYTES = 1 << 20
FOLD_VALUES = 4096  # scan_cols takes shorter rows side by side as one row at least this long
FLAG_BLOCK = SLICE_BLOCK  # slices slice_flags takes in vectors before it looks for flagged ones
# _fast_rows asks for rows of at most PREFETCH_ROW_BYTES about PREFETCH_AHEAD bytes before
# it reads them; longer rows are streams the hardware prefetchers follow (_prefetch_run)
PREFETCH_ROW_BYTES = 3072
PREFETCH_AHEAD = 2048
CACHE_LINE = 64

_FLAGS = {"reassoc", "contract"}


# Integer work below is kept at the width of ``xi`` (``T(...)``): numba widens int32
# arithmetic to int64, which halves the vector width. Keys are order-preserving integer
# images of floats: sign-magnitude bits folded to two's complement (an involution).


@njit(nogil=True, cache=_CACHE)
def _key(b, big):
    T = type(b)
    return T(b ^ big) if b < T(0) else b


@njit(nogil=True, cache=_CACHE)
def _keys(xi, big):
    """Fast pass over the bits ``xi`` of a float block: ``(min_key, max_key)``.

    The keys of the finite values lie strictly between those of -inf and +inf and NaN's lie
    outside, so the extrema alone tell whether the block is clean (``_clean``); only then are
    they those of the finite values.
    """
    T = xi.dtype.type
    mn = big
    mx = T(~big)
    for i in range(xi.shape[0]):  # a loop from 0 vectorizes twice as well as range(s, e)
        b = xi[i]
        key = T(b ^ big) if b < T(0) else b
        mn = min(mn, key)
        mx = max(mx, key)
    return mn, mx


@njit(nogil=True, cache=_CACHE)
def _keys_tiny(xi, big):
    """``_keys`` plus the magnitude bits of the smallest non-zero value (underflow check)."""
    T = xi.dtype.type
    mn = big
    mx = T(~big)
    mz = big
    for i in range(xi.shape[0]):
        b = xi[i]
        ab = T(b & big)
        key = T(b ^ big) if b < T(0) else b
        mn = min(mn, key)
        mx = max(mx, key)
        mz = min(mz, ab if ab > T(0) else big)
    return mn, mx, mz


@njit(nogil=True, cache=_CACHE)
def _clean(mn, mx, inf_bits):
    """Whether extrema keys ``mn``/``mx`` are those of finite values only: -inf's key is
    ``~inf_bits``, NaN's lie beyond the infinities'."""
    return mn > type(mn)(~inf_bits) and mx < inf_bits


@njit(nogil=True, cache=_CACHE)
def _all_nan(mn, mx, inf_bits):
    """Whether extrema keys ``mn``/``mx`` are those of NaNs alone, all of one sign (the
    keys of NaNs lie beyond those of the infinities): nothing but NaN to count."""
    return mn > inf_bits or mx < type(mx)(~inf_bits)


@njit(nogil=True, cache=_CACHE)
def _count_each(c, a, b):
    """One more in each of ``c[a:b]``: a value of the kind ``c`` counts in every column."""
    for j in range(a, b):
        c[j] += 1


def _extremum(name: str):
    """``llvm.minnum`` or ``llvm.maxnum`` of two floats with ``nnan`` and ``nsz`` on this one
    call: the only way LLVM vectorizes a float min/max reduction. The flags say nothing
    about the operands' other uses, so the NaN tests elsewhere stay; a NaN operand makes the
    result undefined, which is why ``_pass``'s extrema count only when its sums are finite,
    and the sign of a zero extremum may be either."""

    @intrinsic
    def impl(typingctx, a, b):
        if not isinstance(a, types.Float) or a != b:
            return None

        def codegen(context, builder, sig, args):
            t = args[0].type
            suffix = "f32" if t == ir.FloatType() else "f64"
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(t, [t, t]), f"llvm.{name}.{suffix}"
            )
            return builder.call(fn, args, fastmath=("nnan", "nsz"))

        return a(a, b), codegen

    return impl


_fmin = _extremum("minnum")
_fmax = _extremum("maxnum")


@intrinsic
def _f32_of_bits(typingctx, u):
    """The float32 whose bits are the uint32 ``u``."""
    if u != types.uint32:
        return None
    return types.float32(u), lambda context, builder, sig, args: builder.bitcast(
        args[0], ir.FloatType()
    )


@intrinsic
def _bits_of_f32(typingctx, f):
    """The bits of the float32 ``f`` as a uint32."""
    if f != types.float32:
        return None
    return types.uint32(f), lambda context, builder, sig, args: builder.bitcast(
        args[0], ir.IntType(32)
    )


def _load(x, xu, i):
    """Value ``i`` of a block and its bits: ``x[i], xu[i]`` for float data; for narrow data
    (``x`` its uint16 bfloat16 or uint8 float8 bits, ``xu`` float8's table), the value
    widened to float32 and that float's bits."""


@overload(_load, jit_options={"cache": _CACHE})
def _load_impl(x, xu, i):
    if isinstance(x.dtype, types.Float):
        return lambda x, xu, i: (x[i], xu[i])
    if x.dtype.bitwidth == 16:  # bfloat16: the top half of a float32

        def bf16(x, xu, i):
            b = np.uint32(np.uint32(x[i]) << np.uint32(16))
            return _f32_of_bits(b), b

        return bf16

    def f8(x, xu, i):  # float8: its table
        v = xu[x[i]]
        return v, _bits_of_f32(v)

    return f8


@njit(nogil=True, cache=_CACHE)
def _pass(x, xu, off, n, k, lim):
    """One read of values ``off:off + n`` of a block (``_load``): ``(min, max, under,
    sum(x - k), sum((x - k)**2))``, the sums in float64. A non-finite value makes the first
    sum non-finite; only when it is finite do the extrema hold (``_extremum``). ``under``:
    per cast-target slot, the non-zero values at most its underflow threshold, counted on
    the magnitude bits (``_bounds``). An offset rather than a slice: a view per short row
    costs reference counting that shows at 1000 values per row. One loop per number of
    underflow targets, each its own small function: a caller that knows the number calls
    it directly (``scan_rows``, for each short row), and LLVM inlines it there (this one,
    with all three, it does not: the call would cost more than a row of 100 values)."""
    ntiny = lim[3]
    if ntiny == 0:
        return _pass_none(x, xu, off, n, k, lim)
    if ntiny == 1:
        return _pass_one(x, xu, off, n, k, lim)
    return _pass_many(x, xu, off, n, k, lim)


# the inline-assembly constraint of a float register, by machine ("" elsewhere: ``_opaque``
# then passes its value on as it is)
_FLOAT_REGISTER = {"x86_64": "x", "amd64": "x", "aarch64": "w", "arm64": "w"}.get(
    platform.machine().lower(), ""
)


@intrinsic
def _opaque(typingctx, a):
    """The float64 ``a``, passed through an empty piece of inline assembly: the optimizer
    cannot tell its value, so it keeps the arithmetic done with it as written."""
    if a != types.float64:
        return None

    def codegen(context, builder, sig, args):
        if not _FLOAT_REGISTER:
            return args[0]
        fnty = ir.FunctionType(args[0].type, [args[0].type])
        return builder.asm(fnty, "", f"={_FLOAT_REGISTER},0", [args[0]], side_effect=False)

    return a(a), codegen


@intrinsic
def _prefetch(typingctx, a, i):
    """A hint that the value ``a[i]`` of a flat array will be read soon: ``llvm.prefetch``
    into every level of the data cache (no effect on results; a no-op where the machine
    has no such instruction)."""
    if not (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], fnty)  # llvmlite's name
        at = builder.bitcast(builder.gep(data, [args[1]]), i8p)
        builder.call(fn, [at, i32(0), i32(3), i32(1)])  # read, keep in every level, data
        return context.get_dummy_value()

    return types.void(a, types.intp), codegen


@njit(nogil=True, cache=_CACHE, inline="always")
def _prefetch_run(x, off, n):
    """``_prefetch`` for each cache line of ``x[off:off + n]`` (none past the end of ``x``):
    the rows of a batch of short rows are read in four interleaved streams of small jumps,
    which the hardware prefetchers follow too late. Rows of 100 float32 read from memory,
    one thread on a Xeon: the pass 0.44 -> 0.33 ns a value; float64 0.67 -> 0.51."""
    if off + n <= x.size:
        step = CACHE_LINE // 4 if x.itemsize == 4 else CACHE_LINE // 8  # float32, float64
        end = off + n
        while off < end:  # not a range with a step: its count would take a division
            _prefetch(x, off)
            off += step
        _prefetch(x, end - 1)  # a row's lines do not start where it does


@intrinsic
def _muladd(typingctx, a, b, c):
    """``a * b + c`` of float64s as ``llvm.fmuladd`` under ``_FLAGS`` (a fused
    multiply-add where the machine has one)."""
    if not (a == b == c == types.float64):
        return None

    def codegen(context, builder, sig, args):
        t = args[0].type
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(t, [t, t, t]), "llvm.fmuladd.f64"
        )
        return builder.call(fn, args, fastmath=tuple(_FLAGS))

    return a(a, b, c), codegen


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS, inline="always")
def _take(v, k64, mn, mx, s1, s2, unit):
    """One value ``v`` into a pass's extrema and shifted sums (``k64``: the shift). ``unit``:
    1.0 as ``_opaque`` gives it. The first sum adds ``d * unit``: the same bits as adding
    ``d`` (a product by 1 is exact, and so is a fused one), but a multiply-add the optimizer
    cannot turn back into an addition, so it runs on the units that multiply. The
    subtraction, the extrema and (for float32 data) the conversions keep the units that add
    busy; with the sum moved, the loop runs 10-20% faster."""
    d = np.float64(v) - k64
    return _fmin(mn, v), _fmax(mx, v), _muladd(d, unit, s1), s2 + d * d


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _pass_none(x, xu, off, n, k, lim):
    """``_pass`` without an underflow target."""
    inf = lim[5]
    mn = inf
    mx = -inf
    k64, unit = np.float64(k), _opaque(1.0)
    s1 = 0.0
    s2 = 0.0
    off = np.uint64(off)  # unsigned indices: no negative-index wraparound to block vectorizing
    n = np.uint64(n)
    for i in range(n):
        v, _ = _load(x, xu, off + i)
        mn, mx, s1, s2 = _take(v, k64, mn, mx, s1, s2, unit)
    z = np.int64(0)
    return mn, mx, (z, z, z, z, z), s1, s2


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS, inline="always")
def _pass_none2(x, xu, offa, offb, n, ka, kb, lim):
    """``_pass_none`` on two runs of ``n`` values at once (offsets ``offa``, ``offb``;
    shifts ``ka``, ``kb``), side by side in one loop: two streams of reads
    (``_pass_halves``). Returns each run's results. Inlined into its caller, under
    ``_FLAGS`` as it is, as ``_pass_none4``."""
    inf = lim[5]
    mna, mxa, mnb, mxb = inf, -inf, inf, -inf
    ka64, kb64, unit = np.float64(ka), np.float64(kb), _opaque(1.0)
    s1a, s2a, s1b, s2b = 0.0, 0.0, 0.0, 0.0
    offa, offb, n = np.uint64(offa), np.uint64(offb), np.uint64(n)
    for i in range(n):
        va, _ = _load(x, xu, offa + i)
        vb, _ = _load(x, xu, offb + i)
        mna, mxa, s1a, s2a = _take(va, ka64, mna, mxa, s1a, s2a, unit)
        mnb, mxb, s1b, s2b = _take(vb, kb64, mnb, mxb, s1b, s2b, unit)
    z = np.int64(0)
    return (mna, mxa, (z, z, z, z, z), s1a, s2a), (mnb, mxb, (z, z, z, z, z), s1b, s2b)


@njit(nogil=True, cache=_CACHE, inline="always")
def _one_target(lim):
    """What ``_pass_one`` and its two- and four-row forms take of ``lim``: ``(big, 1,
    bound, slot, inf)``, the one underflow target's bound and slot, the integers at the
    width of the bits (``big``'s type)."""
    _, big, ub, _, slots, inf = lim
    first = slots[0]
    return big, type(big)(1), ub[first], first, inf


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _pass_one(x, xu, off, n, k, lim):
    """``_pass`` with one underflow target: one count."""
    big, one, b0, first, inf = _one_target(lim)
    U = type(big)
    mn = inf
    mx = -inf
    k64, unit = np.float64(k), _opaque(1.0)
    s1 = 0.0
    s2 = 0.0
    c0 = U(0)
    off = np.uint64(off)
    n = np.uint64(n)
    for i in range(n):
        v, b = _load(x, xu, off + i)
        c0 += U(U(U(b - one) & big) < b0)  # m - 1 < bound: 0 < m <= bound; unsigned
        mn, mx, s1, s2 = _take(v, k64, mn, mx, s1, s2, unit)
    return mn, mx, _in_slot(np.int64(c0), first), s1, s2


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS, inline="always")
def _pass_one2(x, xu, offa, offb, n, ka, kb, lim):
    """``_pass_one`` on two runs at once, as ``_pass_none2``."""
    big, one, b0, first, inf = _one_target(lim)
    U = type(big)
    mna, mxa, mnb, mxb = inf, -inf, inf, -inf
    ka64, kb64, unit = np.float64(ka), np.float64(kb), _opaque(1.0)
    s1a, s2a, s1b, s2b = 0.0, 0.0, 0.0, 0.0
    ca, cb = U(0), U(0)
    offa, offb, n = np.uint64(offa), np.uint64(offb), np.uint64(n)
    for i in range(n):
        va, ba = _load(x, xu, offa + i)
        vb, bb = _load(x, xu, offb + i)
        ca += U(U(U(ba - one) & big) < b0)
        cb += U(U(U(bb - one) & big) < b0)
        mna, mxa, s1a, s2a = _take(va, ka64, mna, mxa, s1a, s2a, unit)
        mnb, mxb, s1b, s2b = _take(vb, kb64, mnb, mxb, s1b, s2b, unit)
    return (mna, mxa, _in_slot(np.int64(ca), first), s1a, s2a), (
        mnb, mxb, _in_slot(np.int64(cb), first), s1b, s2b,
    )  # fmt: skip


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS, inline="always")
def _pass_none4(x, xu, o, n, k, lim):
    """``_pass_none`` on four rows of ``n`` values at once (offsets ``o``, shifts ``k``:
    4-tuples), side by side in one loop: each row's sums are a chain of additions, and
    its reductions wait for the row's last reads; the next row's reads queue behind
    them. Four rows hide each other's: rows of 1000 float64 read from memory, one
    thread, two at a time 0.70 ns a value, four 0.53 (64 KB sub-blocks of one row:
    0.55). Returns each row's results. Inlined into its caller (``_fast_rows``, under
    ``_FLAGS`` as it is): called, a pass's results go through memory and its caller's
    registers to the stack (10-20% of a row of 100 values, two rows at a time)."""
    inf = lim[5]
    ma, mb, mc, md = inf, inf, inf, inf
    xa, xb, xc, xd = -inf, -inf, -inf, -inf
    ka, kb, kc, kd = np.float64(k[0]), np.float64(k[1]), np.float64(k[2]), np.float64(k[3])
    unit = _opaque(1.0)
    sa, sb, sc, sd = 0.0, 0.0, 0.0, 0.0
    qa, qb, qc, qd = 0.0, 0.0, 0.0, 0.0
    oa, ob, oc, od = np.uint64(o[0]), np.uint64(o[1]), np.uint64(o[2]), np.uint64(o[3])
    for i in range(np.uint64(n)):
        va, _ = _load(x, xu, oa + i)
        vb, _ = _load(x, xu, ob + i)
        vc, _ = _load(x, xu, oc + i)
        vd, _ = _load(x, xu, od + i)
        ma, xa, sa, qa = _take(va, ka, ma, xa, sa, qa, unit)
        mb, xb, sb, qb = _take(vb, kb, mb, xb, sb, qb, unit)
        mc, xc, sc, qc = _take(vc, kc, mc, xc, sc, qc, unit)
        md, xd, sd, qd = _take(vd, kd, md, xd, sd, qd, unit)
    z = np.int64(0)
    u = (z, z, z, z, z)
    return (ma, xa, u, sa, qa), (mb, xb, u, sb, qb), (mc, xc, u, sc, qc), (md, xd, u, sd, qd)


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS, inline="always")
def _pass_one4(x, xu, o, n, k, lim):
    """``_pass_one`` on four rows at once, as ``_pass_none4``."""
    big, one, b0, first, inf = _one_target(lim)
    U = type(big)
    ma, mb, mc, md = inf, inf, inf, inf
    xa, xb, xc, xd = -inf, -inf, -inf, -inf
    ka, kb, kc, kd = np.float64(k[0]), np.float64(k[1]), np.float64(k[2]), np.float64(k[3])
    unit = _opaque(1.0)
    sa, sb, sc, sd = 0.0, 0.0, 0.0, 0.0
    qa, qb, qc, qd = 0.0, 0.0, 0.0, 0.0
    ca, cb, cc, cd = U(0), U(0), U(0), U(0)
    oa, ob, oc, od = np.uint64(o[0]), np.uint64(o[1]), np.uint64(o[2]), np.uint64(o[3])
    for i in range(np.uint64(n)):
        va, ba = _load(x, xu, oa + i)
        vb, bb = _load(x, xu, ob + i)
        vc, bc = _load(x, xu, oc + i)
        vd, bd = _load(x, xu, od + i)
        ca += U(U(U(ba - one) & big) < b0)
        cb += U(U(U(bb - one) & big) < b0)
        cc += U(U(U(bc - one) & big) < b0)
        cd += U(U(U(bd - one) & big) < b0)
        ma, xa, sa, qa = _take(va, ka, ma, xa, sa, qa, unit)
        mb, xb, sb, qb = _take(vb, kb, mb, xb, sb, qb, unit)
        mc, xc, sc, qc = _take(vc, kc, mc, xc, sc, qc, unit)
        md, xd, sd, qd = _take(vd, kd, md, xd, sd, qd, unit)
    return (
        (ma, xa, _in_slot(np.int64(ca), first), sa, qa),
        (mb, xb, _in_slot(np.int64(cb), first), sb, qb),
        (mc, xc, _in_slot(np.int64(cc), first), sc, qc),
        (md, xd, _in_slot(np.int64(cd), first), sd, qd),
    )


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _pass_many(x, xu, off, n, k, lim):
    """``_pass`` with several underflow targets: count under the largest bound, and keep
    the smallest ``m - 1``; a slot under which no value lies counts none, and rarely (a
    float8 target) one is counted on its own."""
    _, big, ub, _, _, inf = lim
    U = type(big)
    one = U(1)
    top = U(0)
    for t in range(N_TARGET_SLOTS):
        top = max(top, ub[t])
    mn = inf
    mx = -inf
    k64, unit = np.float64(k), _opaque(1.0)
    s1 = 0.0
    s2 = 0.0
    c0 = U(0)
    low = big
    off = np.uint64(off)
    n = np.uint64(n)
    for i in range(n):
        v, b = _load(x, xu, off + i)
        m1 = U(U(b - one) & big)
        c0 += U(m1 < top)
        low = min(low, m1)
        mn, mx, s1, s2 = _take(v, k64, mn, mx, s1, s2, unit)
    c = np.int64(c0)
    under = (c, c, c, c, c)
    for t in range(N_TARGET_SLOTS):
        u = ub[t]
        if u < top:
            under = _set(under, t, _count_under(x, xu, off, n, big, u) if low < u else 0)
    return mn, mx, under, s1, s2


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _pass_halves(x, xu, off, n, k, lim):
    """``_pass`` over values ``off:off + n`` of a long row, its two halves read side by side
    (``_pass_none2``, ``_pass_one2``; the odd value last, alone): two streams of reads keep
    the hardware prefetchers ahead of the loop where one does not. One thread reading
    from memory, float32 on a Xeon: 0.43 -> 0.30 ns a value (0.24 to read every byte); in
    cache, the same. Several underflow targets: ``_pass``, one stream."""
    ntiny = lim[3]
    if ntiny > 1:
        return _pass(x, xu, off, n, k, lim)
    h = n // 2
    if ntiny == 0:
        pa, pb = _pass_none2(x, xu, off, off + h, h, k, k, lim)
    else:
        pa, pb = _pass_one2(x, xu, off, off + h, h, k, k, lim)
    res = _joined(pa, pb)
    return _joined(res, _pass(x, xu, off + 2 * h, 1, k, lim)) if n > 2 * h else res


@njit(nogil=True, cache=_CACHE)
def _joined(a, b):
    """The results of ``_pass`` over two runs of values, as one: extrema of both, counts
    and sums added."""
    mn, mx, ua, s1, s2 = a
    mnb, mxb, ub, s1b, s2b = b
    under = (ua[0] + ub[0], ua[1] + ub[1], ua[2] + ub[2], ua[3] + ub[3], ua[4] + ub[4])
    return min(mn, mnb), max(mx, mxb), under, s1 + s1b, s2 + s2b


@njit(nogil=True, cache=_CACHE)
def _count_under(x, xu, off, n, big, bound):
    """The values of ``off:off + n`` whose ``m - 1`` is under ``bound`` (``_pass``)."""
    U = type(big)
    one = U(1)
    c = U(0)
    for i in range(n):
        _, b = _load(x, xu, off + i)
        c += U(U(U(b - one) & big) < bound)
    return np.int64(c)


@njit(nogil=True, cache=_CACHE)
def _set(counts, t, c):
    """The 5-tuple ``counts`` with slot ``t`` set to ``c``."""
    c = np.int64(c)
    return (
        c if t == 0 else counts[0],
        c if t == 1 else counts[1],
        c if t == 2 else counts[2],
        c if t == 3 else counts[3],
        c if t == 4 else counts[4],
    )


@njit(nogil=True, cache=_CACHE)
def _in_slot(c, slot):
    z = type(c)(0)
    return (
        c if slot == 0 else z,
        c if slot == 1 else z,
        c if slot == 2 else z,
        c if slot == 3 else z,
        c if slot == 4 else z,
    )


@njit(nogil=True, cache=_CACHE)
def _extrema_finite(x, k):
    """``_pass``'s extrema for a piece holding NaN or inf: those of its finite values and of
    ``k``, a finite value of the same row, which stands in for the others (with an infinity
    instead, LLVM would not vectorize the loop)."""
    mn = k
    mx = k
    for i in range(x.shape[0]):
        v = x[i]
        y = v if (v - v) == 0 else k
        mn = _fmin(mn, y)
        mx = _fmax(mx, y)
    return mn, mx


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _sums_finite(x, k):
    """The sums of ``_pass`` over the finite values: non-finite ones are replaced by the
    finite shift ``k``, so they add nothing."""
    k64 = np.float64(k)
    s1 = 0.0
    s2 = 0.0
    for i in range(x.shape[0]):
        v = x[i]
        y = v if (v - v) == 0 else k
        d = np.float64(y) - k64
        s1 += d
        s2 += d * d
    return s1, s2


@njit(nogil=True, cache=_CACHE)
def _overflows(a, fin, over):
    """The cast-overflow predicate on ``a = |v|``: finite and at least the threshold."""
    return (a >= over) & fin


@njit(nogil=True, cache=_CACHE)
def _underflows(a, under):
    """The cast-underflow predicate on ``a = |v|``: non-zero and at most the threshold."""
    return (a <= under) & (a > 0)


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _classify(x, thr, cnt):
    """Exact counts over ``x`` of NaN, +inf, -inf and the cast risks, set in ``cnt``: the
    non-finite values in one loop, then each cast target's risks in a loop of its own, for
    the targets up to the last one at risk (an overflow threshold below inf, an underflow
    one at least 0). Float32 data checked against the default float32 has none, float64
    data one: counting all five slots in every loop made it several times slower."""
    inf = np.inf
    c_nan = 0
    c_pos = 0
    c_neg = 0
    for i in range(x.shape[0]):
        v = x[i]
        c_nan += v != v
        c_pos += v == inf
        c_neg += v == -inf
    cnt[0] = c_nan
    cnt[1] = c_pos
    cnt[2] = c_neg
    used = 0
    for t in range(N_TARGET_SLOTS):
        if thr[2 * t] < inf or thr[2 * t + 1] >= 0:
            used = t + 1
    for t in range(N_TARGET_SLOTS):
        cnt[3 + 2 * t], cnt[4 + 2 * t] = (
            _risks(x, thr[2 * t], thr[2 * t + 1]) if t < used else (0, 0)
        )


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _risks(x, over, under):
    """The values of ``x`` a cast target of these thresholds overflows and underflows."""
    c_o = 0
    c_u = 0
    for i in range(x.shape[0]):
        v = x[i]
        a = abs(v)
        c_o += _overflows(a, (v - v) == 0, over)
        c_u += _underflows(a, under)
    return c_o, c_u


@njit(nogil=True, cache=_CACHE)
def _limits(thr):
    """``(over, under)`` of thresholds ``thr``: a finite ``|v| >= over`` risks a cast
    overflow, a non-zero ``|v| <= under`` an underflow (unused slots hold ``(inf, -1)``)."""
    return thr[0::2].min(), thr[1::2].max()


def _unsigned(a):
    """``a`` (int32 or int64) viewed as the unsigned integers of its width."""
    return a.view(np.uint32 if a.itemsize == 4 else np.uint64)


@overload(_unsigned, jit_options={"cache": _CACHE})
def _unsigned_impl(a):
    u = np.uint32 if a.dtype.bitwidth == 32 else np.uint64
    return lambda a: a.view(u)


@njit(nogil=True, cache=_CACHE)
def _bounds(x, xu, thr):
    """What ``_pass`` and ``_plain`` compare with: ``(over, big, under_bits, ntiny, slots,
    inf)``, the integers unsigned like ``xu``, ``x``'s bits. A finite ``|v| >= over`` risks
    a cast overflow. With ``big`` the largest signed integer of the bits' width, a non-zero
    ``|v| <= under`` of a target is one whose magnitude bits ``m = b & big`` have ``m - 1 <
    under_bits`` (5 slots; 0 for a slot without underflow: never); ``(b - 1) & big`` is
    ``m - 1``, or ``big`` for a zero of either sign. ``ntiny``: the slots with an
    underflow threshold (0, 1 or 2 -- then ``slots`` are the first and last -- or more)."""
    over, _ = _limits(thr)
    U = xu.dtype.type
    bits = np.zeros(N_TARGET_SLOTS, dtype=xu.dtype)
    fl = bits.view(x.dtype)
    ntiny = 0
    first = -1
    last = 0
    for t in range(N_TARGET_SLOTS):
        if thr[2 * t + 1] >= 0:
            fl[t] = thr[2 * t + 1]
            ntiny += 1
            first = t if first < 0 else first
            last = t
    ub = (bits[0], bits[1], bits[2], bits[3], bits[4])
    return over, U(~U(0) >> U(1)), ub, ntiny, (max(first, 0), last), x.dtype.type(np.inf)


@njit(nogil=True, cache=_CACHE)
def _record(x, s, e, base, thr, want, locs, vals, nlocs):
    """Slow path: record positions ``base + i`` of ``x[i]``, ``s <= i < e``, for the kinds
    flagged in ``want``."""
    cap = locs.shape[1]
    over, under = _limits(thr)
    for i in range(s, e):
        v = x[i]
        a = abs(v)
        if a < over and (a > under or a == 0):  # finite, no cast risk: most values here
            continue
        fin = (v - v) == 0
        for kind in range(N_KINDS):
            if not want[kind] or nlocs[kind] >= cap:
                continue
            if kind == NAN:
                hit = v != v
            elif kind == POSINF:
                hit = v == np.inf
            elif kind == NEGINF:
                hit = v == -np.inf
            elif (kind - 3) % 2 == 0:
                hit = _overflows(a, fin, thr[kind - 3])
            else:
                hit = _underflows(a, thr[kind - 3])
            if hit:
                locs[kind, nlocs[kind]] = base + i
                vals[kind, nlocs[kind]] = v
                nlocs[kind] += 1


@njit(nogil=True, cache=_CACHE)
def _risky(smn, smx, smz, lo, hi, tiny_bits):
    """Whether extrema keys ``smn``/``smx`` or the smallest magnitude bits ``smz`` cross a
    cast threshold: the thresholds as keys and bits (``_work``), so no float is rebuilt."""
    return smn <= lo or smx >= hi or smz <= tiny_bits


@njit(nogil=True, cache=_CACHE)
def _classify_and_record(x, s, e, base, thr, counts, cnt, want, locs, vals, nlocs):
    """The slow path of a dirty sub-block ``x[s:e]``: exact counts added to ``counts`` (and
    left in ``cnt``), positions ``base + i`` recorded for kinds still short of the cap."""
    _classify(x[s:e], thr, cnt)
    cap = locs.shape[1]
    need = False
    for kind in range(N_KINDS):
        counts[kind] += cnt[kind]
        want[kind] = cnt[kind] > 0 and nlocs[kind] < cap
        need |= want[kind]
    if need:
        _record(x, s, e, base, thr, want, locs, vals, nlocs)


@njit(nogil=True, cache=_CACHE)
def _work(x, xi, thr):
    """Per-block constants and scratch arrays of the key kernels (``scan_cols``,
    ``quick_check``), made once per block (an allocation per short row would cost more than
    the row): ``(cnt, want, big, inf_bits, lo, hi, tiny_bits, tiny)``. A clean value ``v``
    risks a cast overflow when its key is ``<= lo`` or ``>= hi`` (the keys of -/+ the
    smallest overflow threshold), an underflow when its magnitude bits are ``<= tiny_bits``;
    ``tiny``: any underflow target."""
    big = xi.dtype.type(np.iinfo(xi.dtype).max)
    keys = np.empty(3, dtype=xi.dtype)  # scratch: the same bits seen as integers and floats
    fl = keys.view(x.dtype)
    over_min, under_max = _limits(thr)
    fl[0] = np.inf
    fl[1] = over_min
    fl[2] = -over_min
    inf_bits, hi, lo = keys[0], _key(keys[1], big), _key(keys[2], big)
    fl[0] = under_max
    tiny_bits = keys[0]  # negative when under_max is (no underflow target): never reached
    cnt = np.zeros(N_KINDS, dtype=np.int64)
    want = np.zeros(N_KINDS, dtype=np.bool_)
    return cnt, want, big, inf_bits, lo, hi, tiny_bits, under_max >= 0


@njit(nogil=True, cache=_CACHE)
def _plain(mn, mx, s1, lim):
    """Whether ``_pass``'s results show no non-finite value and no overflow risk: a finite
    sum (no NaN or inf; or, rarely, finite values whose sum overflowed) and extrema inside
    the overflow thresholds."""
    over = lim[0]
    return (s1 - s1) == 0 and mn > -over and mx < over


@njit(nogil=True, cache=_CACHE)
def _counted(under, counts, nlocs, cap):
    """Underflows ``_pass`` counted that need no positions (their kinds have all theirs):
    added to ``counts``. False when a position is still wanted: the slow path records it."""
    for t in range(N_TARGET_SLOTS):
        if under[t] > 0 and nlocs[4 + 2 * t] < cap:
            return False
    for t in range(N_TARGET_SLOTS):
        if under[t] > 0:  # no write when none: threads' counts may share a cache line
            counts[4 + 2 * t] += under[t]
    return True


@njit(nogil=True, cache=_CACHE)
def _under_positions(x, xu, s, e, base, lim, under, counts, locs, vals, nlocs):
    """A sub-block ``x[s:e]`` whose only findings are underflows, counted by ``_pass``:
    the counts added, and the positions (``base + i``) of the kinds that still want them
    recorded. Runs of ``RUN`` values without one are skipped at vector speed, and the read
    stops at the last one (the counts say how many there are). Sparse underflows (a
    float8 target on float32 data) would otherwise send every sub-block to ``_pieces``."""
    _, big, ub, _, _, _ = lim
    U = type(big)
    one = U(1)
    cap = locs.shape[1]
    top = U(0)  # the largest bound of the slots still wanting positions
    left = 0  # values under it in the sub-block: ``under`` of its slot
    for t in range(N_TARGET_SLOTS):
        counts[4 + 2 * t] += under[t]
        if under[t] > 0 and nlocs[4 + 2 * t] < cap and ub[t] > top:
            top = ub[t]
            left = under[t]
    e = np.uint64(e)
    c = np.uint64(s)
    while left > 0 and c < e:
        ce = min(c + np.uint64(RUN), e)
        hits = U(0)
        for i in range(c, ce):
            _, b = _load(x, xu, i)
            hits += U(U(U(b - one) & big) < top)
        if hits > 0:
            for i in range(c, ce):
                v, b = _load(x, xu, i)
                m1 = U(U(b - one) & big)
                if m1 < top:
                    left -= 1
                    for t in range(N_TARGET_SLOTS):
                        kk = 4 + 2 * t
                        if m1 < ub[t] and nlocs[kk] < cap:
                            locs[kk, nlocs[kk]] = base + np.int64(i)
                            vals[kk, nlocs[kk]] = np.float64(v)
                            nlocs[kk] += 1
        c = ce


@njit(nogil=True, cache=_CACHE)
def _pieces(x, xu, s, e, base, k, r, lim, thr, counts, cnt, want, locs, vals, nlocs, rcounts):
    """The slow path of a sub-block ``x[s:e]`` of row ``r`` that has something to report:
    taken again in pieces of ``PIECE_BYTES``, of which only those that have go through
    ``_classify_and_record`` (positions ``base + i``), so a few problems cost little more
    than the fast pass. Adds to the counts and returns the sub-block's ``(min, max, s1,
    s2)`` as ``_pass`` would."""
    piece = PIECE_BYTES // x.itemsize
    mn = k
    mx = k
    s1 = 0.0
    s2 = 0.0
    for p in range(s, e, piece):
        q = min(p + piece, e)
        pmn, pmx, under, a1, a2 = _pass(x, xu, p, q - p, k, lim)
        dirty = (a1 - a1) != 0
        if dirty:
            pmn, pmx = _extrema_finite(x[p:q], k)
            a1, a2 = _sums_finite(x[p:q], k)
        s1 += a1
        s2 += a2
        mn = min(mn, pmn)
        mx = max(mx, pmx)
        if dirty or not _plain(pmn, pmx, a1, lim) or max(under) > 0:
            _classify_and_record(x, p, q, base, thr, counts, cnt, want, locs, vals, nlocs)
            rcounts[0, r] += cnt[0]
            rcounts[1, r] += cnt[1]
            rcounts[2, r] += cnt[2]
    return mn, mx, s1, s2


@njit(nogil=True, cache=_CACHE)
def scan_rows(x, xi, thr, counts, rstats, rcounts, locs, vals, nlocs):
    """Scan a C-contiguous 2-D block in one pass, keeping statistics per row.

    Parameters
    ----------
    x : 2-D C-contiguous float32 or float64 array
        One row per slice (a plain scan passes a single row).
    xi : the same memory viewed as int32 or int64
    thr : array of 6 values of ``x.dtype``
        ``(overflow, underflow)`` thresholds of three cast targets (see ``casts``).
    counts : int64 array of ``N_KINDS``
        Incremented by the counts of NaN, +inf, -inf and (overflow, underflow) per target.
    rstats : float64 array (5, rows)
        Per row ``[shift, sum(y - shift), sum((y - shift)**2), min, max]`` over finite values.
    rcounts : int64 array (3, rows)
        Per row counts of NaN, +inf and -inf.
    locs : int64 array (N_KINDS, cap)
        Receives the first ``cap`` positions (flat indices into ``x``) of each kind.
    vals : float64 array (N_KINDS, cap)
        The values found at those positions.
    nlocs : int64 array of ``N_KINDS``
        Number of positions recorded per kind.
    """
    xf, xuf, lim, cnt, want, todo = _rows_start(x, xi, thr)
    _rows(xf, xuf, x.shape[0], x.shape[1], _ZERO, x.shape[0], lim, thr, counts, cnt, want, todo, rstats, _ZERO, rcounts, locs, vals, nlocs)  # fmt: skip


@njit(nogil=True, cache=_CACHE)
def scan_rows_finished(
    x, xi, thr, counts, z, mn, mx, rcounts, cnan, cpos, cneg, locs, vals, nlocs,
    n, mean, std, eps, z_threshold, thresholds, where, flags,
):  # fmt: skip
    """``scan_rows`` on rows that are whole slices (nothing else will be merged into them),
    then ``finish_whole_slices`` on its outputs, ``SLICE_BLOCK`` rows at a time: each
    block is finished right after it is read, its sums in L1 and never written out. Of
    ``rstats`` only the extrema (``mn``, ``mx``) are kept, and the largest |z| in ``z``;
    ``cnan``, ``cpos``, ``cneg``: the rows of ``rcounts``. Each column is passed on its
    own, so that it is contiguous (its loops then run in vectors). Returns
    ``finish_whole_slices``'s results."""
    rows, length = x.shape
    xf, xuf, lim, cnt, want, todo = _rows_start(x, xi, thr)
    acc = _finish_start()
    sums = np.empty((5, SLICE_BLOCK))
    for r0 in range(0, rows, SLICE_BLOCK):
        r1 = min(r0 + SLICE_BLOCK, rows)
        m = r1 - r0
        _rows(xf, xuf, rows, length, r0, r1, lim, thr, counts, cnt, want, todo, sums, r0, rcounts, locs, vals, nlocs)  # fmt: skip
        bmn, bmx = mn[r0:r1], mx[r0:r1]
        for j in range(m):
            bmn[j] = sums[3, j]
            bmx[j] = sums[4, j]
        acc = _finish_block(
            length, sums[0, :m], sums[1, :m], sums[2, :m], bmn, bmx, cnan[r0:r1],
            cpos[r0:r1], cneg[r0:r1], n[r0:r1], mean[r0:r1], std[r0:r1], r0,
            True, z[r0:r1], eps, z_threshold, thresholds, where, flags, acc,
        )  # fmt: skip
    return acc[:9]


@njit(nogil=True, cache=_CACHE)
def _rows_start(x, xi, thr):
    """``scan_rows``'s flat views, bounds and scratch: ``(xf, xuf, lim, cnt, want, todo)``
    (``todo``: the rows of a batch ``_fast_rows`` lists)."""
    cnt = np.zeros(N_KINDS, dtype=np.int64)
    want = np.zeros(N_KINDS, dtype=np.bool_)
    todo = np.empty(SLICE_BLOCK, np.int64)
    xf = x.reshape(x.size)  # flat, with offsets: a view per short row costs reference counts
    xuf = _unsigned(xi.reshape(xi.size))
    return xf, xuf, _bounds(x, xuf, thr), cnt, want, todo


@njit(nogil=True, cache=_CACHE)
def _rows(xf, xuf, rows, n, r0, r1, lim, thr, counts, cnt, want, todo, rstats, ro, rcounts, locs, vals, nlocs):  # fmt: skip
    """Rows ``r0:r1`` of ``scan_rows``'s block of ``rows`` rows of ``n`` values (``xf``:
    flat), row ``r``'s statistics in column ``r - ro`` of ``rstats``. Rows of at most
    ``FAST_ROW_BYTES`` are read by the fast pass alone (``_fast_rows``): rows of at most
    a sub-block ``SLICE_BLOCK`` at a time, longer ones ``FAST_BATCH_BYTES`` (or four
    rows) at a time, so that a row it lists is still in cache when it is taken again;
    only those it lists go through ``_row`` after it, in order. A long row read in one
    pass rather than in sub-blocks keeps the hardware prefetchers on it: rows of 1e4
    float64, 0.67 -> 0.52 ns a value (one thread, from memory). Longer rows (and a block
    of one row, as a plain scan's: a dirty value would take it all again) go through
    ``_row`` in sub-blocks."""
    row_bytes = n * xf.itemsize
    if not (row_bytes <= FAST_ROW_BYTES and rows > 1):
        for r in range(r0, r1):
            _row(xf, xuf, n, r, np.bool_(False), lim, thr, counts, cnt, want, rstats, ro, rcounts, locs, vals, nlocs)  # fmt: skip
        return
    short = row_bytes <= SUB_BLOCK_BYTES  # a long row listed: straight to its sub-blocks
    batch = SLICE_BLOCK if short else max(4, FAST_BATCH_BYTES // row_bytes)
    for b0 in range(r0, r1, batch):
        b1 = min(b0 + batch, r1)
        for j in range(_fast_rows(xf, xuf, n, b0, b1, lim, rstats, ro, todo)):
            _row(xf, xuf, n, todo[j], short, lim, thr, counts, cnt, want, rstats, ro, rcounts, locs, vals, nlocs)  # fmt: skip


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _fast_rows(xf, xuf, n, r0, r1, lim, rstats, ro, todo):
    """The fast pass (``_pass``) over each row of ``r0:r1``, four rows at a time
    (``_pass_none4``): row ``i`` of each quarter of the batch side by side, so that each
    quarter is read in order; the last rows (at most three) of a batch not divisible by
    four alone, each in halves (``_pass_halves``). Each row's statistics are written as
    a clean row's, with no branch but the loop's: the rows whose pass shows a non-finite
    value, a cast risk or an underflow are listed in order in ``todo`` (their number
    returned), for ``_row`` to take again. Rows of at most ``PREFETCH_ROW_BYTES`` are
    asked for (``_prefetch_run``) about ``PREFETCH_AHEAD`` bytes before they are read.
    Under ``_FLAGS``: the passes inlined here take its flags, and need them to run in
    vectors."""
    ntiny = lim[3]
    q = (r1 - r0) // 4
    m0, m1, m2, m3 = 0, 0, 0, 0
    row_bytes = n * xf.itemsize
    ahead = (max(1, PREFETCH_AHEAD // row_bytes) if row_bytes <= PREFETCH_ROW_BYTES else 0) * n
    for ra in range(r0, r0 + q):
        rs = (ra, ra + q, ra + 2 * q, ra + 3 * q)
        o = (ra * n, (ra + q) * n, (ra + 2 * q) * n, (ra + 3 * q) * n)
        if ahead:
            for j in range(4):
                _prefetch_run(xf, o[j] + ahead, n)
        k = (xf[o[0]], xf[o[1]], xf[o[2]], xf[o[3]])  # a non-finite shift: the row is listed
        if ntiny == 0:
            p = _pass_none4(xf, xuf, o, n, k, lim)
        elif ntiny == 1:
            p = _pass_one4(xf, xuf, o, n, k, lim)
        else:
            p = (
                _pass_many(xf, xuf, o[0], n, k[0], lim), _pass_many(xf, xuf, o[1], n, k[1], lim),
                _pass_many(xf, xuf, o[2], n, k[2], lim), _pass_many(xf, xuf, o[3], n, k[3], lim),
            )  # fmt: skip
        m0 += _fast_row(p[0], rs[0], k[0], lim, rstats, ro, todo, m0)
        m1 += _fast_row(p[1], rs[1], k[1], lim, rstats, ro, todo, q + m1)
        m2 += _fast_row(p[2], rs[2], k[2], lim, rstats, ro, todo, 2 * q + m2)
        m3 += _fast_row(p[3], rs[3], k[3], lim, rstats, ro, todo, 3 * q + m3)
    m = m0
    for start, listed in ((q, m1), (2 * q, m2), (3 * q, m3)):  # each quarter's after the last
        for j in range(listed):
            todo[m + j] = todo[start + j]
        m += listed
    for r in range(r0 + 4 * q, r1):
        off = r * n
        m += _fast_row(_pass_halves(xf, xuf, off, n, xf[off], lim), r, xf[off], lim, rstats, ro, todo, m)  # fmt: skip
    return m


@njit(nogil=True, cache=_CACHE)
def _fast_row(res, r, k, lim, rstats, ro, todo, at):
    """Row ``r``'s pass results ``res`` (shift ``k``) written as a clean row's, and the row
    written in ``todo[at]``; returns whether it is listed there (whether they show
    something to report)."""
    smn, smx, under, a1, a2 = res
    c = r - ro
    rstats[0, c] = np.float64(k)
    rstats[1, c] = a1
    rstats[2, c] = a2
    rstats[3, c] = np.float64(smn)
    rstats[4, c] = np.float64(smx)
    u = under[0] | under[1] | under[2] | under[3] | under[4]
    todo[at] = r
    return (u != 0) | (not _plain(smn, smx, a1, lim))


@njit(nogil=True, cache=_CACHE)
def _row(xf, xuf, n, r, listed, lim, thr, counts, cnt, want, rstats, ro, rcounts, locs, vals, nlocs):  # fmt: skip
    """Row ``r`` of ``_rows``: of a short row ``_fast_rows`` listed (``listed``), the fast
    pass again when it proves the row clean (its underflows counted: ``_counted``), else
    the row in sub-blocks, each with its slow path when it has something to report."""
    T = xf.dtype.type
    sub = SUB_BLOCK_BYTES // xf.itemsize
    off = r * n
    k = xf[off]
    if listed and (k - k) == 0:  # rare, so not inlined
        smn, smx, under, a1, a2 = _pass(xf, xuf, off, n, k, lim)
        if _plain(smn, smx, a1, lim) and _counted(under, counts, nlocs, locs.shape[1]):
            _row_stats(rstats, r - ro, k, a1, a2, smn, smx, np.bool_(True))
            return  # else the row is taken again below, as a long row's sub-block
    # Shift by a finite value of the row: sums of (y - k) stay small for data with a
    # large offset, and the cancellation error is at most eps * n relative to M2.
    first = _first_finite(xf, off, n)
    k = xf[off + first] if first < n else T(0)
    s1 = 0.0
    s2 = 0.0
    mn = T(np.inf)
    mx = T(-np.inf)
    for s in range(off, off + n, sub):
        e = min(s + sub, off + n)
        smn, smx, a1, a2 = _sub_block(
            xf, xuf, s, e, _ZERO, k, r, lim, thr, counts, cnt, want, locs, vals, nlocs, rcounts
        )
        s1 += a1
        s2 += a2
        mn = min(mn, smn)
        mx = max(mx, smx)
    _row_stats(rstats, r - ro, k, s1, s2, mn, mx, first < n)


@njit(nogil=True, cache=_CACHE)
def _first_finite(x, off, n):
    """The first ``i < n`` with ``x[off + i]`` finite, else ``n``: blocks of 256 values
    counted in vectors first (a row of NaN, as a chunk never written reads, is otherwise
    a scalar loop over all of it)."""
    if n == 0 or (x[off] - x[off]) == 0:  # mostly: no pass for a row whose first is finite
        return 0
    first = 0
    while first < n:
        m = min(256, n - first)
        if _finite_count(x[off + first : off + first + m]):
            break
        first += m
    while first < n and not (x[off + first] - x[off + first]) == 0:
        first += 1
    return first


@njit(nogil=True, cache=_CACHE)
def _sub_block(x, xu, s, e, base, k, r, lim, thr, counts, cnt, want, locs, vals, nlocs, rcounts):
    """``x[s:e]``, a sub-block of row ``r``: the fast pass, and the slow one when it shows
    something to report (positions ``base + i``). Returns ``(min, max, s1, s2)``."""
    smn, smx, under, a1, a2 = _pass_halves(x, xu, s, e - s, k, lim)
    if _plain(smn, smx, a1, lim):
        if not _counted(under, counts, nlocs, locs.shape[1]):
            _under_positions(x, xu, s, e, base, lim, under, counts, locs, vals, nlocs)
        return smn, smx, a1, a2
    if x[s] != x[s] and _nan_count(x[s:e]) == e - s:  # nothing but NaN: never written
        _nan_run(x, s, e, base, r, counts, locs, vals, nlocs, rcounts)
        return k, k, 0.0, 0.0  # what _pieces gives when no value is finite
    return _pieces(x, xu, s, e, base, k, r, lim, thr, counts, cnt, want, locs, vals, nlocs, rcounts)


@njit(nogil=True, cache=_CACHE)
def _nan_count(x):
    """The NaNs of ``x`` (in vectors: a view, its loop from 0)."""
    c = 0
    for i in range(x.shape[0]):
        v = x[i]
        c += v != v
    return c


@njit(nogil=True, cache=_CACHE)
def _nan_run(x, s, e, base, r, counts, locs, vals, nlocs, rcounts):
    """``_pieces``'s counts and positions for ``x[s:e]`` of row ``r`` when every value is
    NaN, without its passes: each value a NaN, the first positions ``base + i`` recorded
    up to the cap."""
    n = e - s
    counts[NAN] += n
    rcounts[0, r] += n
    for i in range(s, min(e, s + locs.shape[1] - nlocs[NAN])):
        locs[NAN, nlocs[NAN]] = base + i
        vals[NAN, nlocs[NAN]] = x[i]
        nlocs[NAN] += 1


@njit(nogil=True, cache=_CACHE)
def _row_stats(rstats, r, k, s1, s2, mn, mx, any_finite):
    rstats[0, r] = np.float64(k)
    rstats[1, r] = s1
    rstats[2, r] = s2
    rstats[3, r] = np.float64(mn) if any_finite else np.inf
    rstats[4, r] = np.float64(mx) if any_finite else -np.inf


@njit(nogil=True, cache=_CACHE)
def _widen(src, lut, s, e, out, outu):
    """``src[s:e]``, bfloat16 or float8 bits, as float32 values in ``out[:e - s]``
    (``outu``: the same memory as uint32): bfloat16 is float32's top half; a float8
    value is looked up in ``lut``, its 256 values. Unsigned indices, as in ``_pass``."""
    n = np.uint64(e - s)
    s = np.uint64(s)
    if lut.shape[0] == 0:
        for i in range(n):
            outu[i] = np.uint32(src[s + i]) << np.uint32(16)
    else:
        for i in range(n):
            out[i] = lut[src[s + i]]


@njit(nogil=True, cache=_CACHE)
def scan_rows_narrow(src, lut, thr, counts, rstats, rcounts, locs, vals, nlocs):
    """``scan_rows`` over bfloat16 or float8 data: ``src``, a C-contiguous 2-D array of
    its bits (uint16 or uint8), read once at its own width. The fast pass widens each value
    as it reads it (``_load``; ``lut``: float8's table); a sub-block with something to
    report is widened into a buffer that stays in cache for the slow path (``_widen``).
    Outputs as ``scan_rows``'s, positions flat indices into ``src``."""
    rows, n = src.shape
    cnt = np.zeros(N_KINDS, dtype=np.int64)
    want = np.zeros(N_KINDS, dtype=np.bool_)
    srcf = src.reshape(src.size)
    cap = locs.shape[1]
    sub = SUB_BLOCK_BYTES // 4
    buf = np.empty(sub, np.float32)
    bufu = buf.view(np.uint32)
    lim = _bounds(buf, bufu, thr)
    for r in range(rows):
        off = r * n
        first = off
        k = np.float32(0)
        while first < off + n:  # the shift: the row's first finite value
            _widen(srcf, lut, first, first + 1, buf, bufu)
            if (buf[0] - buf[0]) == 0:
                k = buf[0]
                break
            first += 1
        s1 = 0.0
        s2 = 0.0
        mn = np.float32(np.inf)
        mx = np.float32(-np.inf)
        for s in range(off, off + n, sub):
            e = min(s + sub, off + n)
            smn, smx, under, a1, a2 = _pass(srcf, lut, s, e - s, k, lim)
            if _plain(smn, smx, a1, lim):
                if not _counted(under, counts, nlocs, cap):
                    _under_positions(srcf, lut, s, e, _ZERO, lim, under, counts, locs, vals, nlocs)
            else:
                _widen(srcf, lut, s, e, buf, bufu)  # the slow path, on float32 values
                smn, smx, a1, a2 = _pieces(
                    buf, bufu, _ZERO, e - s, s, k, r, lim, thr, counts, cnt, want, locs, vals,
                    nlocs, rcounts,
                )  # fmt: skip
            s1 += a1
            s2 += a2
            mn = min(mn, smn)
            mx = max(mx, smx)
        _row_stats(rstats, r, k, s1, s2, mn, mx, first < off + n)


@njit(nogil=True, cache=_CACHE)
def scaled_counts(x, lim, counts, locs, nlocs):
    """A scaled cast's risks over ``x`` (float32 or float64, flat), on ``f = |float32(v)|``
    against ``lim``, float32 ``(over, under, normal)`` such that the scaled value ``f *
    scale`` (in float32) overflows when ``f >= over``, flushes to zero when ``f <= under``
    and is subnormal below ``normal`` (``scaled.limits_of``: the product is monotone in
    ``f``). Adds ``(overflow, underflow, subnormal, nonzero)`` to ``counts`` over finite
    non-zero values, and records the first positions of overflows (row 0 of ``locs``) and
    underflows (row 1). Runs of ``RUN`` values are counted branch-free and taken again for
    positions only when they hold some that are still wanted."""
    over, under, normal = lim[0], lim[1], lim[2]
    cap = locs.shape[1]
    n = x.shape[0]
    for c in range(0, n, RUN):
        e = min(c + RUN, n)
        co = 0
        cu = 0
        cs = 0
        cn = 0
        for i in range(c, e):
            v = x[i]
            f = abs(np.float32(v))
            nz = ((v - v) == 0) & (v != 0)
            o = f >= over
            co += nz & o
            cu += nz & ~o & (f <= under)
            cs += nz & ~o & (f > under) & (f < normal)
            cn += nz
        counts[0] += co
        counts[1] += cu
        counts[2] += cs
        counts[3] += cn
        if (co > 0 and nlocs[0] < cap) or (cu > 0 and nlocs[1] < cap):
            for i in range(c, e):
                v = x[i]
                f = abs(np.float32(v))
                if (v - v) == 0 and v != 0:
                    row = 0 if f >= over else (1 if f <= under else -1)
                    if row >= 0 and nlocs[row] < cap:
                        locs[row, nlocs[row]] = i
                        nlocs[row] += 1


@njit(nogil=True, cache=_CACHE)
def fold_part(offset, pc, pl, pv, pn, counts, locs, vals, nlocs):
    """Fold the counts ``pc`` and positions ``pl``/``pv``/``pn`` that ``scan_rows`` gave for
    a part of a block starting at flat position ``offset`` into the block's (parts in
    order: positions are taken up to the cap). Returns the part's number of findings."""
    cap = locs.shape[1]
    found = 0
    for kind in range(N_KINDS):
        found += pc[kind]
        counts[kind] += pc[kind]
        for j in range(pn[kind]):
            if nlocs[kind] < cap:
                locs[kind, nlocs[kind]] = offset + pl[kind, j]
                vals[kind, nlocs[kind]] = pv[kind, j]
                nlocs[kind] += 1
    return found


@njit(nogil=True, cache=_CACHE, fastmath={"contract"})
def _col_update(row, k, s1, s2, mn, mx):
    """Add a row of finite values to per-column shifted sums and extrema (the operations of
    ``_col_update4`` for one row: no reassociation, so either gives the same bits)."""
    for j in range(row.shape[0]):
        u = row[j]
        v = np.float64(u)
        d = v - k[j]
        s1[j] += d
        s2[j] += d * d
        mn[j] = u if u < mn[j] else mn[j]
        mx[j] = u if u > mx[j] else mx[j]


@njit(nogil=True, cache=_CACHE, fastmath={"contract"})
def _col_update4(xf, off, cols, k, s1, s2, mn, mx):
    """``_col_update`` of four rows of finite values, in row order: the accumulators are
    read and written once for the four. The rows start at ``off`` in the flat block,
    ``cols`` apart: offsets into one 1-D array load as vectors (a 2-D array's rows would be
    gathered, and a view per row costs reference counts)."""
    o0 = np.uint64(off)
    o1 = o0 + np.uint64(cols)
    o2 = o1 + np.uint64(cols)
    o3 = o2 + np.uint64(cols)
    for j in range(np.uint64(k.shape[0])):  # unsigned: no negative-index wraparound
        kj = k[j]
        u0 = xf[o0 + j]
        u1 = xf[o1 + j]
        u2 = xf[o2 + j]
        u3 = xf[o3 + j]
        v0 = np.float64(u0)
        v1 = np.float64(u1)
        v2 = np.float64(u2)
        v3 = np.float64(u3)
        a1 = s1[j]
        a2 = s2[j]
        d = v0 - kj
        a1 += d
        a2 += d * d
        d = v1 - kj
        a1 += d
        a2 += d * d
        d = v2 - kj
        a1 += d
        a2 += d * d
        d = v3 - kj
        a1 += d
        a2 += d * d
        s1[j] = a1
        s2[j] = a2
        lo = mn[j]
        lo = u0 if u0 < lo else lo
        lo = u1 if u1 < lo else lo
        lo = u2 if u2 < lo else lo
        lo = u3 if u3 < lo else lo
        mn[j] = lo
        hi = mx[j]
        hi = u0 if u0 > hi else hi
        hi = u1 if u1 > hi else hi
        hi = u2 if u2 > hi else hi
        hi = u3 if u3 > hi else hi
        mx[j] = hi


@njit(nogil=True, cache=_CACHE, fastmath={"contract"})
def _col_update8(xf, off, cols, k, s1, s2, mn, mx):
    """``_col_update4`` of eight rows: for wide tiles, whose accumulators then cost half
    the loads and stores (the same operations in the same order: the same bits)."""
    o0 = np.uint64(off)
    o1 = o0 + np.uint64(cols)
    o2 = o1 + np.uint64(cols)
    o3 = o2 + np.uint64(cols)
    o4 = o3 + np.uint64(cols)
    o5 = o4 + np.uint64(cols)
    o6 = o5 + np.uint64(cols)
    o7 = o6 + np.uint64(cols)
    for j in range(np.uint64(k.shape[0])):
        kj = k[j]
        u0 = xf[o0 + j]
        u1 = xf[o1 + j]
        u2 = xf[o2 + j]
        u3 = xf[o3 + j]
        u4 = xf[o4 + j]
        u5 = xf[o5 + j]
        u6 = xf[o6 + j]
        u7 = xf[o7 + j]
        v0 = np.float64(u0)
        v1 = np.float64(u1)
        v2 = np.float64(u2)
        v3 = np.float64(u3)
        v4 = np.float64(u4)
        v5 = np.float64(u5)
        v6 = np.float64(u6)
        v7 = np.float64(u7)
        a1 = s1[j]
        a2 = s2[j]
        d = v0 - kj
        a1 += d
        a2 += d * d
        d = v1 - kj
        a1 += d
        a2 += d * d
        d = v2 - kj
        a1 += d
        a2 += d * d
        d = v3 - kj
        a1 += d
        a2 += d * d
        d = v4 - kj
        a1 += d
        a2 += d * d
        d = v5 - kj
        a1 += d
        a2 += d * d
        d = v6 - kj
        a1 += d
        a2 += d * d
        d = v7 - kj
        a1 += d
        a2 += d * d
        s1[j] = a1
        s2[j] = a2
        lo = mn[j]
        lo = u0 if u0 < lo else lo
        lo = u1 if u1 < lo else lo
        lo = u2 if u2 < lo else lo
        lo = u3 if u3 < lo else lo
        lo = u4 if u4 < lo else lo
        lo = u5 if u5 < lo else lo
        lo = u6 if u6 < lo else lo
        lo = u7 if u7 < lo else lo
        mn[j] = lo
        hi = mx[j]
        hi = u0 if u0 > hi else hi
        hi = u1 if u1 > hi else hi
        hi = u2 if u2 > hi else hi
        hi = u3 if u3 > hi else hi
        hi = u4 if u4 > hi else hi
        hi = u5 if u5 > hi else hi
        hi = u6 if u6 > hi else hi
        hi = u7 if u7 > hi else hi
        mx[j] = hi


@njit(nogil=True, cache=_CACHE)
def _rows_plain(xi, pitch, cols, r, n, c0, c1, big, inf_bits, lo, hi, tiny_bits, tiny):
    """Whether rows ``r`` to ``r + n - 1`` (columns ``c0:c1``) of a block whose rows start
    ``pitch`` values apart in the 1-D ``xi`` are clean and risk no cast: their keys in one
    pass when the rows are whole and side by side (one contiguous span)."""
    if c0 == 0 and c1 == cols and pitch == cols:
        return _span_plain(xi[r * cols : (r + n) * cols], big, inf_bits, lo, hi, tiny_bits, tiny)
    for i in range(r, r + n):
        o = i * pitch
        if not _span_plain(xi[o + c0 : o + c1], big, inf_bits, lo, hi, tiny_bits, tiny):
            return False
    return True


@njit(nogil=True, cache=_CACHE)
def _span_plain(xi, big, inf_bits, lo, hi, tiny_bits, tiny):
    if tiny:
        smn, smx, smz = _keys_tiny(xi, big)
    else:
        smn, smx = _keys(xi, big)
        smz = big
    return _clean(smn, smx, inf_bits) and not _risky(smn, smx, smz, lo, hi, tiny_bits)


@njit(nogil=True, cache=_CACHE, fastmath={"contract"})
def _col_update_finite(x, o, a, b, k, s1, s2, mn, mx, cnan, cpos, cneg):
    """``_col_update`` for columns ``a:b`` of a row holding NaN or inf (``x[o + j]`` is
    column ``j``'s value: offsets, not a view, for runs of one column): those are counted
    per column instead. Its finite values are added by ``_col_update``'s operations (the
    square fused into the sum): a column's sums do not depend on what the other columns of
    its rows hold."""
    for j in range(a, b):
        v = x[o + j]
        if (v - v) == 0:
            w = np.float64(v)
            d = w - k[j]
            s1[j] += d
            s2[j] += d * d
            mn[j] = min(mn[j], v)
            mx[j] = max(mx[j], v)
        elif v != v:
            cnan[j] += 1
        elif v > 0:
            cpos[j] += 1
        else:
            cneg[j] += 1


@njit(nogil=True, cache=_CACHE)
def scan_cols(x, xi, thr, counts, cstats, ccounts, locs, vals, nlocs):
    """Scan a C-contiguous 2-D block in one pass, keeping statistics per column.

    Like ``scan_rows`` with the slices along the columns: each row is checked with the fast
    integer loop, then added to per-column accumulators (a vectorized map, not a
    reduction). ``cstats`` (5, cols) and ``ccounts`` (3, cols) as in ``scan_rows``.
    """
    rows, cols = x.shape
    scan_cols_pitched(
        x.reshape(x.size), xi.reshape(xi.size), rows, cols, cols, thr, counts, cstats, ccounts,
        locs, vals, nlocs,
    )  # fmt: skip


@njit(nogil=True, cache=_CACHE)
def scan_cols_pitched(xf, xi, rows, cols, pitch, thr, counts, cstats, ccounts, locs, vals, nlocs):
    """``scan_cols`` of a block read in place: ``rows`` rows of ``cols`` values, row ``r``
    at ``xf[r * pitch : r * pitch + cols]`` (``xi``: the same memory as integers), as a
    region of an array whose slice axis is innermost in memory is (``blocks.Block``).
    Positions are flat indices of the ``(rows, cols)`` block, as ``scan_cols``'s.

    Wide tiles add ``wide_chunk`` rows at a time (the last chunk with the rows after it,
    fewer than eight: ``_col_rest``) before checking them (``_added_clean``): the rows are
    then read once, not checked and read again. A chunk that was not clean is
    taken again from the accumulators saved before it, each row checked first; after such
    a chunk, the next ones are checked first too, twice as many after each (data with a NaN
    in every chunk is not added twice). Each chunk is checked on the extrema it added
    (``_fold_extrema``); a tile whose sums are no longer finite (squares that overflowed)
    checks the rest of its rows first. Contiguous rows shorter than ``FOLD_VALUES`` are
    taken side by side, several as one wide row, and folded into their columns after
    (``scan_cols``'s blocks of short rows)."""
    fold = _fold(rows, cols, pitch)
    if fold == 1:  # each tile takes its own columns' shifts
        _scan_tiles(
            xf, xi, rows, cols, pitch, _ZERO, thr, counts, *_each_row(cstats, ccounts), locs,
            vals, nlocs, None, True,
        )  # fmt: skip
        return
    k = cstats[0]
    _col_shifts(xf, rows, cols, pitch, k)
    folded = rows // fold
    # short rows side by side in memory: ``fold`` of them are one row of a wide tile (the
    # same column's shift in each of its places), folded into the columns afterwards
    width = fold * cols
    wstats = np.empty((5, width))
    wcounts = np.zeros((3, width), np.int64)
    for q in range(fold):
        wstats[0, q * cols : (q + 1) * cols] = k
    _scan_tiles(
        xf, xi, folded, width, width, _ZERO, thr, counts, *_each_row(wstats, wcounts), locs,
        vals, nlocs, None, False,
    )  # fmt: skip
    start = folded * fold * cols  # the rows left over, after the folded ones
    _scan_tiles(
        xf[start:], xi[start:], rows - folded * fold, cols, cols, start, thr, counts,
        *_each_row(cstats, ccounts), locs, vals, nlocs, None, False,
    )  # fmt: skip
    for q in range(fold):
        at = q * cols
        for j in range(cols):
            cstats[1, j] += wstats[1, at + j]
            cstats[2, j] += wstats[2, at + j]
            cstats[3, j] = min(cstats[3, j], wstats[3, at + j])
            cstats[4, j] = max(cstats[4, j], wstats[4, at + j])
            for c in range(3):
                ccounts[c, j] += wcounts[c, at + j]


@njit(nogil=True, cache=_CACHE)
def _each_row(cstats, ccounts):
    """The rows of ``cstats`` (5) and ``ccounts`` (3), as ``_scan_tiles`` takes them."""
    return (
        cstats[0], cstats[1], cstats[2], cstats[3], cstats[4], ccounts[0], ccounts[1], ccounts[2]
    )  # fmt: skip


@njit(nogil=True, cache=_CACHE)
def _col_shifts(xf, rows, cols, pitch, k):
    """Each column's shift ``k``: its first finite value (0 when it has none). The first
    row in vectors; the rows after it only for the columns still without one, row by row
    (a region of NaN, as a chunk never written reads, is then read in memory order: down
    each column it cost a cache miss a value)."""
    if rows == 0:
        k[:] = 0.0
        return
    missing = 0
    for j in range(cols):
        v = xf[j]
        finite = (v - v) == 0
        k[j] = v if finite else 0.0
        missing += np.int64(not finite)
    if missing == 0:
        return
    todo = np.empty(missing, np.int64)  # the columns still without a finite value, in order
    m = 0
    for j in range(cols):
        if not (xf[j] - xf[j]) == 0:
            todo[m] = j
            m += 1
    r = 1
    while m > 0 and r < rows:
        o = r * pitch
        r += 1
        if m == cols and _finite_count(xf[o : o + cols]) == 0:  # a row of nothing but NaN or inf
            continue
        left = 0
        for i in range(m):
            j = todo[i]
            v = xf[o + j]
            if (v - v) == 0:
                k[j] = v
            else:
                todo[left] = j
                left += 1
        m = left


@njit(nogil=True, cache=_CACHE)
def _finite_count(x):
    """The finite values of ``x`` (in vectors: a view, its loop from 0)."""
    c = 0
    for i in range(x.shape[0]):
        v = x[i]
        c += (v - v) == 0
    return c


@njit(nogil=True, cache=_CACHE)
def _fold(rows, cols, pitch):
    """How many short contiguous rows ``scan_cols_pitched`` takes side by side as one (1:
    none; at least eight such wide rows, else the rows are taken as they are)."""
    fold = FOLD_VALUES // cols + 1 if pitch == cols and cols < FOLD_VALUES else 1
    return fold if fold > 1 and rows // fold >= 8 else 1


@njit(nogil=True, cache=_CACHE)
def scan_cols_finished(
    x, xi, thr, counts, z, mn, mx, ccounts, cnan, cpos, cneg, locs, vals, nlocs,
    n, mean, std, eps, z_threshold, thresholds, where, flags,
):  # fmt: skip
    """``scan_cols_pitched_finished`` of a C-contiguous 2-D block (``scan_cols``'s)."""
    rows, cols = x.shape
    return scan_cols_pitched_finished(
        x.reshape(x.size), xi.reshape(xi.size), rows, cols, cols, thr, counts, z, mn, mx,
        ccounts, cnan, cpos, cneg, locs, vals, nlocs, n, mean, std, eps, z_threshold,
        thresholds, where, flags,
    )  # fmt: skip


@njit(nogil=True, cache=_CACHE)
def scan_cols_pitched_finished(
    xf, xi, rows, cols, pitch, thr, counts, z, mn, mx, ccounts, cnan, cpos, cneg, locs, vals,
    nlocs, n, mean, std, eps, z_threshold, thresholds, where, flags,
):  # fmt: skip
    """``scan_cols_pitched`` on columns that are whole slices (nothing else will be merged
    into them), then ``finish_whole_slices`` on its outputs: each tile of columns finished
    right after it is read, ``SLICE_BLOCK`` columns at a time (``COL_TILE`` is a multiple of
    it: the blocks of ``finish_whole_slices``, the same bits), its sums in cache and never
    written out. As ``scan_rows_finished``, of the stats only the extrema (``mn``, ``mx``)
    are kept, and the largest |z| in ``z`` (each tile takes its own shifts);
    ``cnan``, ``cpos``, ``cneg``: the rows of ``ccounts``, each passed on its own so
    that it is contiguous (a canvas's 2-D views are not: the loops over them would not run
    in vectors). Returns ``finish_whole_slices``'s results."""
    if _fold(rows, cols, pitch) > 1:  # short rows, folded into their columns after the scan
        local = np.empty((5, cols))
        scan_cols_pitched(xf, xi, rows, cols, pitch, thr, counts, local, ccounts, locs, vals, nlocs)
        mn[:] = local[3]
        mx[:] = local[4]
        return _finish(
            rows, local[0], local[1], local[2], mn, mx, cnan, cpos, cneg, n, mean, std, True,
            z, eps, z_threshold, thresholds, where, flags,
        )  # fmt: skip
    fin = (n, mean, std, eps, z_threshold, thresholds, where, flags)
    unused = np.empty(0)  # the sums: kept in the tiles, never written out
    acc = _scan_tiles(
        xf, xi, rows, cols, pitch, _ZERO, thr, counts, z, unused, unused, mn, mx, cnan, cpos,
        cneg, locs, vals, nlocs, fin, True,
    )  # fmt: skip
    return acc[:9]


@njit(nogil=True, cache=_CACHE)
def _scan_tiles(
    xf, xi, rows, cols, pitch, base, thr, counts, k, s1, s2, mn, mx, cnan, cpos, cneg, locs,
    vals, nlocs, fin, own,
):  # fmt: skip
    """The body of ``scan_cols_pitched``, tile by tile, its outputs the rows of ``cstats``
    and ``ccounts`` each on its own; positions are ``base`` plus the flat index in the
    ``(rows, cols)`` block. The shifts ``k``: with ``own``, each tile takes its columns'
    own (``_col_shifts``, while their first row is in cache) and writes them in ``k``, else
    they are given. With ``fin`` (``scan_cols_finished``'s finishing arguments, else None)
    each tile is finished instead of its sums written out (``s1``, ``s2`` unused; ``k``
    then takes the largest |z|); returns the totals ``_finish_block`` carries."""
    work = _work(xf, xi, thr)
    over, under = _limits(thr)
    tiny = work[7]
    # a tile's accumulators in contiguous scratch: they stay in cache, and the updates are
    # vectors whatever the layout of ``cstats`` (a canvas's rows are strided views); the
    # extrema and smallest magnitudes in the data's own type (float32 halves their vectors'
    # work; exact: a float32 converts to float64 without rounding)
    scratch = np.empty((5, min(COL_TILE, cols)))
    ext = np.empty((5, min(COL_TILE, cols)), xf.dtype)
    runs = np.empty((2, min(COL_TILE, cols)), np.int64)  # a chunk's runs of dirty columns
    acc = _finish_start()
    fails = 0
    skip = 0
    for c0 in range(0, cols, COL_TILE):
        c1 = min(c0 + COL_TILE, cols)
        w = c1 - c0
        # 1-D rows of a C array, each contiguous (a 2-D slice's rows would not be known so)
        kt, s1t, s2t = scratch[0, :w], scratch[1, :w], scratch[2, :w]
        mnt, mxt, mzt = ext[0, :w], ext[1, :w], ext[2, :w]
        if own:
            _col_shifts(xf[c0:], rows, w, pitch, kt)
        else:
            kt[:] = k[c0:c1]
        _tile_start(scratch, ext, _ZERO, w)
        tainted = False  # the tile's sums are not finite: the check after a chunk would fail
        tnan, tpos, tneg = cnan[c0:c1], cpos[c0:c1], cneg[c0:c1]
        # rows added four or, in wide tiles, eight at a time; checked in groups (more of
        # them for short rows)
        step = 8 if w >= WIDE_TILE else 4
        group = step * max(1, GROUP_VALUES // (step * w)) if w == cols else step
        chunk = wide_chunk(w) if step == 8 else rows
        r = _ZERO
        while r < rows:
            n = min(chunk, (rows - r) // step * step)
            stop = r + n if n > 0 else rows
            if step == 8 and n > 0 and rows - stop < 8:  # the last rows join the last chunk
                stop = rows
            if step == 8 and n > 0 and skip == 0 and not tainted:
                fresh = r == 0  # the tile as it starts: nothing to save, fold or take back
                if not fresh:
                    _keep_tile(scratch, ext, _ZERO, w, False)
                    _extrema_start(ext, _ZERO, w)
                for q in range(r, r + n, 8):
                    if tiny:
                        _col_update8_tiny(xf, q * pitch + c0, pitch, kt, s1t, s2t, mnt, mxt, mzt)
                    else:
                        _col_update8(xf, q * pitch + c0, pitch, kt, s1t, s2t, mnt, mxt)
                if stop > r + n:
                    _col_rest(xf, (r + n) * pitch + c0, pitch, stop - r - n, kt, s1t, s2t, mnt, mxt, mzt, tiny)  # fmt: skip
                if _added_clean(s1t, s2t, mnt, mxt, mzt, over, under, tiny):
                    if not fresh:
                        _fold_extrema(ext, w)
                    fails = max(fails - 1, 0)
                    r = stop
                    continue
                # only the runs of columns that are not clean are taken again, checked:
                # the others hold nothing to report, and keep their sums
                m, width = _dirty_runs(s1t, s2t, mnt, mxt, mzt, over, under, tiny, runs)
                for i in range(m):
                    if fresh:
                        _tile_start(scratch, ext, runs[0, i], runs[1, i])
                    else:
                        _keep_tile(scratch, ext, runs[0, i], runs[1, i], True)
                if width * NARROW_SPAN > w:  # a wide one costs a second pass: back off
                    fails += 1
                    skip = (1 << min(fails, 20)) - 1
                if m == 1:
                    a, b = runs[0, 0], runs[1, 0]
                    _rows_checked(
                        xf, xi, pitch, cols, base, r, stop, c0 + a, step, group, kt[a:b],
                        s1t[a:b], s2t[a:b], mnt[a:b], mxt[a:b], tnan[a:b], tpos[a:b],
                        tneg[a:b], work, thr, counts, locs, vals, nlocs,
                    )  # fmt: skip
                else:
                    _runs_checked(
                        xf, xi, pitch, cols, base, r, stop, c0, runs, m, kt, s1t, s2t, mnt,
                        mxt, tnan, tpos, tneg, work, thr, counts, locs, vals, nlocs,
                    )  # fmt: skip
                if not fresh:
                    _fold_extrema(ext, w)
                tainted = not _sums_clean(s1t, s2t)
                r = stop
                continue
            elif step == 8 and n > 0 and not tainted:
                skip -= 1
            _rows_checked(
                xf, xi, pitch, cols, base, r, stop, c0, step, group, kt, s1t, s2t, mnt,
                mxt, tnan, tpos, tneg, work, thr, counts, locs, vals, nlocs,
            )  # fmt: skip
            tainted = step == 8 and not _sums_clean(s1t, s2t)
            r = stop
        mn[c0:c1] = mnt
        mx[c0:c1] = mxt
        if fin is None:
            if own:
                k[c0:c1] = kt
            s1[c0:c1] = s1t
            s2[c0:c1] = s2t
            continue
        cnt, mean, std, eps, z_threshold, thresholds, where, flags = fin
        for b0 in range(c0, c1, SLICE_BLOCK):  # the shifts are copies: z over their row
            b1 = min(b0 + SLICE_BLOCK, c1)
            b, t = slice(b0, b1), slice(b0 - c0, b1 - c0)
            acc = _finish_block(
                rows, kt[t], s1t[t], s2t[t], mn[b], mx[b], cnan[b], cpos[b], cneg[b],
                cnt[b], mean[b], std[b], b0, True, k[b], eps, z_threshold, thresholds, where,
                flags, acc,
            )  # fmt: skip
    return acc


@njit(nogil=True, cache=_CACHE)
def wide_chunk(w):
    """Rows a wide tile of ``w`` columns adds before it checks them (``_scan_tiles``): a
    multiple of eight, ``CHUNK_VALUES`` values and at least ``CHUNK_ROWS`` rows (saving and
    checking the tile's sums costs about as much as adding a row to them, per row saved)."""
    return 8 * max(CHUNK_ROWS // 8, CHUNK_VALUES // (8 * w))


@njit(nogil=True, cache=_CACHE)
def _tile_start(scratch, ext, a, b):
    """A tile's columns ``a:b`` as they start, nothing added: zero sums (``scratch`` rows
    1-2), extrema and smallest magnitudes from infinities (``ext`` rows 0-2)."""
    scratch[1, a:b] = 0.0
    scratch[2, a:b] = 0.0
    _extrema_start(ext, a, b)


@njit(nogil=True, cache=_CACHE)
def _extrema_start(ext, a, b):
    """The extrema and smallest magnitudes (``ext`` rows 0-2) of a wide tile's columns
    ``a:b`` from nothing: as a tile starts, and as each chunk after its first does, so that
    the chunk is checked on what it adds alone (``_fold_extrema``)."""
    inf = ext.dtype.type(np.inf)
    ext[0, a:b] = inf
    ext[1, a:b] = -inf
    ext[2, a:b] = inf


@njit(nogil=True, cache=_CACHE)
def _col_rest(xf, off, cols, n, k, s1, s2, mn, mx, mz, tiny):
    """The last ``n < 8`` rows of a chunk of a wide tile, added before they are checked as
    ``_rows_checked`` adds them once checked (four at once, then one by one: the same
    bits), and with ``tiny`` their smallest non-zero magnitudes taken into ``mz``. Checked
    before they were added, the last four rows of a tile of 100 cost as much as ten added."""
    w = k.shape[0]
    q = 0
    if n >= 4:
        _col_update4(xf, off, cols, k, s1, s2, mn, mx)
        q = 4
    for i in range(q, n):
        o = off + i * cols
        _col_update(xf[o : o + w], k, s1, s2, mn, mx)
    if tiny:
        for i in range(n):
            o = off + i * cols
            for j in range(w):
                m = abs(xf[o + j])
                mz[j] = m if (m < mz[j]) & (m > 0) else mz[j]


@njit(nogil=True, cache=_CACHE)
def _keep_tile(scratch, ext, a, b, restore):
    """Save the sums (``scratch`` rows 1-2) and extrema (``ext`` rows 0-1) of a tile's
    columns ``a:b`` into the rows after them before a chunk is added, or, with
    ``restore``, take them back where the chunk was not clean (``_scan_tiles``). The
    smallest magnitudes (``ext`` row 2) are not kept: each chunk starts them anew
    (``_extrema_start``)."""
    for i in range(2):
        if restore:
            scratch[1 + i, a:b] = scratch[3 + i, a:b]
            ext[i, a:b] = ext[3 + i, a:b]
        else:
            scratch[3 + i, a:b] = scratch[1 + i, a:b]
            ext[3 + i, a:b] = ext[i, a:b]


@njit(nogil=True, cache=_CACHE)
def _fold_extrema(ext, w):
    """A wide tile's extrema (``ext`` rows 0-1, of its ``w`` columns), taken for one chunk
    alone (``_extrema_start``), folded into those saved before it (``_keep_tile``'s rows
    3-4). Each chunk is checked on what it added: a value at a cast threshold that was
    counted in an earlier chunk would otherwise fail the check of every later one, and send
    the rest of the tile down the checked path. The smallest magnitudes serve only that
    check, and are not folded."""
    for j in range(w):
        ext[0, j] = min(ext[0, j], ext[3, j])
        ext[1, j] = max(ext[1, j], ext[4, j])


@njit(nogil=True, cache=_CACHE)
def _sums_clean(s1, s2):
    """Whether a tile's sums are all finite: ``_added_clean``'s check without the extrema."""
    ok = True
    for j in range(s1.shape[0]):
        ok &= _finite_sums(s1, s2, j)
    return ok


@njit(nogil=True, cache=_CACHE, inline="always")
def _finite_sums(s1, s2, j):
    """Whether column ``j``'s sums are finite (no NaN or inf added, no square overflowed)."""
    return (abs(s1[j]) < np.inf) & (s2[j] < np.inf)


@njit(nogil=True, cache=_CACHE)
def _dirty_runs(s1, s2, mn, mx, mz, over, under, tiny, runs):
    """The runs of columns that ``_added_clean`` would not pass (at least one does not),
    into ``runs`` (starts, stops): runs less than ``RUN_GAP`` columns apart are one. Returns
    their number and their width in all. A column with a NaN in every row is one run, or one
    per copy of it when short rows are folded side by side (``scan_cols_pitched``)."""
    m = 0
    width = 0
    for j in range(s1.shape[0]):
        if _column_clean(s1, s2, mn, mx, mz, j, over, under, tiny):
            continue
        if m and j - runs[1, m - 1] < RUN_GAP:
            width += j + 1 - runs[1, m - 1]
            runs[1, m - 1] = j + 1
        else:
            runs[0, m] = j
            runs[1, m] = j + 1
            width += 1
            m += 1
    return m, width


@njit(nogil=True, cache=_CACHE, fastmath={"contract"})
def _col_update8_tiny(xf, off, cols, k, s1, s2, mn, mx, mz):
    """``_col_update8`` (the same operations in the same order) that also keeps each
    column's smallest non-zero magnitude ``mz``: rows added before they are checked."""
    o0 = np.uint64(off)
    for j in range(np.uint64(k.shape[0])):
        kj = k[j]
        a1 = s1[j]
        a2 = s2[j]
        lo = mn[j]
        hi = mx[j]
        z = mz[j]
        for q in range(8):
            u = xf[o0 + np.uint64(q) * np.uint64(cols) + j]
            d = np.float64(u) - kj
            a1 += d
            a2 += d * d
            lo = u if u < lo else lo
            hi = u if u > hi else hi
            m = abs(u)
            z = m if (m < z) & (m > 0) else z
        s1[j] = a1
        s2[j] = a2
        mn[j] = lo
        mx[j] = hi
        mz[j] = z


@njit(nogil=True, cache=_CACHE)
def _added_clean(s1, s2, mn, mx, mz, over, under, tiny):
    """Whether every value added to a tile's accumulators was finite and risks no cast: a
    NaN or inf makes a sum non-finite (so do finite values whose squares overflow: those
    rows are then checked one by one, as any), the extrema reach no overflow threshold
    ``over`` and, with ``tiny``, no non-zero magnitude ``mz`` lies at or under ``under``."""
    ok = True
    for j in range(s1.shape[0]):
        ok &= _column_clean(s1, s2, mn, mx, mz, j, over, under, tiny)
    return ok


@njit(nogil=True, cache=_CACHE, inline="always")
def _column_clean(s1, s2, mn, mx, mz, j, over, under, tiny):
    """``_added_clean`` for column ``j`` alone (``_dirty_runs`` asks the same)."""
    ok = _finite_sums(s1, s2, j) & (mn[j] > -over) & (mx[j] < over)
    return ok & ((not tiny) | (mz[j] > under))


@njit(nogil=True, cache=_CACHE)
def _rows_checked(
    xf, xi, pitch, cols, base, r0, stop, c0, step, group, kt, s1t, s2t, mnt, mxt, cnan, cpos,
    cneg, work, thr, counts, locs, vals, nlocs,
):  # fmt: skip
    """Rows ``r0:stop`` of a tile of ``scan_cols_pitched`` (columns from ``c0``, its
    accumulators ``kt`` to ``mxt``, positions from ``base``), checked before they are added:
    a group of clean rows that risk no cast is added ``step`` rows at a time (four at the end
    of eight-row groups); any other row on its own, its NaN and inf counted per column, its
    values classified and their positions recorded."""
    cnt, want, big, inf_bits, lo, hi, tiny_bits, tiny = work
    w = kt.shape[0]
    c1 = c0 + w
    r = r0
    while r < stop:
        n = min(group, (stop - r) // step * step)
        if n == 0 and stop - r >= 4:  # the last rows of eight-row groups: four at once
            n = 4
        plain = n > 0 and _rows_plain(
            xi, pitch, cols, r, n, c0, c1, big, inf_bits, lo, hi, tiny_bits, tiny
        )
        if plain:
            for q in range(r, r + n, step):
                if step == 8 and n >= 8:
                    _col_update8(xf, q * pitch + c0, pitch, kt, s1t, s2t, mnt, mxt)
                else:
                    _col_update4(xf, q * pitch + c0, pitch, kt, s1t, s2t, mnt, mxt)
            r += n
            continue
        # each row of a group that is not plain on its own (the same bits as in the group):
        # checking a group again from each next row read every row of NaN group times
        end = r + max(n, 1)
        for q in range(r, end):
            o = q * pitch
            row = xf[o + c0 : o + c1]
            smz = big
            if tiny:
                smn, smx, smz = _keys_tiny(xi[o + c0 : o + c1], big)
            else:
                smn, smx = _keys(xi[o + c0 : o + c1], big)
            clean = _clean(smn, smx, inf_bits)
            if clean:
                _col_update(row, kt, s1t, s2t, mnt, mxt)
            elif _all_nan(smn, smx, inf_bits):  # a row of a chunk never written, mostly
                _count_each(cnan, 0, w)
            else:
                _col_update_finite(xf, o + c0, 0, w, kt, s1t, s2t, mnt, mxt, cnan, cpos, cneg)
            if clean and not _risky(smn, smx, smz, lo, hi, tiny_bits):
                continue
            _classify_and_record(
                row, _ZERO, w, base + q * cols + c0, thr, counts, cnt, want, locs, vals, nlocs
            )
        r = end


@njit(nogil=True, cache=_CACHE)
def _runs_checked(
    xf, xi, pitch, cols, base, r0, stop, c0, runs, m, kt, s1t, s2t, mnt, mxt, cnan, cpos,
    cneg, work, thr, counts, locs, vals, nlocs,
):  # fmt: skip
    """``_rows_checked`` over ``m`` runs of a tile's columns (``runs``: starts and stops in
    the tile from ``c0``), row by row and run after run, so that positions are found in C
    order; each row of a run takes ``_rows_checked``'s path for a row on its own (its
    finite values added by ``_col_update_finite``, clean or not), with offsets rather than
    views (a run may be one column of a folded row, and a view per run and row would cost
    more than its values). That tail is written again here: one helper for both ran a
    NaN column 20% slower (``benchmarks/RESULTS.md``)."""
    cnt, want, big, inf_bits, lo, hi, tiny_bits, tiny = work
    T = xi.dtype.type
    for r in range(r0, stop):
        o = r * pitch + c0
        for i in range(m):
            a, b = runs[0, i], runs[1, i]
            smn, smx, smz = big, T(~big), big  # _keys (_keys_tiny) of the run's values
            for j in range(a, b):
                bits = xi[o + j]
                key = _key(bits, big)
                smn = min(smn, key)
                smx = max(smx, key)
                if tiny:
                    mag = T(bits & big)
                    smz = min(smz, mag if mag > T(0) else big)
            clean = _clean(smn, smx, inf_bits)
            if _all_nan(smn, smx, inf_bits):
                _count_each(cnan, a, b)
            else:
                _col_update_finite(xf, o, a, b, kt, s1t, s2t, mnt, mxt, cnan, cpos, cneg)
            if clean and not _risky(smn, smx, smz, lo, hi, tiny_bits):
                continue
            _classify_and_record(
                xf, o + a, o + b, base + r * (cols - pitch), thr, counts, cnt, want, locs, vals,
                nlocs,
            )  # fmt: skip


@njit(nogil=True, cache=_CACHE)
def _pow2(v):
    """A power of two at most ``v`` and above half of it: a scale that keeps squares in
    range (2**1024 would overflow)."""
    return math.ldexp(1.0, math.frexp(v)[1] - 1)


@njit(nogil=True, cache=_CACHE)
def _totals(n, mean, std, mn, mx, n0):
    """``(count, mean, std, min, max, sum)`` over rows of counts, means and stds (the mean of
    the means when the sum overflows; the spread scaled when a square does); ``n0``: the
    count every row holds, else -1 (``_shared``)."""
    rows = n.shape[0]
    if rows == 1:
        return n[0], mean[0], std[0], mn[0], mx[0], n[0] * mean[0]
    if n0 >= 0:  # every row as many values: one conversion to float64, not one a row
        tn, tsum = _weighted_sum(n, mean, np.float64(n0))
    else:
        tn, tsum = _weighted_sum(n, mean, None)
    if tn == 0:
        return 0, 0.0, 0.0, np.inf, -np.inf, tsum
    tmean = tsum / tn
    if not np.isfinite(tmean):  # n * mean overflowed: average the means instead
        tmean = 0.0
        for r in range(rows):
            tmean += (n[r] / tn) * mean[r]
    if n0 >= 0:
        var = _spread(n, mean, std, tn, tmean, n0 / tn)
    else:
        var = _spread(n, mean, std, tn, tmean, None)
    lo, hi = _slice_range(mn, mx)
    if var < np.inf and not np.sqrt(var) < TINY:
        return tn, tmean, np.sqrt(var), lo, hi, tsum
    top = abs(tmean)
    for r in range(rows):
        if n[r] > 0:
            top = max(top, max(abs(mean[r]), std[r]))
    if not var < np.inf or top > 0:  # a square out of range
        k = _pow2(top)
        var = 0.0
        for r in range(rows):
            d = mean[r] / k - tmean / k
            var += (n[r] / tn) * ((std[r] / k) * (std[r] / k) + d * d)
        return tn, tmean, np.sqrt(var) * k, lo, hi, tsum
    return tn, tmean, np.sqrt(var), lo, hi, tsum


# ``_totals``'s two sums over every slice, reordered (in vectors: 1e6 slices' totals in
# order cost as much as their moments); an overflow this may bring about sends the totals
# down their fallbacks, which are kept in order
@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _weighted_sum(n, mean, fn):
    """``(n.sum(), (n * mean).sum())``; ``fn``: every ``n`` as a float64, when they are
    one value (else None)."""
    tn = 0
    tsum = 0.0
    for r in range(n.shape[0]):
        tn += n[r]
        if fn is None:
            tsum += n[r] * mean[r]
        else:
            tsum += fn * mean[r]
    return tn, tsum


@njit(nogil=True, cache=_CACHE, fastmath=_FLAGS)
def _spread(n, mean, std, tn, tmean, w):
    """The variance of the union of slices of counts ``n``, means and stds around
    ``tmean``; ``w``: every ``n / tn``, when the counts are one value (else None)."""
    var = 0.0
    for r in range(n.shape[0]):
        d = mean[r] - tmean
        if w is None:
            var += (n[r] / tn) * (std[r] * std[r] + d * d)
        else:
            var += w * (std[r] * std[r] + d * d)
    return var


@njit(nogil=True, cache=_CACHE)
def _shared(n):
    """The one value of the counts ``n``, -1 when they differ (or there are none). AVX2
    converts int64 to float64 one at a time: loops over rows that share a count convert it
    once."""
    if n.shape[0] == 0:
        return -1
    n0 = n[0]
    same = True
    for r in range(n.shape[0]):
        same &= n[r] == n0
    return n0 if same else -1


@njit(nogil=True, cache=_CACHE)
def _slice_range(mn, mx):
    """``(mn.min(), mx.max())`` in vectors, for extrema that are never NaN: the slices' own,
    over their finite values (+-inf for none)."""
    lo = np.inf
    hi = -np.inf
    for r in range(mn.shape[0]):
        lo = _fmin(lo, mn[r])
        hi = _fmax(hi, mx[r])
    return lo, hi


@njit(nogil=True, cache=_CACHE)
def _no_counts(cnan, cpos, cneg):
    """Whether no slice holds a non-finite value (clean data: every count is the
    slice's length)."""
    some = 0
    for r in range(cnan.shape[0]):
        some |= cnan[r] | cpos[r] | cneg[r]
    return some == 0


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _moments_of(length, shift, s1, s2, cnan, cpos, cneg, n, mean, std, whole):
    """Per slice count, mean and std of the finite values from a kernel's shifted sums (a
    NaN mean and std where the sums overflowed); ``whole``: ``max(length, 1)`` as a float64
    when no slice holds a non-finite value (``_no_counts``: one count, converted once),
    else None."""
    for r in range(n.shape[0]):
        if whole is None:
            c = length - cnan[r] - cpos[r] - cneg[r]
            cs = np.float64(max(c, 1))
        else:
            c = length
            cs = whole
        a = s1[r]
        b = s2[r]
        ok = abs(a) < np.inf and b < np.inf
        q = a / cs
        v = b - a * q
        m = shift[r] + q
        sd = np.sqrt(max(v, 0.0) / cs)
        n[r] = c
        mean[r] = (m if ok else np.nan) if c > 0 else 0.0
        std[r] = (sd if ok else np.nan) if c > 0 else 0.0


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _to_rescue(n, mean, mn, mx):
    """Whether a slice's moments are taken again, scaled (``rescue_rows``)."""
    tiny = (max(abs(mn), abs(mx)) < TINY) & (mn != mx)
    return (n > 0) & ((mean != mean) | tiny)


@njit(nogil=True, cache=_CACHE)
def _finish(
    length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std,
    final, z, eps, z_threshold, thresholds, where, flags,
):  # fmt: skip
    """``finish_slices`` and, when ``final``, ``finish_whole_slices``: ``_finish_block`` on
    each ``SLICE_BLOCK`` slices in turn."""
    acc = _finish_start()
    for b0 in range(0, n.shape[0], SLICE_BLOCK):
        b = slice(b0, min(b0 + SLICE_BLOCK, n.shape[0]))
        acc = _finish_block(
            length, shift[b], s1[b], s2[b], mn[b], mx[b], cnan[b], cpos[b], cneg[b], n[b],
            mean[b], std[b], b0, final, z[b] if final else z, eps, z_threshold, thresholds,
            where, flags, acc,
        )  # fmt: skip
    return acc[:9]


@njit(nogil=True, cache=_CACHE)
def _finish_start():
    """The totals, counts and scratch ``_finish_block`` carries from block to block."""
    z = _ZERO
    return z, 0.0, 0.0, np.inf, -np.inf, 0.0, z, z, z, np.empty(FLAG_BLOCK, np.int64)


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _finish_block(
    length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, b0,
    final, z, eps, z_threshold, thresholds, where, flags, acc,
):  # fmt: skip
    """A block of at most ``SLICE_BLOCK`` slices from slice ``b0`` finished (the arguments:
    views of its columns), read while they stay in L1: moments, totals (combined into
    ``acc``'s by Chan's formula), the slices to rescue, then when ``final`` the largest |z|
    (``z`` may be ``shift``'s memory: the shifts are read first) and the flags. A final
    block of clean slices takes its largest |z|, flags and slices to rescue in one loop
    (``_finish_clean``), with the bits of the others. Returns ``acc`` (``_finish_start``)
    updated."""
    tn, tmean, tstd, lo, hi, tsum, rescue, k, empty, bits = acc
    m = n.shape[0]
    clean = _no_counts(cnan, cpos, cneg)
    _moments_of(length, shift, s1, s2, cnan, cpos, cneg, n, mean, std, np.float64(max(length, 1)) if clean else None)  # fmt: skip
    whole = final and clean and length > 0
    seen = False
    if whole:
        rc, seen = _finish_clean(length, n, mean, std, mn, mx, z, eps, z_threshold, thresholds, bits)  # fmt: skip
        rescue += rc
        n0 = length
    else:
        n0 = _shared(n)  # for the totals and the flags
        for r in range(m):
            rescue += _to_rescue(n[r], mean[r], mn[r], mx[r])
        if final:
            for r in range(m):
                e = n[r] == 0
                empty += e
                q = _max_z(mean[r], std[r], mn[r], mx[r])
                z[r] = 0.0 if e else q
            k = _flag_block(
                n, mean, std, z, cnan, cpos, cneg, b0, m,
                eps, z_threshold, thresholds, bits, where, flags, k, n0,
            )  # fmt: skip
    c, cm, cs, clo, chi, csum = _totals(n, mean, std, mn, mx, n0)
    tn, tmean, tstd = _chan(tn, tmean, tstd, c, cm, cs)
    lo = min(lo, clo)
    hi = max(hi, chi)
    tsum += csum
    if whole:
        k = _flagged(bits, seen, b0, m, where, flags, k)
    return tn, tmean, tstd, lo, hi, tsum, rescue, k, empty, bits


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _finish_clean(length, n, mean, std, mn, mx, z, eps, z_threshold, thresholds, block):
    """``_finish_block``'s work after the moments on a final block of clean slices, each of
    ``length > 0`` values, in one loop: whether to rescue each slice, its largest |z|
    (``_max_z_finite``: a std from ``_moments_of`` is never infinite) and its flags in
    ``block`` (none for a non-finite value), the same bits as the separate loops of other
    blocks. The moments stay a loop of their own: its chain of two divisions and a square
    root is short enough there for the next slices' to overlap it. Returns ``(slices to
    rescue, whether one is flagged)``."""
    cs, r = _one_count(length, eps)
    nt = thresholds.shape[0]
    low = _lowest(thresholds)
    rescue = 0
    seen = 0
    over = False
    for j in range(n.shape[0]):
        mu = mean[j]
        sd = std[j]
        rescue += _to_rescue(length, mu, mn[j], mx[j])
        q = _max_z_finite(mu, sd, mn[j], mx[j])
        z[j] = q
        f = _spread_bits(length > 1, cs, r, eps, mu, sd, q, z_threshold, 3 + 2 * nt)
        block[j] = f
        seen |= f
        t_, s_ = _sums_of(length, cs, mu, sd)
        over |= (t_ >= low) | (s_ >= low)
    if over:
        _threshold_bits(n, mean, std, n.shape[0], thresholds, block, (cs, r))
    return rescue, seen != 0 or over


@njit(nogil=True, cache=_CACHE)
def finish_slices(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std):
    """Per slice count, mean and std of the finite values from a kernel's outputs (the rows
    of its ``stats`` and ``counts``, each 1-D: rows passed on their own are contiguous,
    whatever the layout of the outputs, and the loops run in vectors), and over all of them
    ``(count, mean, std, min, max, sum)``, then the number of slices to rescue. ``length``
    values per slice; ``mn``, ``mx``: the extrema of each slice's finite values (never NaN).
    A slice whose sums overflowed (finite values near the float64 maximum) gets a NaN mean
    and std: it is taken again, scaled (``summary.rescued``), as are slices of magnitudes
    under ``TINY`` (``rescue_rows``). The totals are ``_totals``'s of each ``SLICE_BLOCK``
    slices, combined in order by Chan's formula."""
    e = np.empty(0)
    w = np.empty(0, np.int64)
    t = _finish(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, False, e, 0.0, 0.0, e, w, w)  # fmt: skip
    return t[0], t[1], t[2], t[3], t[4], t[5], t[6]


@njit(nogil=True, cache=_CACHE)
def finish_whole_slices(
    length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std,
    z, eps, z_threshold, thresholds, where, flags,
):  # fmt: skip
    """``finish_slices`` for slices whose values all lie in this block (nothing else will
    be merged into them), in the same pass: the report's largest |z| of each slice in ``z``
    (``slice_columns``'s; it may be ``shift``'s memory) and the flagged slices in ``where``
    and ``flags`` (``slice_flags``'s). Returns ``finish_slices``'s results, then how many
    slices were flagged and how many hold no finite value."""
    return _finish(
        length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std,
        True, z, eps, z_threshold, thresholds, where, flags,
    )  # fmt: skip


@njit(nogil=True, cache=_CACHE)
def rescue_rows(n, mean, mn, mx):
    """The slices whose moments are taken again, scaled (``summary.rescued``): those with a
    finite value and a NaN mean (their sums overflowed), or whose magnitudes all lie under
    ``TINY`` and are not all equal (their squares fell below float64's normal range)."""
    out = np.empty(n.shape[0], np.int64)
    k = 0
    for i in range(n.shape[0]):
        if _to_rescue(n[i], mean[i], mn[i], mx[i]):
            out[k] = i
            k += 1
    return out[:k]


@njit(nogil=True, cache=_CACHE)
def _chan(na, ma, sa, nb, mb, sb):
    """``stats.combine`` of two parts' ``(n, mean, std)``, on scalars."""
    if nb == 0:
        return na, ma, sa
    if na == 0:
        return nb, mb, sb
    wa = na / (na + nb)
    wb = nb / (na + nb)
    delta = mb - ma
    if abs(delta) < np.inf:
        mean = ma + delta * wb
    else:  # means of opposite signs near the maximum
        mean = ma * wa + mb * wb
    s = np.sqrt(wa * sa * sa + wb * sb * sb + wa * wb * delta * delta)
    top = max(max(abs(ma), abs(mb)), max(sa, sb))
    if not s < np.inf or (s < TINY and top > 0):  # a square out of range
        k = _pow2(top)
        sa, sb, d = sa / k, sb / k, mb / k - ma / k
        s = np.sqrt(wa * sa * sa + wb * sb * sb + wa * wb * d * d) * k
    return na + nb, mean, s


@njit(nogil=True, cache=_CACHE)
def fold_slices(
    idx, n, mean, std, mn, mx, nan, pos, neg, dn, dmean, dstd, dmn, dmx, dnan, dpos, dneg
):
    """Merge slice statistics into dense per-slice arrays in place: ``stats.combine``, the
    same operations in the same order."""
    for r in range(idx.shape[0]):
        i = idx[r]
        dn[i], dmean[i], dstd[i] = _chan(dn[i], dmean[i], dstd[i], n[r], mean[r], std[r])
        dmn[i] = min(dmn[i], mn[r])
        dmx[i] = max(dmx[i], mx[r])
        dnan[i] += nan[r]
        dpos[i] += pos[r]
        dneg[i] += neg[r]


@njit(nogil=True, cache=_CACHE)
def quick_check(x, xi, thr):
    """True when a contiguous 1-D block holds no non-finite value and no cast risk: the
    integer pass of ``_keys`` alone (no sums, no positions), for checks on every batch."""
    _, _, big, inf_bits, lo, hi, tiny_bits, tiny = _work(x, xi, thr)
    if tiny:
        mn, mx, mz = _keys_tiny(xi, big)
    else:
        mn, mx = _keys(xi, big)
        mz = big
    return _clean(mn, mx, inf_bits) and not _risky(mn, mx, mz, lo, hi, tiny_bits)


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _max_z(mean, std, mn, mx):
    """A slice's largest |z|, ``max((max - mean) / std, (mean - min) / std)``: 0 when std
    is 0 or the quotient NaN, +-inf clipped to the float64 maximum."""
    big = np.finfo(np.float64).max
    a = (mx - mean) / std  # branch-free (no division error), so that loops run in vectors
    b = (mean - mn) / std
    z = min(max(a if a >= b else b, -big), big)
    return z if (std > 0) & (a == a) & (b == b) else 0.0


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _max_z_finite(mean, std, mn, mx):
    """``_max_z`` for a std that is finite or NaN (never infinite), with one division: a
    correctly rounded division by ``std > 0`` keeps the order of what it divides, so the
    larger of the two quotients is the larger numerator's (the same bits)."""
    big = np.finfo(np.float64).max
    p = mx - mean
    q = mean - mn
    z = min(max((p if p >= q else q) / std, -big), big)
    return z if (std > 0) & (p == p) & (q == q) else 0.0


@njit(nogil=True, cache=_CACHE)
def slice_columns(n, mean, std, mn, mx, out_mean, out_std, out_min, out_max, out_z):
    """A report's per-slice columns from merged statistics: the largest |z|
    ``max((max - mean) / std, (mean - min) / std)`` (0 when std is 0 or the quotient NaN,
    +-inf clipped to the float64 maximum), and NaN for the mean, std, min and max of slices
    without a finite value."""
    for i in range(n.shape[0]):
        if n[i] > 0:
            s = std[i]
            out_mean[i] = mean[i]
            out_std[i] = s
            out_min[i] = mn[i]
            out_max[i] = mx[i]
            out_z[i] = _max_z(mean[i], s, mn[i], mx[i])
        else:
            out_mean[i] = np.nan
            out_std[i] = np.nan
            out_min[i] = np.nan
            out_max[i] = np.nan
            out_z[i] = 0.0


@njit(nogil=True, cache=_CACHE)
def slice_flags(count, mean, std, max_z, nan, pos, neg, eps, z_threshold, thresholds, where, flags):
    """The slices with a kind of ``anomalies.slice_kinds`` (its docstring gives the
    conditions), in order: their positions in ``where[:k]`` and their bits in
    ``flags[:k]`` (bit ``j`` for the ``j``-th kind); returns ``k``. ``thresholds``: the
    overflow threshold of each checked dtype. The bits of a block of slices are taken in
    vectors, and only a block with a flagged slice is looked at one by one: the outputs of
    1e6 clean slices are never written."""
    bits = np.empty(FLAG_BLOCK, np.int64)
    k = 0
    for lo in range(0, count.shape[0], FLAG_BLOCK):
        m = min(FLAG_BLOCK, count.shape[0] - lo)
        # views, so that indices count from 0: LLVM then loads vectors, not gathers
        k = _flag_block(
            count[lo:], mean[lo:], std[lo:], max_z[lo:], nan[lo:], pos[lo:], neg[lo:], lo, m,
            eps, z_threshold, thresholds, bits, where, flags, k, _shared(count[lo : lo + m]),
        )  # fmt: skip
    return k


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _flag_block(
    cnt, mu_, sd_, z_, nan, pos, neg, lo, m,
    eps, z_threshold, thresholds, block, where, flags, k, n0,
):  # fmt: skip
    """``slice_flags`` on the ``m <= FLAG_BLOCK`` slices from ``lo`` (the columns' views
    from there; ``block``: scratch): the flagged ones appended to ``where`` and ``flags``
    from ``k``; returns the new ``k``. ``n0``: the count all ``m`` slices hold (clean
    data), else -1 (``_shared``); such a block takes its square root once."""
    if m == 0:
        return k
    args = (cnt, mu_, sd_, z_, nan, pos, neg, m, eps, z_threshold, thresholds, block)
    if n0 >= 0:
        seen = _flag_bits(*args, _one_count(n0, eps))
    else:
        seen = _flag_bits(*args, None)
    return _flagged(block, seen, lo, m, where, flags, k)


@njit(nogil=True, cache=_CACHE)
def _one_count(n0, eps):
    """``_flag_bits``'s ``one``: the count ``n0`` as a float64 and its ``sqrt(1 - n0 * eps)``."""
    fn = np.float64(n0)
    return fn, np.sqrt(max(1.0 - fn * eps, 0.0))


@njit(nogil=True, cache=_CACHE)
def _flagged(block, seen, lo, m, where, flags, k):
    """The slices of ``block[:m]`` (from slice ``lo``) with a bit set appended to ``where``
    and ``flags`` from ``k``, when ``seen`` (else none is); returns the new ``k``."""
    if seen:
        for j in range(m):
            if block[j]:
                where[k] = lo + j
                flags[k] = block[j]
                k += 1
    return k


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _flag_bits(cnt, mu_, sd_, z_, nan, pos, neg, m, eps, z_threshold, thresholds, block, one):  # fmt: skip
    """``_flag_block``'s bits in ``block[:m]``; ``one``: when every slice holds as many
    values, that count as a float64 and its ``sqrt(1 - n * eps)`` (``_one_count``), else
    None (each its own: AVX2 converts int64 to float64 one at a time). Returns whether a
    slice is flagged."""
    nt = thresholds.shape[0]
    low = _lowest(thresholds)
    seen = 0
    over = False
    for j in range(m):  # branch-free, so that it runs in vectors
        n = cnt[j]
        if one is None:
            fn = np.float64(n)
            r = np.sqrt(max(1.0 - fn * eps, 0.0))
        else:
            fn, r = one
        sd = sd_[j]
        mu = mu_[j]
        f = np.int64(nan[j] + pos[j] + neg[j] > 0)
        f |= _spread_bits(n > 1, fn, r, eps, mu, sd, z_[j], z_threshold, 3 + 2 * nt)
        block[j] = f
        seen |= f
        t_, s_ = _sums_of(n, fn, mu, sd)
        over |= (t_ >= low) | (s_ >= low)
    if over:
        _threshold_bits(cnt, mu_, sd_, m, thresholds, block, one)
    return seen != 0 or over


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _spread_bits(spread, fn, r, eps, mu, sd, z, z_threshold, zbit):
    """A slice's bits for its spread: zero variance (bit 1), variance near zero for its
    mean (bit 2), largest |z| over ``z_threshold`` (bit ``zbit``); none when not
    ``spread`` (one value has no spread to speak of). ``fn``: its count as a float64,
    ``r``: ``sqrt(1 - fn * eps)``."""
    # var <= n*eps*var + (n*m*eps)**2 without squares: for any magnitude (the square of
    # a std below 1e-154 is 0 in float64)
    near = (fn * eps >= 1.0) | (sd * r <= fn * abs(mu) * eps)
    f = np.int64(spread & (sd == 0)) << 1
    f |= np.int64(spread & (sd != 0) & (sd < np.inf) & near) << 2
    return f | (np.int64(spread & (z > z_threshold)) << zbit)


@njit(nogil=True, cache=_CACHE)
def _lowest(thresholds):
    """The lowest of the overflow ``thresholds`` (inf for none): under it, no sum of a
    slice is over any of them."""
    low = np.inf
    for t in range(thresholds.shape[0]):
        low = min(low, thresholds[t])
    return low


@njit(nogil=True, cache=_CACHE, inline="always")
def _sums_of(n, fn, mu, sd):
    """A slice's sum ``|n * mean|`` and sum of squared deviations ``n * std**2`` (``fn``:
    ``n`` as a float64), 0 for an empty slice: what the flags hold against the thresholds."""
    return (abs(mu * fn) if n > 0 else 0.0), (sd * sd * fn if n > 0 else 0.0)


@njit(nogil=True, cache=_CACHE, error_model="numpy")
def _threshold_bits(cnt, mu_, sd_, m, thresholds, block, one):
    """The bits of the slices of ``block[:m]`` whose sum or sum of squares reaches an
    overflow threshold (``_flag_bits``'s arguments): a pass per threshold, run only when
    one of them is reached."""
    for t in range(thresholds.shape[0]):
        th = thresholds[t]
        for j in range(m):
            n = cnt[j]
            fn = np.float64(n) if one is None else one[0]
            t_, s_ = _sums_of(n, fn, mu_[j], sd_[j])
            block[j] |= (np.int64(t_ >= th) << (3 + 2 * t)) | (np.int64(s_ >= th) << (4 + 2 * t))
