"""Sixteen lanes of values as one Numba value: explicit vectors, written like SIMD intrinsics.

Why: a sum's bits depend on the order of its additions. Left to LLVM's vectorizer (under
``reassoc``), that order depends on the CPU's vector width, and a NumPy twin could not
reproduce it. Here a block's values are summed in ``L`` lanes, lane ``j`` taking the values
at positions ``j``, ``j + L``, ... in order from 0.0, and the lanes are folded by a fixed
halving tree (``fold``). NumPy does the same with ``np.add.reduce(d.reshape(-1, L), 0,
initial=0.0)`` (a sum down the columns of a C array adds row after row), so a twin gives
the kernels' bits on any CPU. The operations are vertical: no fastmath flag is needed for
them to run in vectors, and LLVM has no loop to vectorize (fast to compile).

Every function here is an ``intrinsic``: it is emitted into its caller's code, not compiled
as a function of its own. The lane types (``Lanes``) and masks (``Mask``) are Numba types
whose LLVM values are ``<16 x T>`` and ``<16 x i1>``.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

from ..model.stats import LANES as L  # a multiple of every machine's vector width

_I32 = ir.IntType(32)
_I1 = ir.IntType(1)


class Lanes(types.Type):
    """``L`` values of one numeric Numba type."""

    def __init__(self, dtype: types.Type):
        self.dtype = dtype
        super().__init__(name=f"Lanes[{dtype}]")


class Mask(types.Type):
    """``L`` booleans (the result of a lane comparison)."""

    def __init__(self):
        super().__init__(name="Mask")


MASK = Mask()


@register_model(Lanes)
class _LanesModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        elem = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(elem, L))


@register_model(Mask)
class _MaskModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(_I1, L))


def _mangled(t) -> str:
    """A type's suffix in an overloaded LLVM intrinsic's name (llvmlite's names no
    vectors)."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_mangled(t.element)}"
    if isinstance(t, ir.PointerType):
        return "p0"
    return {ir.FloatType(): "f32", ir.DoubleType(): "f64"}.get(t) or f"i{t.width}"


def _intrinsic_fn(builder, name: str, ret, args, overloads):
    """The LLVM intrinsic ``name`` overloaded on the types ``overloads``."""
    full = ".".join([name, *(_mangled(t) for t in overloads)])
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), full)


def _is_float(t) -> bool:
    return isinstance(t, types.Float)


def _lane_ptr(context, builder, arrty, arr, i):
    """A pointer to element ``i`` of a 1-D array, typed as a pointer to ``L`` of them."""
    data = context.make_array(arrty)(context, builder, arr).data
    vec = ir.VectorType(context.get_value_type(arrty.dtype), L)
    return builder.bitcast(builder.gep(data, [i]), vec.as_pointer())


def _const_lanes(values) -> ir.Constant:
    return ir.Constant(ir.VectorType(_I32, len(values)), list(values))


def _below(builder, m):
    """The mask of lanes ``j < m``."""
    m32 = builder.trunc(m, _I32) if m.type.width > 32 else m
    splat = builder.insert_element(ir.Constant(ir.VectorType(_I32, L), None), m32, _I32(0))
    splat = builder.shuffle_vector(
        splat, ir.Constant(ir.VectorType(_I32, L), None), _const_lanes([0] * L)
    )
    return builder.icmp_signed("<", _const_lanes(range(L)), splat)


def _splat(builder, value, vec_type):
    v = builder.insert_element(ir.Constant(vec_type, None), value, _I32(0))
    return builder.shuffle_vector(v, ir.Constant(vec_type, None), _const_lanes([0] * L))


def _checked_array(a, i) -> bool:
    return isinstance(a, types.Array) and a.ndim == 1 and isinstance(i, types.Integer)


@intrinsic
def load(typingctx, a, i):
    """``a[i:i + L]`` (``a``: a 1-D contiguous array; ``i + L <= len(a)``)."""
    if not (_checked_array(a, i) and a.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        ptr = _lane_ptr(context, builder, sig.args[0], args[0], args[1])
        return builder.load(ptr, align=sig.args[0].dtype.bitwidth // 8)

    return Lanes(a.dtype)(a, i), codegen


@intrinsic
def load_part(typingctx, a, i, m, fill):
    """``a[i:i + m]`` in the first ``m < L`` lanes, ``fill`` in the others (a masked load:
    nothing past ``a[i + m - 1]`` is read)."""
    if not (_checked_array(a, i) and a.layout == "C" and isinstance(m, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        arr, idx, count, value = args
        ptr = _lane_ptr(context, builder, sig.args[0], arr, idx)
        vec = ptr.type.pointee
        fill_v = context.cast(builder, value, sig.args[3], sig.args[0].dtype)
        fn = _intrinsic_fn(
            builder,
            "llvm.masked.load",
            vec,
            [ptr.type, _I32, ir.VectorType(_I1, L), vec],
            [vec, ptr.type],
        )
        align = _I32(sig.args[0].dtype.bitwidth // 8)
        return builder.call(fn, [ptr, align, _below(builder, count), _splat(builder, fill_v, vec)])

    return Lanes(a.dtype)(a, i, m, fill), codegen


@intrinsic
def store(typingctx, a, i, v):
    """``a[i:i + L] = v``."""
    if not (_checked_array(a, i) and isinstance(v, Lanes) and v.dtype == a.dtype):
        return None

    def codegen(context, builder, sig, args):
        ptr = _lane_ptr(context, builder, sig.args[0], args[0], args[1])
        builder.store(args[2], ptr, align=sig.args[0].dtype.bitwidth // 8)
        return context.get_dummy_value()

    return types.void(a, i, v), codegen


@intrinsic
def store_part(typingctx, a, i, m, v):
    """``a[i:i + m] = v[:m]`` (a masked store: nothing past ``a[i + m - 1]`` is written)."""
    if not (_checked_array(a, i) and isinstance(v, Lanes) and v.dtype == a.dtype):
        return None

    def codegen(context, builder, sig, args):
        arr, idx, count, value = args
        ptr = _lane_ptr(context, builder, sig.args[0], arr, idx)
        fn = _intrinsic_fn(
            builder,
            "llvm.masked.store",
            ir.VoidType(),
            [value.type, ptr.type, _I32, ir.VectorType(_I1, L)],
            [value.type, ptr.type],
        )
        align = _I32(sig.args[0].dtype.bitwidth // 8)
        builder.call(fn, [value, ptr, align, _below(builder, count)])
        return context.get_dummy_value()

    return types.void(a, i, m, v), codegen


@intrinsic
def prefetch(typingctx, a, i):
    """Ask for the cache line holding ``a[i]`` ahead of its reads (a hint: no fault, no
    effect on any value, wherever ``i`` points)."""
    if not (isinstance(a, types.Array) and a.ndim == 1 and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        ptr = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        fn = _intrinsic_fn(builder, "llvm.prefetch", ir.VoidType(), [ptr.type, _I32, _I32, _I32], [ptr.type])  # fmt: skip
        builder.call(fn, [ptr, _I32(0), _I32(3), _I32(1)])
        return context.get_dummy_value()

    return types.void(a, i), codegen


@intrinsic
def splat(typingctx, s):
    """``s`` in every lane."""
    if not isinstance(s, (types.Float, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        return _splat(builder, args[0], context.get_value_type(sig.return_type))

    return Lanes(s)(s), codegen


@intrinsic
def wide(typingctx, v):
    """float32 lanes as float64 (exact); float64 lanes as they are."""
    if not (isinstance(v, Lanes) and _is_float(v.dtype)):
        return None
    out = Lanes(types.float64)

    def codegen(context, builder, sig, args):
        if sig.args[0].dtype == types.float64:
            return args[0]
        return builder.fpext(args[0], context.get_value_type(out))

    return out(v), codegen


def _binary(float_op: str, int_op: str):
    @intrinsic
    def impl(typingctx, a, b):
        if not (isinstance(a, Lanes) and a == b):
            return None

        def codegen(context, builder, sig, args):
            op = float_op if _is_float(sig.args[0].dtype) else int_op
            return getattr(builder, op)(*args)

        return a(a, b), codegen

    return impl


add = _binary("fadd", "add")
add.__doc__ = "Lane by lane ``a + b``."
sub = _binary("fsub", "sub")
sub.__doc__ = "Lane by lane ``a - b``."
mul = _binary("fmul", "mul")
mul.__doc__ = "Lane by lane ``a * b`` (never fused into an addition: NumPy does not fuse)."
div = _binary("fdiv", "sdiv")
div.__doc__ = "Lane by lane ``a / b``."


def _compare(op: str):
    @intrinsic
    def impl(typingctx, a, b):
        if not (isinstance(a, Lanes) and a == b):
            return None

        def codegen(context, builder, sig, args):
            if _is_float(sig.args[0].dtype):
                if op == "!=":
                    return builder.fcmp_unordered(op, *args)
                return builder.fcmp_ordered(op, *args)
            if sig.args[0].dtype.signed:
                return builder.icmp_signed(op, *args)
            return builder.icmp_unsigned(op, *args)

        return MASK(a, b), codegen

    return impl


lt = _compare("<")
le = _compare("<=")
gt = _compare(">")
ge = _compare(">=")
eq = _compare("==")
ne = _compare("!=")


@intrinsic
def select(typingctx, m, a, b):
    """``a`` where ``m``, else ``b``."""
    if not (m == MASK and isinstance(a, Lanes) and a == b):
        return None

    def codegen(context, builder, sig, args):
        return builder.select(*args)

    return a(m, a, b), codegen


@intrinsic
def vmin(typingctx, a, b):
    """``b`` where ``b < a``, else ``a``: a NaN in ``b`` is never taken."""
    if not (isinstance(a, Lanes) and a == b):
        return None

    def codegen(context, builder, sig, args):
        if _is_float(sig.args[0].dtype):
            less = builder.fcmp_ordered("<", args[1], args[0])
        else:
            less = builder.icmp_signed("<", args[1], args[0])
        return builder.select(less, args[1], args[0])

    return a(a, b), codegen


@intrinsic
def vmax(typingctx, a, b):
    """``b`` where ``b > a``, else ``a``: a NaN in ``b`` is never taken."""
    if not (isinstance(a, Lanes) and a == b):
        return None

    def codegen(context, builder, sig, args):
        if _is_float(sig.args[0].dtype):
            more = builder.fcmp_ordered(">", args[1], args[0])
        else:
            more = builder.icmp_signed(">", args[1], args[0])
        return builder.select(more, args[1], args[0])

    return a(a, b), codegen


@intrinsic
def vabs(typingctx, v):
    """Lane by lane ``|v|`` (floats)."""
    if not (isinstance(v, Lanes) and _is_float(v.dtype)):
        return None

    def codegen(context, builder, sig, args):
        t = args[0].type
        fn = _intrinsic_fn(builder, "llvm.fabs", t, [t], [t])
        return builder.call(fn, [args[0]])

    return v(v), codegen


@intrinsic
def vsqrt(typingctx, v):
    """Lane by lane ``sqrt(v)`` (floats; correctly rounded, as ``math.sqrt``)."""
    if not (isinstance(v, Lanes) and _is_float(v.dtype)):
        return None

    def codegen(context, builder, sig, args):
        t = args[0].type
        return builder.call(_intrinsic_fn(builder, "llvm.sqrt", t, [t], [t]), [args[0]])

    return v(v), codegen


@intrinsic
def finite(typingctx, v):
    """The lanes holding a finite value (``v - v == 0``)."""
    if not (isinstance(v, Lanes) and _is_float(v.dtype)):
        return None

    def codegen(context, builder, sig, args):
        d = builder.fsub(args[0], args[0])
        return builder.fcmp_ordered("==", d, ir.Constant(d.type, None))

    return MASK(v), codegen


@intrinsic
def below(typingctx, m):
    """The lanes ``j < m``."""
    if not isinstance(m, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return _below(builder, args[0])

    return MASK(m), codegen


def _mask_op(name: str):
    @intrinsic
    def impl(typingctx, a, b):
        if not (a == MASK and b == MASK):
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, name)(*args)

        return MASK(a, b), codegen

    return impl


both = _mask_op("and_")
either = _mask_op("or_")


@intrinsic
def negate(typingctx, m):
    """Lanes not in ``m``."""
    if m != MASK:
        return None

    def codegen(context, builder, sig, args):
        return builder.not_(args[0])

    return MASK(m), codegen


@intrinsic
def tofloat(typingctx, v):
    """Integer lanes as float64 (each rounded as ``float(i)``)."""
    if not (isinstance(v, Lanes) and isinstance(v.dtype, types.Integer)):
        return None
    out = Lanes(types.float64)

    def codegen(context, builder, sig, args):
        t = context.get_value_type(out)
        if sig.args[0].dtype.signed:
            return builder.sitofp(args[0], t)
        return builder.uitofp(args[0], t)

    return out(v), codegen


@intrinsic
def ones(typingctx, m):
    """1 in the int32 lanes of ``m``, 0 elsewhere (counts: ``add(c, ones(m))``)."""
    if m != MASK:
        return None
    out = Lanes(types.int32)

    def codegen(context, builder, sig, args):
        return builder.zext(args[0], ir.VectorType(_I32, L))

    return out(m), codegen


@intrinsic
def anyof(typingctx, m):
    """Whether any lane of ``m`` is set."""
    if m != MASK:
        return None

    def codegen(context, builder, sig, args):
        bits = builder.bitcast(args[0], ir.IntType(L))
        return builder.icmp_unsigned("!=", bits, ir.IntType(L)(0))

    return types.boolean(m), codegen


def _halving(builder, x, combine):
    """Fold ``L`` lanes into one: the lower half with the upper, until one is left."""
    n = L
    while n > 1:
        h = n // 2
        lo = builder.shuffle_vector(x, x, _const_lanes(range(h)))
        hi = builder.shuffle_vector(x, x, _const_lanes(range(h, n)))
        x = combine(lo, hi)
        n = h
    return builder.extract_element(x, _I32(0))


@intrinsic
def fold(typingctx, v):
    """The sum of the lanes: lanes ``[:8] + [8:]``, then ``[:4] + [4:8]``, ``[:2] +
    [2:4]``, ``[0] + [1]`` (``slices_numpy.fold`` does the same)."""
    if not isinstance(v, Lanes):
        return None
    out = types.int64 if isinstance(v.dtype, types.Integer) else v.dtype

    def codegen(context, builder, sig, args):
        x = args[0]
        if _is_float(sig.args[0].dtype):
            return _halving(builder, x, builder.fadd)
        x = builder.sext(x, ir.VectorType(ir.IntType(64), L))
        return _halving(builder, x, builder.add)

    return out(v), codegen


def _extreme(op: str):
    @intrinsic
    def impl(typingctx, v):
        if not (isinstance(v, Lanes) and _is_float(v.dtype)):
            return None

        def codegen(context, builder, sig, args):
            def pick(a, b):
                return builder.select(builder.fcmp_ordered(op, b, a), b, a)

            return _halving(builder, args[0], pick)

        return v.dtype(v), codegen

    return impl


least = _extreme("<")
least.__doc__ = "The smallest lane (a NaN lane is never taken over another)."
greatest = _extreme(">")
greatest.__doc__ = "The largest lane (a NaN lane is never taken over another)."


@intrinsic
def lane(typingctx, v, j):
    """Lane ``j`` of ``v``."""
    if not (isinstance(v, Lanes) and isinstance(j, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        j = args[1]
        j = (
            builder.trunc(j, _I32)
            if j.type.width > 32
            else builder.zext(j, _I32)
            if j.type.width < 32
            else j
        )
        return builder.extract_element(args[0], j)

    return v.dtype(v, j), codegen


__all__ = [
    "L", "Lanes", "Mask", "add", "anyof", "below", "both", "div", "either", "eq", "finite", "fold",
    "ge", "greatest", "gt", "lane", "le", "least", "load", "load_part", "lt", "mul", "ne",
    "negate", "ones", "prefetch", "select", "splat", "store", "store_part", "sub", "tofloat",
    "vabs", "vmax", "vmin", "vsqrt", "wide",
]  # fmt: skip
