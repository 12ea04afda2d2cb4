"""Float sums in a fixed lane order, as explicit LLVM vectors (issue 19).

A float ``add`` reduction written as scalar partial accumulators is a dependency chain per accumulator: eight of
them over a 1024-element row are 128 dependent adds each, and Numba leaves LLVM's SLP vectoriser off, so the
adds stay scalar (0.6 ms per 4M float32 values held in cache; NumPy's pairwise sum 0.7 ms, a vectorised sum
0.18 ms). LLVM's loop vectoriser reorders a float reduction only under fast-math, in an order that depends on
the machine's vector width. Here the accumulator is an LLVM vector of :data:`WIDTH` lanes held in registers
(``<64 x float>``: four zmm or eight ymm registers), so the order is the same on every machine:

- element ``k`` of the reduced run (``k`` counted from 0 along the innermost reduced axis, for each position of
  the outer reduced axes in turn) is added into lane ``k mod W``, lanes in increasing ``k``;
- every lane starts at the reduce's identity, and at the end the lanes are summed by halving: lanes ``[0, W/2)``
  plus lanes ``[W/2, W)`` elementwise, then the same on the ``W/2`` sums, down to one.

T5 allows a reduce any order and bounds the result by gamma_n times the sum of magnitudes. Signed zeros come
out as the sequential fold's: a sum of zeros is -0 only where every term and the identity are -0, in any order.

The generated code keeps the lanes in a stack array of W values (:func:`lanes_array`) that it updates in loops
of the constant trip count W (:mod:`.lane_sum`), which LLVM vectorises and unrolls whole, so the array lives in
registers; a run read straight from a row adds it W at a time to an LLVM vector (:func:`lanes_load`,
:func:`lanes_add`, :func:`lanes_store`). Numba's data model for :class:`Lanes` is the LLVM vector itself, so such
an accumulator is a loop-carried register value, never memory.
"""
from __future__ import annotations

import llvmlite.ir as ir
from numba import types
from numba.core import cgutils
from numba.core.datamodel import models, register_default
from numba.extending import intrinsic

LANES_BY_BITS = {32: 64, 64: 32}  # lanes per accumulator by element width: 256 bytes either way
WIDTH = {types.float32: LANES_BY_BITS[32], types.float64: LANES_BY_BITS[64]}
_I32 = ir.IntType(32)


class Lanes(types.Type):
    """A vector of ``count`` accumulators of ``dtype`` (Numba type; its value is an LLVM vector)."""

    def __init__(self, dtype, count: int):
        self.dtype, self.count = dtype, count
        super().__init__(name=f"Lanes({dtype}, {count})")


@register_default(Lanes)
class _LanesModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.count))


def _lanes_of(dtype):
    return Lanes(dtype, WIDTH[dtype]) if dtype in WIDTH else None


def _block_pointer(context, builder, array_type, array, start, vector_type):
    """The address of ``array[start]`` (a C-contiguous 1-D array) as a pointer to ``vector_type``."""
    ary = context.make_array(array_type)(context, builder, array)
    return builder.bitcast(builder.gep(ary.data, [start]), vector_type.as_pointer())


@intrinsic
def lanes_array(typingctx, like):
    """A C-contiguous stack array of W values of ``like``'s dtype (:data:`WIDTH`: the lanes of a sum; uninitialised;
    its storage is allocated once in the function's entry block)."""
    if like not in WIDTH:
        return None
    ret = types.Array(like, 1, "C")

    def codegen(context, builder, sig, args):
        element = context.get_data_type(like)
        storage = cgutils.alloca_once(builder, ir.ArrayType(element, WIDTH[like]))
        arr = context.make_array(ret)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(element))
        context.populate_array(arr, data=builder.bitcast(storage, element.as_pointer()),
                               shape=[context.get_constant(types.intp, WIDTH[like])], strides=[itemsize],
                               itemsize=itemsize, meminfo=None)
        return arr._getvalue()

    return ret(like), codegen


# LLVM's function attribute for the vector width its loop vectoriser picks (bits).
WIDE_VECTORS = '"prefer-vector-width"="512"'


def prefer_wide_vectors(function) -> None:
    """Let LLVM's loop vectoriser use 512-bit vectors in ``function`` (an ``llvmlite.ir.Function``).

    LLVM tunes AVX-512 cores it knows (Skylake-X to Sapphire Rapids) to vectorise loops 256 bits wide unless a
    function says otherwise, so a row kernel's element loops (exp, the centring, the output pass) ran eight
    floats an instruction while its lane sums and torch's kernels run sixteen: softmax 0.63 -> 0.49 us a row of
    1024 floats held in cache, layer norm 0.26 -> 0.20, on one core of this project's Xeon VM. Element code is
    the same scalar code at any width (no float operation is reassociated), so results do not change; on a
    machine without AVX-512 the attribute is only a preference LLVM cannot take. llvmlite knows no string
    attributes, so the attribute is added to its set directly; where that set is not one, nothing is added."""
    attrs = function.attributes
    if isinstance(attrs, set):
        set.add(attrs, WIDE_VECTORS)


@intrinsic
def lanes_fill(typingctx, value):
    """Every lane ``value`` (the identity). A function that sums in lanes has element loops worth the wide
    vectors (:func:`prefer_wide_vectors`): it asks for them here, once for the whole function."""
    lanes = _lanes_of(value)
    if lanes is None:
        return None

    def codegen(context, builder, sig, args):
        prefer_wide_vectors(builder.function)
        vector_type = context.get_value_type(lanes)
        one = builder.insert_element(ir.Constant(vector_type, ir.Undefined), args[0], ir.Constant(_I32, 0))
        return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(_I32, lanes.count), [0] * lanes.count))

    return lanes(value), codegen


def _row(acc, block) -> bool:
    """Whether ``block`` is a 1-D array of ``acc``'s dtype (the only arrays the loads may read)."""
    return isinstance(acc, Lanes) and isinstance(block, types.Array) and block.dtype == acc.dtype and block.ndim == 1


def _contiguous(acc, block) -> bool:
    return _row(acc, block) and block.layout == "C"


def _strided_load(context, builder, array_type, array, start, vector_type):
    """``array[start : start + W]`` as a vector: one vector load where the array's stride is its itemsize (always
    for a C-contiguous array), else W scalar loads at the stride."""
    ary = context.make_array(array_type)(context, builder, array)
    align = context.get_abi_sizeof(vector_type.element)
    if array_type.layout == "C":
        ptr = builder.bitcast(builder.gep(ary.data, [start]), vector_type.as_pointer())
        return builder.load(ptr, align=align)
    stride = cgutils.unpack_tuple(builder, ary.strides, 1)[0]
    itemsize = ir.Constant(stride.type, align)
    base = builder.ptrtoint(ary.data, stride.type)
    result = cgutils.alloca_once(builder, vector_type)
    with builder.if_else(builder.icmp_signed("==", stride, itemsize)) as (dense, strided):
        with dense:
            ptr = builder.inttoptr(builder.add(base, builder.mul(start, itemsize)), vector_type.as_pointer())
            builder.store(builder.load(ptr, align=align), result)
        with strided:
            v = ir.Constant(vector_type, ir.Undefined)
            element_ptr = vector_type.element.as_pointer()
            for i in range(vector_type.count):
                offset = builder.mul(builder.add(start, ir.Constant(start.type, i)), stride)
                ptr = builder.inttoptr(builder.add(base, offset), element_ptr)
                v = builder.insert_element(v, builder.load(ptr, align=align), ir.Constant(_I32, i))
            builder.store(v, result)
    return builder.load(result)


@intrinsic
def lanes_add(typingctx, acc, block, start):
    """``acc`` plus ``block[start : start + W]``, lane by lane (the caller keeps ``start + W`` within it)."""
    if not _row(acc, block):
        return None

    def codegen(context, builder, sig, args):
        lanes, arr, first = args
        return builder.fadd(lanes, _strided_load(context, builder, sig.args[1], arr, first, lanes.type))

    return acc(acc, block, types.intp), codegen


@intrinsic
def lanes_load(typingctx, block, start):
    """``block[start : start + W]`` as lanes (the caller keeps ``start + W`` within the C-contiguous ``block``)."""
    lanes = _lanes_of(block.dtype) if isinstance(block, types.Array) and block.ndim == 1 else None
    if lanes is None or block.layout != "C":
        return None

    def codegen(context, builder, sig, args):
        arr, first = args
        vector_type = context.get_value_type(lanes)
        ptr = _block_pointer(context, builder, sig.args[0], arr, first, vector_type)
        return builder.load(ptr, align=context.get_abi_sizeof(vector_type.element))

    return lanes(block, types.intp), codegen


@intrinsic
def lanes_sum(typingctx, acc):
    """The lanes summed by halving (the module docstring's order)."""
    if not isinstance(acc, Lanes):
        return None

    def codegen(context, builder, sig, args):
        (v,) = args
        n = acc.count
        while n > 1:
            half = n // 2
            low = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(_I32, half), list(range(half))))
            high = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(_I32, half), list(range(half, n))))
            v = builder.fadd(low, high)
            n = half
        return builder.extract_element(v, ir.Constant(_I32, 0))

    return acc.dtype(acc), codegen


@intrinsic
def lanes_axpy(typingctx, acc, x, row, start):
    """``acc + x * row[start : start + W]``, lane by lane: one rounded product and one rounded sum per lane (an
    ``fmul`` then an ``fadd``, never contracted), so lane ``j`` is the scalar ``acc[j] + x * row[start + j]``.
    A contraction's loop nest keeps W outputs of a row in registers across its reduced loop with it (the caller
    keeps ``start + W`` within the C-contiguous ``row``)."""
    if not (_contiguous(acc, row) and x == acc.dtype):
        return None

    def codegen(context, builder, sig, args):
        lanes, scalar, arr, first = args
        one = builder.insert_element(ir.Constant(lanes.type, ir.Undefined), scalar, ir.Constant(_I32, 0))
        splat = builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(_I32, lanes.type.count),
                                                             [0] * lanes.type.count))
        values = _strided_load(context, builder, sig.args[2], arr, first, lanes.type)
        return builder.fadd(lanes, builder.fmul(splat, values))

    return acc(acc, x, row, types.intp), codegen


@intrinsic
def lanes_store(typingctx, acc, row, start):
    """``row[start : start + W] = acc`` (the caller keeps ``start + W`` within the C-contiguous ``row``)."""
    if not _contiguous(acc, row):
        return None

    def codegen(context, builder, sig, args):
        lanes, arr, first = args
        ptr = _block_pointer(context, builder, sig.args[1], arr, first, lanes.type)
        builder.store(lanes, ptr, align=context.get_abi_sizeof(lanes.type.element))
        return context.get_dummy_value()

    return types.none(acc, row, types.intp), codegen
