"""Run-time checks as data (intent_trace.codegen.checks): every check fails with one exception and one message on
every executable target, the message the check's own template gives for the values the failure had (written
here by hand), and the caller's arrays are left unchanged."""
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.codegen import checks as C
from intent_trace.graph import ops


@intent.kernel
def full_of(n: I.index, y: I.InOut[I.f32, ("N",)]):
    y[I.domain(0, n)] = I.full((n,), 1.0, I.f32)


@intent.kernel
def reshaped(x: I.In[I.f32, ("N",)], n: I.index, y: I.InOut[I.f32, ("M",)]):
    y[I.domain(0, n)] = I.reshape(x[:], (n,))


@intent.kernel
def sliced(x: I.In[I.f32, ("N", "M")], b: I.index, e: I.index, y: I.InOut[I.f32, (1,)]):
    y[0] = I.reduce.sum(I.reduce.sum(x[:, :][:, b:e], axis=1), axis=0)


@intent.kernel
def picked(x: I.In[I.f32, ("N", "M")], p: I.index, y: I.InOut[I.f32, ("N",)]):
    y[:] = x[:, :][:, p]


@intent.kernel
def stepped(y: I.InOut[I.i32, ("N",)], s: I.index):
    for i in I.domain(0, y.shape[0], s):
        y[i] = 1


@intent.kernel
def sub(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)], b: I.index, e: I.index):
    d = I.domain(0, x.shape[0])
    for i in d[b:e]:
        y[i] = x[i]


@intent.kernel
def gathered(x: I.In[I.f32, ("N", "M")], idx: I.In[I.i32, ("K",)], y: I.InOut[I.f32, ("K", "M")]):
    y[:, :] = x[idx[:], :]


@intent.kernel
def scattered(x: I.In[I.f32, ("K",)], idx: I.In[I.i32, ("K",)], y: I.InOut[I.f32, ("N",)]):
    y[idx[:]] = x[:]


@intent.kernel
def buffered(n: I.index, y: I.InOut[I.i32, ("N",)]):
    b = I.buffer((n,), I.i32, init=7)
    y[I.domain(0, n)] = b[I.domain(0, n)]


_BUFFER_LABEL = "buffer@test_checks.py:%d" % next(
    n for n, line in enumerate(open(__file__), 1) if line.strip() == "b = I.buffer((n,), I.i32, init=7)")


@intent.kernel
def counted(v: I.In[I.i32, ("N",)], out: I.InOut[I.u32, (6,)]):
    out[:] = I.histogram(v[:], bins=6, count_dtype=I.u32)


@intent.kernel
def random_bits(c: I.In[I.i32, ("N",)], y: I.InOut[I.u32, ("N",)], seed: I.u64):
    d = I.domain(0, c.shape[0])
    y[d] = I.random.bits(seed, c[d])


@intent.kernel
def stated(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("H",)], out: I.InOut[I.f32, ("N",)]):
    I.assume_equal(x.shape[0], 2 * y.shape[0])
    out[:] = x[:]


def _stated_sides() -> dict:
    """The sides' texts as the trace recorded them (each names its kernel's file and line)."""
    (node,) = [n for n in stated.trace().body.nodes if n.op is ops.assume_equal]
    return {"lhs": node.attr("lhs"), "rhs": node.attr("rhs")}


@intent.kernel
def counted_runtime(v: I.In[I.i32, ("N",)], out: I.InOut[I.i32, ("B",)]):
    out[:] = I.histogram(v[:], bins=out.shape[0], count_dtype=I.i32)


@intent.kernel
def quantized(x: I.In[I.f32, ("K",)], d: I.InOut[I.f32, ("P",)]):
    d[I.domain(0, x.shape[0] // 256)] = I.quantize(x[:], format=I.quant.q8_k).d


@intent.kernel
def mx_carriers(a: I.In[I.u8, ("M", "G", "C")], sa: I.In[I.u8, ("M", "G")], b: I.In[I.u8, ("G", "CR", "N")],
                sb: I.In[I.u8, ("N", "G")], out: I.InOut[I.f32, ("M", "N")]):
    out[:, :] = I.scaled_matmul(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=I.e2m1, rhs_format=I.e4m3,
                                group_size=32, acc_dtype=I.f32)


@intent.kernel
def sparse_extents(c: I.In[I.f32, ("M", "KC")], meta: I.In[I.u8, ("M", "KC")], w: I.In[I.f32, ("K", "N")],
                   out: I.InOut[I.f32, ("M", "N")]):
    out[:, :] = I.sparse_matmul(c[:, :], meta[:, :], w[:, :], format=I.sparse.two_of_four(), acc_dtype=I.f32)


def _mx(c: int, cr: int):
    return (np.full((2, 1, c), 0x22, np.uint8), np.full((2, 1), 127, np.uint8), np.full((1, cr, 3), 0x30, np.uint8),
            np.full((3, 1), 127, np.uint8), np.full((2, 3), 3.0, np.float32))


def _sparse(kc: int, k: int):
    return (np.ones((2, kc), np.float32), np.zeros((2, kc), np.uint8), np.ones((k, 3), np.float32),
            np.full((2, 3), 3.0, np.float32))


def _f32(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1.0


# check, kernel, arguments (the first InOut array is the one checked unchanged), operands, fields
CASES = [
    (C.NEGATIVE_EXTENT, full_of, lambda: (-2, np.full(4, 3.0, np.float32)), (-2,), {"axis": 0}),
    (C.RESHAPE_COUNT, reshaped, lambda: (_f32(6), 4, np.full(8, 3.0, np.float32)), (6, 4), {}),
    (C.SLICE_RANGE, sliced, lambda: (_f32(2, 3), 1, 5, np.full(1, 3.0, np.float32)), (1, 5, 3), {"axis": 1}),
    (C.SLICE_RANGE, sliced, lambda: (_f32(2, 3), -1, 2, np.full(1, 3.0, np.float32)), (-1, 2, 3), {"axis": 1}),
    (C.SLICE_INDEX, picked, lambda: (_f32(2, 3), 3, np.full(2, 3.0, np.float32)), (3, 3), {"axis": 1}),
    (C.SLICE_INDEX, picked, lambda: (_f32(2, 3), -1, np.full(2, 3.0, np.float32)), (-1, 3), {"axis": 1}),
    (C.DOMAIN_STEP, stepped, lambda: (np.full(4, 3, np.int32), -2), (-2,), {}),
    (C.SUBREGION_NEGATIVE, sub, lambda: (_f32(4), np.full(4, 3.0, np.float32), -1, 2), (-1, 2), {}),
    (C.SUBREGION_PAST, sub, lambda: (_f32(4), np.full(4, 3.0, np.float32), 2, 5), (2, 5, 4), {}),
    (C.VIEW_COORDINATE, gathered, lambda: (_f32(3, 2), np.array([0, 3], np.int32), np.full((2, 2), 3.0, np.float32)),
     (3, 3), {"axis": 0, "view": "x"}),
    (C.UNIQUE_STORE_TWICE, scattered,
     lambda: (_f32(3), np.array([1, 0, 1], np.int32), np.full(4, 3.0, np.float32)), (), {"view": "y"}),
    (C.BUFFER_NEGATIVE_EXTENT, buffered, lambda: (-3, np.full(4, 3, np.int32)), (-3,), {"axis": 0, "view": None}),
    (C.HISTOGRAM_BIN, counted, lambda: (np.array([0, 5, 6, 1], np.int32), np.full(6, 3, np.uint32)), (6,),
     {"bins": 6}),
    (C.RANDOM_COUNTER, random_bits, lambda: (np.array([0, 5, -3, 2], np.int32), np.full(4, 3, np.uint32), 1), (-3,),
     {}),
    # extent relations a run decides for dynamic extents (issue 15 items 2-4)
    (C.EXTENT_EQUAL, stated, lambda: (_f32(5), _f32(2), np.full(5, 3.0, np.float32)), (5, 4), _stated_sides),
    (C.HISTOGRAM_BINS, counted_runtime, lambda: (np.array([0, 1], np.int32), np.zeros(0, np.int32)), (0,),
     {"bins": "B"}),
    (C.HISTOGRAM_RUNTIME_BIN, counted_runtime, lambda: (np.array([0, 2, 3, 1], np.int32), np.full(3, 7, np.int32)),
     (3, 3), {}),
    (C.QUANTIZE_EXTENT, quantized, lambda: (_f32(300), np.full(2, 3.0, np.float32)), (300,), {"extent": "K"}),
    (C.SCALED_CARRIER, mx_carriers, lambda: _mx(8, 32), (8,),
     {"axis": 2, "group": 32, "want": 16, "role": "lhs", "extent": "C", "fmt": "e2m1"}),
    (C.SPARSE_REDUCTION, sparse_extents, lambda: _sparse(3, 6), (6,),
     {"axis": 0, "group": 4, "fmt": "I.sparse.two_of_four()", "extent": "K"}),
    (C.SPARSE_COMPRESSED, sparse_extents, lambda: _sparse(3, 8), (3, 8, 4),
     {"axis": 1, "rhs_axis": 0, "keep": 2, "group": 4, "fmt": "I.sparse.two_of_four()", "extent": " (KC)"}),
]

# Checks some implementation still spells by hand with another message: the files to convert, per check.
PENDING = {
    C.SPARSE_POSITION: "oracle/generic_scaled.py ('sparse contract {fmt!r}: ...'), backends/tilelang/sparse.py",
    C.SPARSE_ORDER: "oracle/generic_scaled.py ('metadata positions within a group must be ...'), "
                    "backends/tilelang/sparse.py",
}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].name}{c[3]}")
def test_a_failed_check_raises_its_message_on_every_target(run, case):
    check, kernel, make, operands, fields = case
    args = make()
    fields = fields() if callable(fields) else fields
    if "view" in fields and fields["view"] is None:  # a buffer's label: its file and line
        fields = {**fields, "view": _BUFFER_LABEL}
    before = [np.array(a, copy=True) for a in args if isinstance(a, np.ndarray)]
    with pytest.raises(check.exception) as e:
        run(kernel, *args)
    assert str(e.value) == check.error(*operands, **fields).args[0]
    for a, b in zip((a for a in args if isinstance(a, np.ndarray)), before):
        np.testing.assert_array_equal(a, b)


def test_every_check_that_compiled_targets_make_is_exercised():
    generic_only = {C.EXTENT_RANGE, C.DOMAIN_RANGE}  # int64 on compiled targets: these cannot fail there
    assert {case[0] for case in CASES} == set(C.CHECKS.values()) - generic_only - set(PENDING)


def test_messages_written_by_hand():
    """The templates against text written out (a changed template is a changed message users see)."""
    assert str(C.SLICE_RANGE.error(1, 5, 3, axis=1)) == "slice [1:5] is outside axis 1 of extent 3 (no clamping)"
    assert str(C.RESHAPE_COUNT.error(6, 4)) == "reshape of 6 elements into a shape of 4 elements"
    assert str(C.EXTENT_RANGE.error(2 ** 63, axis=2)) == \
        "extent 9223372036854775808 (axis 2) does not fit the index type (at most 9223372036854775807)"


@pytest.mark.parametrize("text", ["k{0}.py", "k{x}", "{view}", "}{"])
def test_user_text_is_never_read_as_a_template(text):
    assert str(C.VIEW_COORDINATE.error(9, 4, axis=0, view=text)) == f"{text}: coordinate 9 on axis 0 is outside its extent 4"
    assert C.VIEW_COORDINATE.site(axis=0, view=text).message == "{view}: coordinate {0} on axis 0 is outside its extent {1}"


def test_static_fields_are_ints_only():
    with pytest.raises(TypeError, match="axis"):
        C.NEGATIVE_EXTENT.site(axis="0}{1")
    with pytest.raises(TypeError, match="axis"):
        C.NEGATIVE_EXTENT.site(axis=True)
    with pytest.raises(TypeError, match="static fields"):
        C.NEGATIVE_EXTENT.site()
    with pytest.raises(TypeError, match="operands"):
        C.SUBREGION_PAST.error(1, 2)
