"""I.atomic (spec §16, numerics T9, DESIGN §3) on every executable target, against NumPy references.

Covers counting with heavy collisions under ``parallel`` (exact integer add, max/min, and/or/xor,
wrap-around), compare-exchange letting exactly one point claim each slot, exchange returning the
previous values, f32 add/max/min (IEEE maximum/minimum), load/store with every legal order, the
order rules (every illegal order, the derived CAS failure order, no ``scope=``), the address taking
the place of the indexing (no ``read`` left behind), the errors for anything that is not an element
reference, out-of-range coordinates (IndexError, caller arrays unchanged) and the cpu parallel build.
"""

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

RNG = np.random.default_rng(16)
NP = {I.i8: np.int8, I.i32: np.int32, I.i64: np.int64, I.u8: np.uint8, I.u32: np.uint32, I.f32: np.float32}
RMW_ORDERS = ("relaxed", "acquire", "release", "acq_rel")
FAILURE = {"relaxed": "relaxed", "acquire": "acquire", "release": "relaxed", "acq_rel": "acquire"}
SURFACE = {"exchange": "exchange", "add": "add", "max": "max", "min": "min", "and": "and_", "or": "or_", "xor": "xor"}

_KERNELS: dict = {}


def rmw_kernel(dtype, kind, order="relaxed"):
    """Every point combines its value into dest[idx[i]] and records the old value it saw."""
    key = (dtype, kind, order)
    if key not in _KERNELS:
        fn = getattr(I.atomic, SURFACE[kind])

        @intent.kernel
        def k(idx: I.In[I.i32, ("K",)], v: I.In[dtype, ("K",)], dest: I.InOut[dtype, ("N",)],
              old: I.Out[dtype, ("K",)]):
            for i in I.parallel(I.domain(0, idx.shape[0])):
                old[i] = fn(dest[idx[i]], v[i], order=order)

        _KERNELS[key] = k
    return _KERNELS[key]


def _ints(dtype, n, lo=None, hi=None):
    info = np.iinfo(NP[dtype])
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return RNG.integers(lo, hi, n, endpoint=True, dtype=np.int64).astype(NP[dtype])


def _assert_olds_are_a_history(kind, dest0, idx, v, old, final):
    """The old values chain: whatever order the points of one element ran in, each point turned the value
    it saw into a new one, so {initial} + {new values} and {values seen} + {final} are the same multiset."""
    for e in range(dest0.size):
        points = np.flatnonzero(idx == e)
        produced = [_apply(kind, old[p], v[p]) for p in points]
        assert _multiset([dest0[e], *produced]) == _multiset([*old[points], final[e]]), e


def _multiset(values):
    return sorted(np.asarray(values).view(f"u{np.asarray(values).dtype.itemsize}").tolist())


def _apply(kind, a, b):
    with np.errstate(over="ignore"):
        return {"add": lambda: a + b, "max": lambda: max(a, b), "min": lambda: min(a, b), "and": lambda: a & b,
                "or": lambda: a | b, "xor": lambda: a ^ b, "exchange": lambda: b}[kind]()


UFUNC = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
         "xor": np.bitwise_xor}


# --- read-modify-writes with collisions ------------------------------------------------------------------------

@intent.kernel
def histogram(v: I.In[I.i32, ("K",)], counts: I.Out[I.i32, ("N",)]):
    counts[I.domain(0, counts.shape[0])] = 0  # the kernel initialises its Out view, then counts atomically
    for i in I.parallel(I.domain(0, v.shape[0])):
        I.atomic.add(counts[v[i]], 1, order="relaxed")


def test_atomic_add_counts_like_bincount_under_parallel(run):
    v = RNG.integers(0, 5, 700).astype(np.int32)  # ~140 points per bin, one bin left empty
    v[v == 3] = 2
    counts = np.full(6, -1, np.int32)
    run(histogram, v, counts)
    np.testing.assert_array_equal(counts, np.bincount(v, minlength=6))


@pytest.mark.parametrize("dtype,kind", [(I.i32, "add"), (I.u8, "add"), (I.i64, "add"), (I.i8, "max"),
                                        (I.u32, "max"), (I.i32, "min"), (I.u32, "min"), (I.i64, "and"),
                                        (I.u8, "or"), (I.i32, "xor")])
def test_atomic_rmw_integer_kinds_are_exact_with_collisions(run, dtype, kind):
    n, k = 5, 120
    idx = RNG.integers(0, n - 1, k).astype(np.int32)  # the last element is never hit
    v = _ints(dtype, k)
    dest = _ints(dtype, n)
    dest0 = dest.copy()
    want = dest.copy()
    UFUNC[kind].at(want, idx, v)  # integer add wraps modulo 2^bits in NumPy as in T2
    old = np.zeros(k, NP[dtype])
    run(rmw_kernel(dtype, kind), idx, v, dest, old)
    np.testing.assert_array_equal(dest, want)
    _assert_olds_are_a_history(kind, dest0, idx, v, old, dest)


def test_atomic_max_min_compare_unsigned_and_signed_values_by_their_dtype(run):
    # 0xF0000000 is the largest u32 here but would be the smallest as i32: umax/umin, not max/min
    idx = np.array([0, 0, 0, 1, 1, 1], np.int32)
    v = np.array([0xF0000000, 5, 0x7FFFFFFF, 0xF0000000, 3, 0x80000000], np.uint32)
    dest = np.array([7, 7], np.uint32)
    old = np.zeros(6, np.uint32)
    run(rmw_kernel(I.u32, "max"), idx, v, dest, old)
    np.testing.assert_array_equal(dest, [0xF0000000, 0xF0000000])
    dest = np.array([7, 7], np.uint32)
    run(rmw_kernel(I.u32, "min"), idx, v, dest, old)
    np.testing.assert_array_equal(dest, [5, 3])
    iv = v.view(np.int32)
    dest = np.array([7, 7], np.int32)
    run(rmw_kernel(I.i32, "min"), idx, iv, dest, old.view(np.int32))
    np.testing.assert_array_equal(dest, [np.int32(-268435456), np.int32(-2147483648)])


@intent.kernel
def histogram_2d(a: I.In[I.i32, ("K",)], b: I.In[I.i64, ("K",)], w: I.In[I.i64, ("K",)],
                 h: I.InOut[I.i64, ("R", "C")], peak: I.InOut[I.i64, ("R", "C")], total: I.InOut[I.i64, (1,)]):
    for i in I.parallel(I.domain(0, a.shape[0])):
        I.atomic.add(h[a[i], b[i]], w[i], order="acq_rel")
        I.atomic.max(peak[a[i], b[i]], w[i], order="release")
        I.atomic.add(total[0], w[i], order="relaxed")  # every point hits one element (a literal index)


def test_atomic_on_2d_elements_and_one_shared_element(run):
    k = 300
    a = RNG.integers(0, 3, k).astype(np.int32)
    b = RNG.integers(0, 4, k).astype(np.int64)
    w = RNG.integers(-1000, 1000, k).astype(np.int64)
    h = np.zeros((3, 4), np.int64)
    peak = np.full((3, 4), -5000, np.int64)
    total = np.array([7], np.int64)
    run(histogram_2d, a, b, w, h, peak, total)
    want_h, want_peak = np.zeros((3, 4), np.int64), np.full((3, 4), -5000, np.int64)
    np.add.at(want_h, (a, b), w)
    np.maximum.at(want_peak, (a, b), w)
    np.testing.assert_array_equal(h, want_h)
    np.testing.assert_array_equal(peak, want_peak)
    assert total[0] == 7 + w.sum()


# --- compare-exchange --------------------------------------------------------------------------------------------

@intent.kernel
def claim(v: I.In[I.i32, ("K",)], slots: I.InOut[I.i32, ("N",)], wins: I.InOut[I.i32, ("N",)],
          seen: I.Out[I.i32, ("K",)], won: I.Out[I.bool, ("K",)]):
    for i in I.parallel(I.domain(0, v.shape[0])):
        me = I.cast(i, I.i32) + 1
        r = I.atomic.compare_exchange(slots[v[i]], 0, me, order="acq_rel")
        I.atomic.add(wins[v[i]], I.cast(r.success, I.i32), order="relaxed")
        seen[i] = r.old_value
        won[i] = r.success


def test_compare_exchange_lets_exactly_one_point_claim_each_slot(run):
    n, k = 9, 400
    v = RNG.integers(0, n - 2, k).astype(np.int32)  # heavy contention; slots n-2, n-1 never targeted
    slots = np.zeros(n, np.int32)
    slots[-1] = 77  # an untargeted slot keeps its value
    wins = np.zeros(n, np.int32)
    seen = np.full(k, -1, np.int32)
    won = np.zeros(k, bool)
    run(claim, v, slots, wins, seen, won)
    targeted = np.unique(v)
    np.testing.assert_array_equal(wins[targeted], 1)
    np.testing.assert_array_equal(np.delete(wins, targeted), 0)
    assert slots[-1] == 77 and slots[-2] == 0
    for s in targeted:
        winner = slots[s] - 1
        assert v[winner] == s and won[winner] and seen[winner] == 0  # the stored id targeted this slot
        losers = np.flatnonzero((v == s) & ~won)
        np.testing.assert_array_equal(seen[losers], slots[s])  # each loser saw the winner's id
    assert won.sum() == targeted.size


@intent.kernel
def cas_chain(expected: I.In[I.u8, ("K",)], desired: I.In[I.u8, ("K",)], cell: I.InOut[I.u8, (1,)],
              old: I.Out[I.u8, ("K",)], ok: I.Out[I.bool, ("K",)]):
    for i in I.domain(0, expected.shape[0]):  # ordered: each step sees the previous one
        r = I.atomic.compare_exchange(cell[0], expected[i], desired[i], order="release")
        old[i] = r.old_value
        ok[i] = r.success


def test_compare_exchange_in_program_order_matches_a_sequential_reference(run):
    expected = np.array([3, 1, 2, 200, 9, 200, 255], np.uint8)
    desired = np.array([9, 2, 200, 255, 0, 4, 5], np.uint8)
    cell = np.array([1], np.uint8)
    old, ok = np.zeros(7, np.uint8), np.zeros(7, bool)
    run(cas_chain, expected, desired, cell, old, ok)
    cur, want_old, want_ok = 1, [], []
    for e, d in zip(expected, desired):
        want_old.append(cur)
        want_ok.append(cur == e)
        cur = d if cur == e else cur
    np.testing.assert_array_equal(old, want_old)
    np.testing.assert_array_equal(ok, want_ok)
    assert cell[0] == cur == 5 and 0 < sum(want_ok) < len(want_ok)


# --- exchange ----------------------------------------------------------------------------------------------------

@intent.kernel
def exchange_in_order(idx: I.In[I.i32, ("K",)], v: I.In[I.i64, ("K",)], dest: I.InOut[I.i64, ("N",)],
                      old: I.Out[I.i64, ("K",)]):
    for i in I.domain(0, idx.shape[0]):
        old[i] = I.atomic.exchange(dest[idx[i]], v[i], order="acquire")


def test_exchange_returns_the_previous_values(run):
    idx = np.array([0, 2, 0, 0, 2, 1], np.int32)
    v = np.array([10, 20, 30, 40, 50, 60], np.int64)
    dest = np.array([-1, -2, -3], np.int64)
    old = np.zeros(6, np.int64)
    run(exchange_in_order, idx, v, dest, old)
    np.testing.assert_array_equal(old, [-1, -3, 10, 30, 20, -2])
    np.testing.assert_array_equal(dest, [40, 60, 50])


def test_exchange_under_parallel_hands_every_value_to_exactly_one_point(run):
    n, k = 4, 200
    idx = RNG.integers(0, n, k).astype(np.int32)
    v = np.arange(100, 100 + k, dtype=np.int32)
    dest = np.array([-1, -2, -3, -4], np.int32)
    old = np.zeros(k, np.int32)
    run(rmw_kernel(I.i32, "exchange"), idx, v, dest, old)
    for e in range(n):
        points = np.flatnonzero(idx == e)
        # the chain initial -> ... -> final: the values seen plus the final one are the initial plus the written
        assert sorted(old[points].tolist() + [dest[e]]) == sorted([-(e + 1)] + v[points].tolist())


# --- f32 -----------------------------------------------------------------------------------------------------------

def test_f32_atomic_add_of_exact_values_is_exact(run):
    n, k = 4, 300
    idx = RNG.integers(0, n, k).astype(np.int32)
    v = (RNG.integers(-64, 64, k) / 8.0).astype(np.float32)  # all partial sums are exact in f32
    dest = np.array([0.5, -1.0, 2.25, 1e3], np.float32)
    want = dest.copy()
    np.add.at(want, idx, v)
    old = np.zeros(k, np.float32)
    run(rmw_kernel(I.f32, "add"), idx, v, dest, old)
    np.testing.assert_array_equal(dest, want)
    _assert_olds_are_a_history("add", np.array([0.5, -1.0, 2.25, 1e3], np.float32), idx, v, old, dest)


@intent.kernel
def f32_in_order(idx: I.In[I.i32, ("K",)], v: I.In[I.f32, ("K",)], mx: I.InOut[I.f32, ("N",)],
                 mn: I.InOut[I.f32, ("N",)], sm: I.InOut[I.f32, ("N",)], old: I.Out[I.f32, ("K", 3)]):
    for i in I.domain(0, idx.shape[0]):
        old[i, 0] = I.atomic.max(mx[idx[i]], v[i], order="relaxed")
        old[i, 1] = I.atomic.min(mn[idx[i]], v[i], order="acq_rel")
        old[i, 2] = I.atomic.add(sm[idx[i]], v[i], order="release")


def test_f32_atomic_max_min_follow_ieee_maximum_minimum_and_add_rounds_once(run):
    nan = np.float32("nan")
    idx = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3], np.int32)
    v = np.array([1.5, 3.0, nan, 2.0, 0.0, -0.0, -7.0, 1e-8, 1.0], np.float32)
    mx = np.array([2.0, 0.0, -0.0, -8.0], np.float32)
    mn = np.array([2.0, 0.0, 0.0, -8.0], np.float32)
    sm = np.array([0.0, 1.0, 0.0, 1.0], np.float32)
    old = np.zeros((9, 3), np.float32)
    run(f32_in_order, idx, v, mx, mn, sm, old)
    np.testing.assert_array_equal(mx, np.array([3.0, nan, 0.0, 1.0], np.float32))
    assert not np.signbit(mx[2])  # -0 < +0
    np.testing.assert_array_equal(mn, np.array([1.5, nan, -0.0, -8.0], np.float32))
    assert np.signbit(mn[2])
    # 1 - 7 + 1e-8 rounds to -6 in f32, then + 1 = -5 (one rounding per addition, in program order)
    np.testing.assert_array_equal(sm, np.array([4.5, nan, 0.0, -5.0], np.float32))
    np.testing.assert_array_equal(old[:, 0], np.array([2.0, 2.0, 0.0, nan, -0.0, 0.0, -8.0, -7.0, 1e-8], np.float32))
    np.testing.assert_array_equal(old[:, 2], np.array([0.0, 1.5, 1.0, nan, 0.0, 0.0, 1.0, -6.0, -6.0], np.float32))


def test_f32_atomic_max_under_parallel_matches_maximum_at(run):
    n, k = 3, 200
    idx = RNG.integers(0, n, k).astype(np.int32)
    v = RNG.standard_normal(k).astype(np.float32)
    dest = np.array([-10.0, 0.5, 10.0], np.float32)
    want = dest.copy()
    np.maximum.at(want, idx, v)
    old = np.zeros(k, np.float32)
    run(rmw_kernel(I.f32, "max"), idx, v, dest, old)
    np.testing.assert_array_equal(dest, want)
    for e in range(n):  # every old value is the element before that point: never above the final maximum
        assert np.all(old[idx == e] <= want[e])


# --- load and store -------------------------------------------------------------------------------------------------

@intent.kernel
def load_store(x: I.In[I.f32, ("N",)], c: I.InOut[I.u32, ("N",)], y: I.Out[I.f32, ("N",)],
               z: I.InOut[I.f32, ("N",)], d: I.Out[I.u32, ("N",)], flag: I.InOut[I.i32, (1,)]):
    for i in I.parallel(I.domain(0, x.shape[0])):
        a = I.atomic.load(x[i], order="acquire")  # loading an In view is allowed
        b = I.atomic.load(c[i], order="relaxed")
        I.atomic.store(z[i], a * 2.0, order="release")
        I.atomic.store(c[i], b + 1, order="relaxed")
        y[i] = a
        d[i] = b
        I.atomic.store(flag[0], 1, order="release")  # every point may store to one element atomically


def test_load_and_store_with_every_legal_order(run):
    x = RNG.standard_normal(9).astype(np.float32)
    c = _ints(I.u32, 9, 0, 2 ** 32 - 2)
    c0 = c.copy()
    y, z, d = np.zeros(9, np.float32), np.zeros(9, np.float32), np.zeros(9, np.uint32)
    flag = np.array([0], np.int32)
    run(load_store, x, c, y, z, d, flag)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, x * np.float32(2.0))
    np.testing.assert_array_equal(d, c0)
    np.testing.assert_array_equal(c, c0 + 1)
    assert flag[0] == 1
    orders = {(n.op.name, n.attr("order")) for n in load_store.trace().walk() if n.op.family == "atomic"}
    assert orders == {("atomic_load", "acquire"), ("atomic_load", "relaxed"), ("atomic_store", "release"),
                      ("atomic_store", "relaxed")}


# --- the graph ------------------------------------------------------------------------------------------------------

def test_the_indexing_becomes_the_atomic_address():
    g = claim.trace()
    nodes = list(g.walk())
    reads = [n for n in nodes if n.op.name == "read"]
    # only the two reads of v (the index values) remain; slots and wins are never read plainly
    assert {n.inputs[0].hint for n in reads} == {"v"}
    cas = next(n for n in nodes if n.op.name == "atomic_compare_exchange")
    add = next(n for n in nodes if n.op.name == "atomic_rmw")
    assert cas.inputs[0].hint == "slots" and add.inputs[0].hint == "wins"
    assert cas.attr("index") == ("point",) and cas.inputs[3] is reads[0].outputs[0]
    assert add.inputs[2] is reads[1].outputs[0]
    assert cas.attr("order") == "acq_rel" and cas.attr("failure_order") == "acquire"
    assert add.attr("kind") == "add" and add.attr("order") == "relaxed"
    text = str(g)
    assert "atomic_compare_exchange slots" in text and "read slots" not in text and "read wins" not in text
    g2 = histogram_2d.trace()
    (h_add,) = [n for n in g2.walk() if n.op.name == "atomic_rmw" and n.inputs[0].hint == "h"]
    assert h_add.attr("index") == ("point", "point") and len(h_add.inputs) == 4
    assert not [n for n in g2.walk() if n.op.name == "read" and n.inputs[0].hint in ("h", "peak", "total")]


@pytest.mark.parametrize("order", RMW_ORDERS)
def test_compare_exchange_records_the_derived_failure_order(order):
    @intent.kernel
    def k(s: I.InOut[I.i32, (4,)], out: I.Out[I.bool, (4,)]):
        for i in I.parallel(I.domain(0, 4)):
            out[i] = I.atomic.compare_exchange(s[i], 1, 2, order=order).success

    (node,) = [n for n in k.trace().walk() if n.op.name == "atomic_compare_exchange"]
    assert node.attr("order") == order and node.attr("failure_order") == FAILURE[order]
    assert node.outputs[0].type.names == ("old_value", "success")


# --- order rules ----------------------------------------------------------------------------------------------------

def _trace_atomic(call):
    @intent.kernel
    def k(x: I.InOut[I.i32, ("N",)], idx: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)], f: I.InOut[I.f32, ("N",)],
          d: I.InOut[I.f64, ("N",)], ro: I.In[I.i32, ("N",)]):
        for i in I.parallel(I.domain(0, x.shape[0])):
            call(x, idx, y, f, d, ro, i)

    return k.trace()


ILLEGAL_ORDERS = [
    ("load", lambda x, i, o: I.atomic.load(x[i], order=o), ("release", "acq_rel", "seq_cst", "consume"),
     "relaxed, acquire"),
    ("store", lambda x, i, o: I.atomic.store(x[i], 1, order=o), ("acquire", "acq_rel", "seq_cst"),
     "relaxed, release"),
    *[(name, (lambda name: lambda x, i, o: getattr(I.atomic, name)(x[i], 1, order=o))(name), ("seq_cst", "consume"),
       "relaxed, acquire, release, acq_rel") for name in SURFACE.values()],
    ("compare_exchange", lambda x, i, o: I.atomic.compare_exchange(x[i], 0, 1, order=o), ("seq_cst", "Relaxed"),
     "relaxed, acquire, release, acq_rel"),
]


@pytest.mark.parametrize("name,call,orders,allowed", ILLEGAL_ORDERS, ids=[c[0] for c in ILLEGAL_ORDERS])
def test_every_illegal_order_is_a_trace_error_naming_the_op_and_the_allowed_orders(name, call, orders, allowed):
    for order in (*orders, None, 1):
        with pytest.raises(TraceError) as e:
            _trace_atomic(lambda x, idx, y, f, d, ro, i: call(x, i, order))
        message = str(e.value)
        assert f"I.atomic.{name}" in message and allowed in message, message
        assert "test_atomics.py" in message  # located at the user's line


@pytest.mark.parametrize("name,call", [
    ("load", lambda x, i: I.atomic.load(x[i], order="relaxed", scope="device")),
    ("add", lambda x, i: I.atomic.add(x[i], 1, order="relaxed", scope="block")),
    ("compare_exchange", lambda x, i: I.atomic.compare_exchange(x[i], 0, 1, order="acq_rel", scope="system")),
])
def test_atomics_take_no_scope(name, call):
    with pytest.raises(TypeError, match=r"scope"):
        _trace_atomic(lambda x, idx, y, f, d, ro, i: call(x, i))


def test_the_atomic_namespace_exposes_the_surface_only():
    for name in ("load", "store", "add", "exchange", "max", "min", "and_", "or_", "xor", "compare_exchange"):
        assert callable(getattr(I.atomic, name))
    for name in ("and", "sub", "fetch_add", "FAILURE_ORDER", "current"):
        with pytest.raises(AttributeError):
            getattr(I.atomic, name)


# --- errors ---------------------------------------------------------------------------------------------------------

def _plain_ref(x, idx, y, f, d, ro, i):
    r = x[i]
    y[i] = r  # the reference's value is used before the atomic
    I.atomic.add(r, 1, order="relaxed")


def _buffer_ref(x, idx, y, f, d, ro, i):
    b = I.buffer((4,), I.i32, init=0)
    I.atomic.add(b[0], 1, order="relaxed")


@pytest.mark.parametrize("call,pattern", [
    (lambda x, idx, y, f, d, ro, i: I.atomic.add(3, 1, order="relaxed"), r"address of a view element.*Python number"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.add(x[I.domain(0, 2)], 1, order="relaxed"), r"one element.*tensor"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.add(x[i] + 1, 1, order="relaxed"), r"computed by `add`"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.load(I.cast(i, I.i32), order="relaxed"), r"computed by `cast`"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.store(x, 1, order="relaxed"), r"address of a view element.*ViewProxy"),
    (_plain_ref, r"already used"),
    (_buffer_ref, r"logical buffer"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.add(ro[i], 1, order="relaxed"), r"ro, an In view"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.store(ro[i], 1, order="release"), r"ro, an In view"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.compare_exchange(ro[i], 0, 1, order="relaxed"), r"ro, an In view"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.add(x[i], I.cast(1, I.i64), order="relaxed"), r"I\.cast\(value, I\.i32\)"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.compare_exchange(x[i], 0, I.cast(1.0, I.f32), order="relaxed"),
     r"desired is f32.*I\.cast\(desired, I\.i32\)"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.add(x[i], 1.5, order="relaxed"), r"not an integer"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.add(x[i], 2 ** 40, order="relaxed"), r"does not fit i32"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.add(x[i], idx[I.domain(0, 2)], order="relaxed"), r"one scalar"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.xor(f[i], 1.0, order="relaxed"), r"integer view.*f32"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.exchange(f[i], 1.0, order="relaxed"), r"integer view.*f32"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.compare_exchange(f[i], 0.0, 1.0, order="relaxed"), r"integer view"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.add(d[i], 1.0, order="relaxed"), r"f64"),
    (lambda x, idx, y, f, d, ro, i: I.atomic.load(d[i], order="relaxed"), r"integer or f32 view.*f64"),
])
def test_anything_but_an_element_reference_or_a_matching_value_is_a_trace_error(call, pattern):
    with pytest.raises(TraceError, match=pattern) as e:
        _trace_atomic(call)
    assert "test_atomics.py" in str(e.value)


def test_bool_views_have_no_atomics():
    @intent.kernel
    def k(b: I.InOut[I.bool, ("N",)]):
        for i in I.parallel(I.domain(0, b.shape[0])):
            I.atomic.or_(b[i], True, order="relaxed")

    with pytest.raises(TraceError, match=r"I\.atomic\.or_ needs an integer view; b holds bool"):
        k.trace()


def test_a_reference_made_outside_the_current_region_or_used_twice_is_rejected():
    def outside(x, idx, y, f, d, ro, i):
        r = x[0]
        I.loop(I.domain(0, 2), I.cast(0, I.i32), lambda j, c: I.atomic.add(r, 1, order="relaxed"))

    with pytest.raises(TraceError, match=r"not produced by indexing a view here"):
        _trace_atomic(outside)

    def twice(x, idx, y, f, d, ro, i):
        r = x[i]
        I.atomic.add(r, 1, order="relaxed")
        I.atomic.add(r, 1, order="relaxed")

    with pytest.raises(TraceError, match=r"not produced by indexing a view here"):
        _trace_atomic(twice)

    def itself(x, idx, y, f, d, ro, i):
        r = x[i]
        I.atomic.add(r, r, order="relaxed")

    with pytest.raises(TraceError, match=r"own element reference"):
        _trace_atomic(itself)


# --- out-of-range coordinates -------------------------------------------------------------------------------------

@intent.kernel
def oob(idx: I.In[I.i32, ("K",)], dest: I.InOut[I.i32, ("N",)], old: I.Out[I.i32, ("K",)],
        flags: I.InOut[I.i64, ("N",)], got: I.Out[I.bool, ("K",)]):
    for i in I.parallel(I.domain(0, idx.shape[0])):
        old[i] = I.atomic.add(dest[idx[i]], 1, order="relaxed")
        got[i] = I.atomic.compare_exchange(flags[idx[i] // 2], 0, 1, order="acquire").success


@pytest.mark.parametrize("bad", [5, -1])
def test_out_of_range_coordinates_raise_index_error_and_leave_outputs_unchanged(run, bad):
    idx = np.array([0, 1, 2, bad, 4, 1], np.int32)
    dest = np.arange(5, dtype=np.int32)
    old = np.full(6, -9, np.int32)
    flags = np.zeros(5, np.int64)
    got = np.zeros(6, bool)
    with pytest.raises(IndexError, match=rf"dest: coordinate {bad} on axis 0 is outside its extent 5"):
        run(oob, idx, dest, old, flags, got)
    np.testing.assert_array_equal(dest, np.arange(5))
    np.testing.assert_array_equal(old, -9)
    np.testing.assert_array_equal(flags, 0)
    assert not got.any()


@intent.kernel
def oob_load(idx: I.In[I.i64, ("K",)], src: I.InOut[I.f32, ("N",)], out: I.Out[I.f32, ("K",)]):
    for i in I.parallel(I.domain(0, idx.shape[0])):
        out[i] = I.atomic.load(src[idx[i]], order="acquire")
        I.atomic.store(src[idx[i]], 0.0, order="release")


def test_out_of_range_load_and_store_raise_index_error(run):
    src = np.ones(3, np.float32)
    out = np.full(2, 7.0, np.float32)
    with pytest.raises(IndexError, match=r"src: coordinate 3 on axis 0 is outside its extent 3"):
        run(oob_load, np.array([0, 3], np.int64), src, out)
    np.testing.assert_array_equal(src, 1.0)
    np.testing.assert_array_equal(out, 7.0)
    run(oob_load, np.array([2, 0], np.int64), src, out)
    np.testing.assert_array_equal(out, 1.0)
    np.testing.assert_array_equal(src, [0.0, 1.0, 0.0])


# --- the cpu parallel build ------------------------------------------------------------------------------------------

def test_cpu_parallel_build_gives_exact_results_with_heavy_collisions(target, monkeypatch):
    """Large calls run the prange build: its atomics are hardware atomics, so counts stay exact."""
    from intent_trace.oracle.numba import target as cpu_target

    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0)  # every call takes the parallel build if it has one
    k = 30_000 if target == "cpu" else 3_000
    v = RNG.integers(0, 3, k).astype(np.int32)
    slots = np.zeros(4, np.int32)
    wins = np.zeros(4, np.int32)
    seen, won = np.zeros(k, np.int32), np.zeros(k, bool)
    exe = intent.compile(claim, target=target)
    if target == "cpu" and hasattr(exe.module, "kernel_parallel"):  # the body runs as prange: check it is picked
        assert exe._pick([v, slots, wins, seen, won]) is exe.module.kernel_parallel
    exe(v, slots, wins, seen, won)
    np.testing.assert_array_equal(wins, [1, 1, 1, 0])
    assert won.sum() == 3 and np.all(v[slots[:3] - 1] == [0, 1, 2])
    counts = np.zeros(6, np.int32)
    intent.compile(histogram, target=target)(v, counts)
    np.testing.assert_array_equal(counts, np.bincount(v, minlength=6))
    w = (v + 1).astype(np.float32)  # integer-valued f32: every order of the additions gives the exact sum
    dest, old = np.zeros(3, np.float32), np.zeros(k, np.float32)
    intent.compile(rmw_kernel(I.f32, "add"), target=target)(v, w, dest, old)
    np.testing.assert_array_equal(dest, np.bincount(v, weights=w, minlength=3).astype(np.float32))
