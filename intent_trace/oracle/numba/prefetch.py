"""Software prefetch of the next row of a row kernel's input (issue 19).

A row group (:mod:`.rows`) reads row ``r`` of its inputs in its first pass and writes row ``r`` of its output in
its last. A row of 1024 float32 is one 4 KiB page, and a hardware stream prefetcher stops at a page's end, so
each row's first pass started with its loads missing the cache. Prefetching row ``r + 1`` while the last pass
streams row ``r``'s output overlaps that latency with the stores: layer norm of 4096 x 1024 float32 on one core
of the AMD EPYC (Zen 3) VM 1.80 -> 1.45 ms (torch's own 1.97), softmax 2-3% (its passes are bound by ``exp``).

:func:`prefetch_row` is a hint and nothing else: LLVM's ``llvm.prefetch`` never faults and changes no value, and
it is issued only for a row inside the array and only for at most :data:`MAX_BYTES` of it.
"""
from __future__ import annotations

import llvmlite.ir as ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

LINE = 64  # bytes a prefetch brings in (a cache line on x86-64 and on Apple's cores' L1 alike, at least)
MAX_BYTES = 8192  # the most of a row prefetched: two 4 KiB pages, far below any L1 data cache's share for it
_I32 = ir.IntType(32)


@intrinsic
def prefetch_row(typingctx, array, row):
    """Ask the cache for the first bytes of ``array[row]`` (up to :data:`MAX_BYTES`) when ``array`` is at least
    2-D, ``row`` is one of its rows and that row is contiguous (every axis after the first laid out C-order, checked
    at run time for a non-C-contiguous array); otherwise nothing."""
    if not isinstance(array, types.Array) or array.ndim < 2 or not isinstance(row, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        arr, r = args
        ary = context.make_array(sig.args[0])(context, builder, arr)
        shape = cgutils.unpack_tuple(builder, ary.shape, array.ndim)
        strides = cgutils.unpack_tuple(builder, ary.strides, array.ndim)
        intp = shape[0].type
        r = context.cast(builder, r, sig.args[1], types.intp)
        itemsize = ir.Constant(intp, context.get_abi_sizeof(context.get_data_type(array.dtype)))
        ok = builder.and_(builder.icmp_signed(">=", r, ir.Constant(intp, 0)), builder.icmp_signed("<", r, shape[0]))
        span = itemsize
        for k in range(array.ndim - 1, 0, -1):  # the row's axes C-order: stride k == itemsize * shape[k+1:]
            ok = builder.and_(ok, builder.icmp_signed("==", strides[k], span))
            span = builder.mul(span, shape[k])
        nbytes = builder.select(builder.icmp_signed("<", span, ir.Constant(intp, MAX_BYTES)), span,
                                ir.Constant(intp, MAX_BYTES))
        i8p = ir.IntType(8).as_pointer()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, _I32, _I32, _I32]),
                                            "llvm.prefetch.p0i8")
        with builder.if_then(ok, likely=True):
            start = builder.add(builder.ptrtoint(ary.data, intp), builder.mul(r, strides[0]))
            with cgutils.for_range_slice(builder, ir.Constant(intp, 0), nbytes, ir.Constant(intp, LINE)) as (off, _):
                address = builder.inttoptr(builder.add(start, off), i8p)
                # read (0), keep in every cache level (3), data cache (1)
                builder.call(fn, [address, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()

    return types.none(array, row), codegen
