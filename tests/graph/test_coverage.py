"""Coverage of the op registry: every op has a generic rule and a printed form; every surface spelling
builds the registered op it names."""

import re

import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.graph import ops, surface
from intent_trace.proxies.values import ValueProxy


# --- the registry and every backend's rule table -----------------------------------------------------------

# Each backend's composed rule table (OpDef -> rule) and its explicit rejections (OpDef -> reason). The TileLang
# targets share one table (``backends.tilelang.rules``); per-target refusals are by dtype (the target's
# ``supports``) and by helper family (below), not by op.
def _tilelang_tables():
    from intent_trace.backends.tilelang import rules

    return rules.RULES, rules.REJECTED


def _generic_tables():
    from intent_trace.oracle import generic

    return generic.RULES, generic.REJECTED


def _cpu_tables():
    from intent_trace.oracle.numba import emitter

    return emitter.RULES, emitter.REJECTED


BACKEND_TABLES = {"generic": _generic_tables, "cpu": _cpu_tables, "tilelang-c": _tilelang_tables,
                  "tilelang-cuda": _tilelang_tables, "tilelang-metal": _tilelang_tables}

# What TileLang's emitter once filled in for every op without a rule: not an explicit reason.
_PLACEHOLDER_REASON = "no TileLang lowering for this op yet"


@pytest.mark.parametrize("target", sorted(BACKEND_TABLES))
def test_coverage_every_op_has_a_rule_or_an_explicit_rejection(target):
    rules, rejected = BACKEND_TABLES[target]()
    missing = sorted(name for name, op in ops.REGISTRY.items() if op not in rules and op not in rejected)
    assert not missing, f"{target}: ops with neither a rule nor an explicit rejection: {missing}"
    both = sorted(op.name for op in rejected if op in rules)
    assert not both, f"{target}: ops both lowered and rejected: {both}"
    vague = sorted(op.name for op, why in rejected.items()
                   if not isinstance(why, str) or not why.strip() or why == _PLACEHOLDER_REASON)
    assert not vague, f"{target}: rejections without a reason of their own: {vague}"
    stray = [k for k in (*rules, *rejected) if not isinstance(k, ops.OpDef) or ops.REGISTRY.get(k.name) is not k]
    assert not stray, f"{target}: table keys that are not registered ops: {stray}"


def test_coverage_every_rule_module_owns_its_table():
    """Each rule module's ``RULES`` is its own, and the composed table is exactly their union (one module per op)."""
    import importlib

    from intent_trace.oracle import generic
    from intent_trace.oracle.numba import emitter

    for composed, package, names in (
            (generic.RULES, "intent_trace.oracle", ("generic_elementwise", "generic_shapes", "generic_control",
                                                    "generic_structured", "generic_contract", "generic_region",
                                                    "generic_memory", "generic_random", "generic_atomic",
                                                    "generic_scaled", "generic_quant")),
            (emitter.RULES, "intent_trace.oracle.numba", ("elementwise", "structure", "structured", "contract",
                                                          "region", "memory", "random", "atomic", "scaled",
                                                          "quant"))):
        seen: dict = {}
        for name in names:
            for op in importlib.import_module(f"{package}.{name}").RULES:
                assert op not in seen, f"{op.name} has rules in {seen.get(op)} and {name}"
                seen[op] = name
        assert set(seen) == set(composed), package
        assert all(composed[op] is importlib.import_module(f"{package}.{m}").RULES[op] for op, m in seen.items())


def test_coverage_rule_table_refuses_two_rules_for_one_op():
    from intent_trace.graph.interpreter import rule_registrar, rule_table

    first, second = {}, {}
    rule_registrar(first)(ops.add)(lambda it, node, args: None)
    rule_registrar(second)(ops.add)(lambda it, node, args: None)
    with pytest.raises(RuntimeError, match="two rules for op add"):
        rule_table(first, second)
    with pytest.raises(RuntimeError, match="two rules for op add"):
        rule_registrar(first)(ops.add)(lambda it, node, args: None)
    assert list(rule_table(first)) == [ops.add]


# --- every helper family per TileLang target ----------------------------------------------------------------
# The value helpers' vocabulary is the C target's table of bodies (``c.RENDER``: family -> renderer of the body for
# the helper's dtypes), the default every target overrides where it differs; each target module of
# ``target.TARGETS`` writes a definition with ``helper_source(name, family, dtypes, ret, args)`` (None: not on
# these dtypes). Helpers with pointer operands (atomics, k-quant blocks, Philox) come from ``extern_source``.

_CANDIDATE_DTYPES = ("f32", "i32", "u32", "i64", "u64", "f16", "bf16", "bool", "u8", "i8", "f64")


def _value_families():
    from intent_trace.backends.tilelang import c

    return sorted(c.RENDER)


def _extern_families():
    atomics = [f"atomic_{op}_relaxed" for op in ("load", "store", "exchange", "add", "max", "min", "and", "or", "xor",
                                                  "cas")]
    return [*atomics, "quantize_q8_k", "quantize_q4_k", "philox4x32_10"]


def _defines_value_helper(module, family: str) -> bool:
    import inspect
    import itertools

    from intent_trace.backends.tilelang import c

    arity = len(inspect.signature(c.RENDER[family]).parameters)  # the renderer takes the helper's dtypes
    dtypes = [getattr(I, name) if name != "bool" else I.bool for name in _CANDIDATE_DTYPES]
    for ds in itertools.product(dtypes, repeat=arity):
        d = ds[0]
        text = module.helper_source(f"it_{family}", family, ds, d, (d, d, d))
        if text:
            return True
    return False


def _defines_extern_helper(module, family: str) -> bool:
    if family.startswith("atomic_"):
        args = ("int32", I.i32, I.i32) if "_cas_" in family else ("int32", I.i32)
        text = module.extern_source(f"it_{family}_i32", family, (I.i32,), I.i32, args, "it_add_i32")
    else:
        text = module.extern_source(f"it_{family}", family, (), I.i32, ("float32", "int8", "int16", "uint8"))
    return bool(text)


@pytest.mark.parametrize("target", ["tilelang-c", "tilelang-cuda", "tilelang-metal"])
def test_coverage_every_helper_family_has_a_body_on_every_tilelang_target(target):
    from intent_trace.backends.tilelang import target as tilelang_target

    module = tilelang_target.TARGETS[target]
    missing = [f for f in _value_families() if not _defines_value_helper(module, f)]
    missing += [f for f in _extern_families() if not _defines_extern_helper(module, f)]
    assert not missing, f"{target}: helper families with no body on any dtype: {missing}"
    assert set(tilelang_target.TARGETS) == {"tilelang-c", "tilelang-cuda", "tilelang-metal"}


def test_coverage_registry_names_match_op_names():
    assert all(op.name == name for name, op in ops.REGISTRY.items())


# --- surface spellings -------------------------------------------------------------------------------------

def test_coverage_every_dunder_maps_to_a_registered_op():
    for dunder, (opname, _) in surface.BINARY_DUNDERS.items():
        assert opname in ops.REGISTRY, dunder
        assert hasattr(ValueProxy, dunder), dunder
    for dunder, opname in surface.UNARY_DUNDERS.items():
        assert opname in ops.REGISTRY, dunder
        assert hasattr(ValueProxy, dunder), dunder


def _resolve(name: str):
    obj = I
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return obj


def test_coverage_every_shorthand_maps_to_a_registered_op_and_exists():
    for name, opname in surface.SHORTHANDS.items():
        assert opname in ops.REGISTRY, name
        assert callable(_resolve(name)), f"I.{name} is listed in the surface table but missing"


def _dtype_for(opname: str):
    cls = ops.REGISTRY[opname].dtypes
    return I.i32 if cls in ("int", "int_or_bool") else I.f32


def _emitted_by(build, dtype):
    """Trace ``build(value, other)`` on scalars of ``dtype``; return the nodes it added."""

    @intent.kernel
    def k(x: I.In[dtype, ("N",)], y: I.In[dtype, ("N",)]):
        build(x[0], y[0])

    g = k.trace()
    nodes = list(g.walk())
    return nodes[2:], g  # skip the two reads


@pytest.mark.parametrize("dunder", sorted(surface.BINARY_DUNDERS))
def test_coverage_binary_dunder_builds_its_op(dunder):
    opname, reflected = surface.BINARY_DUNDERS[dunder]
    dtype = _dtype_for(opname)
    literal = 2 if dtype is I.i32 else 2.0
    nodes, _ = _emitted_by(lambda v, w: getattr(v, dunder)(literal if reflected else w), dtype)
    assert [n.op.name for n in nodes] == [opname]
    (node,) = nodes
    if reflected:  # `2 - v` puts the literal first
        assert type(node.inputs[0]).__name__ == "Literal" and node.inputs[0].value == literal
        assert type(node.inputs[1]).__name__ == "Var"


@pytest.mark.parametrize("dunder", sorted(surface.UNARY_DUNDERS))
def test_coverage_unary_dunder_builds_its_op(dunder):
    opname = surface.UNARY_DUNDERS[dunder]
    dtype = I.i32 if opname == "invert" else I.f32
    nodes, _ = _emitted_by(lambda v, w: getattr(v, dunder)(), dtype)
    assert [n.op.name for n in nodes] == [opname]


# Each value-level shorthand, applied to f32 scalars v, w (control and domain spellings are below).
_VALUE_SHORTHANDS = {
    "maximum": lambda v, w: I.maximum(v, w),
    "minimum": lambda v, w: I.minimum(v, w),
    "fdiv": lambda v, w: I.fdiv(v, w),
    "fma": lambda v, w: I.fma(v, w, v),
    "cast": lambda v, w: I.cast(v, I.f64),
    "bitcast": lambda v, w: I.bitcast(v, I.i32),
    "logical_not": lambda v, w: I.logical_not(I.bitcast(v, I.u32)),
    **{name: (lambda name: lambda v, w: getattr(I, name)(v))(name)
       for name in ("exp", "log", "log1p", "lgamma", "sin", "asin", "cos", "floor", "erf", "erfc", "i0", "rsqrt",
                    "sqrt", "sigmoid", "abs", "exp2", "tanh", "expm1")},
}


@pytest.mark.parametrize("name", sorted(_VALUE_SHORTHANDS))
def test_coverage_value_shorthand_builds_its_op(name):
    nodes, _ = _emitted_by(_VALUE_SHORTHANDS[name], I.f32)
    assert nodes[-1].op.name == surface.SHORTHANDS[name]


def test_coverage_structural_shorthands_build_their_ops():
    g = _shapes.trace()
    names = {n.op.name for n in g.walk()}
    for name in ("select", "where", "reshape", "expand_dims", "transpose", "full", "zeros", "join", "record",
                 "domain", "indices", "assume_equal"):
        assert surface.SHORTHANDS[name] in names, name
    g = _control.trace()
    names = {n.op.name for n in g.walk()}
    for name in ("parallel", "loop", "while_", "if_", "break_", "continue_"):
        assert surface.SHORTHANDS[name] in names, name


# Each structured shorthand, applied to a f32[M, N] tensor v; the last node it adds must be its op.
_STRUCTURED_SHORTHANDS = {
    "reduce": lambda v: I.reduce(v, axis=0, identity=I.zeros((v.shape[1],), I.f32), combine=lambda a, b: a + b),
    "reduce.sum": lambda v: I.reduce.sum(v, axis=1),
    "reduce.max": lambda v: I.reduce.max(v, axis=(0, 1)),
    "reduce.any": lambda v: I.reduce.any(v > 0.0, axis=0),
    "reduce.all": lambda v: I.reduce.all(v > 0.0, axis=-1),
    "arg_reduce.max": lambda v: I.arg_reduce.max(v, axis=1),
    "scan": lambda v: I.scan(v, axis=1, identity=I.zeros((v.shape[0],), I.f32), combine=lambda a, b: a + b),
    "cumsum": lambda v: I.cumsum(v, axis=0),
    "cummax": lambda v: I.cummax(v, axis=1, reverse=True),
    "contract": lambda v: I.contract(v, v, reduce=((1, 1),), acc_dtype=I.f32),
    "dot": lambda v: I.dot(v[0, :], v[1, :], acc_dtype=I.f32),
    "matvec": lambda v: I.matvec(v, v[0, :], acc_dtype=I.f32),
    "vecmat": lambda v: I.vecmat(v[:, 0], v, acc_dtype=I.f32),
    "matmul": lambda v: I.matmul(v, v, acc_dtype=I.f32, transpose_rhs=True),
    "outer": lambda v: I.outer(v[0, :], v[:, 0]),
}


@pytest.mark.parametrize("name", sorted(_STRUCTURED_SHORTHANDS))
def test_coverage_structured_shorthand_builds_its_op(name):
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")]):
        _STRUCTURED_SHORTHANDS[name](x[:, :])

    nodes = [n for n in k.trace().body.nodes]
    assert nodes[-1].op.name == surface.SHORTHANDS[name] or \
        (name == "arg_reduce.max" and nodes[-3].op.name == "reduce")


_ATOMIC_SHORTHANDS = ("load", "store", "add", "exchange", "max", "min", "and_", "or_", "xor", "compare_exchange")


def test_coverage_every_shorthand_is_exercised_here():
    structural = {"select", "where", "reshape", "expand_dims", "transpose", "full", "zeros", "join", "record", "domain", "indices",
                  "assume_equal", "parallel", "loop", "while_", "if_", "break_", "continue_"}
    regions_and_memory = {"region_fold", "region_scan", "gather", "histogram", "buffer", "scatter_reduce",
                          "load", "store", "random.bits", "random.uniform"} | {f"atomic.{name}" for name in _ATOMIC_SHORTHANDS}
    quantized = {"quantize", "quantized_dot"}
    scaled_and_sparse = {"scaled_matmul", "scaled_contract", "sparse_matmul", "sparse_contract"}
    assert set(surface.SHORTHANDS) == set(_VALUE_SHORTHANDS) | structural | set(_STRUCTURED_SHORTHANDS) | \
        regions_and_memory | quantized | scaled_and_sparse


@pytest.mark.parametrize("name,kernel", [("region_fold", "_regions"), ("region_scan", "_regions"),
                                         ("gather", "_memory"), ("histogram", "_memory"), ("buffer", "_memory"),
                                         ("scatter_reduce", "_memory"), ("load", "_masked"), ("store", "_masked"),
                                         ("random.bits", "_random"),
                                         ("random.uniform", "_random"),
                                         *((f"atomic.{name}", "_atomics") for name in _ATOMIC_SHORTHANDS),
                                         ("scaled_matmul", "_scaled_sparse"), ("scaled_contract", "_scaled_sparse"),
                                         ("sparse_matmul", "_scaled_sparse"), ("sparse_contract", "_scaled_sparse")])
def test_coverage_region_and_memory_shorthands_build_their_ops(name, kernel):
    assert surface.SHORTHANDS[name] in _op_names(globals()[kernel].trace())


# --- every op prints ---------------------------------------------------------------------------------------------

@intent.kernel
def _arith(a: I.In[I.f32, ("N",)], b: I.In[I.i32, ("N",)], y: I.Out[I.f32, ("N",)], z: I.Out[I.i32, ("N",)],
           w: I.Out[I.bool, ("N", 6)]):
    d = I.domain(0, a.shape[0])
    for i in I.parallel(d):
        u, v = a[i], b[i]
        f = (u + 1.0) - (u * 2.0) / (u ** 2.0)
        f = I.maximum(f, u) + I.minimum(f, u) + I.fma(u, u, u) + (-u)
        for name in ("exp", "log", "log1p", "lgamma", "sin", "asin", "cos", "floor", "erf", "erfc", "i0",
                     "rsqrt", "sqrt", "sigmoid", "abs", "exp2", "tanh", "expm1"):
            f = f + getattr(I, name)(u)
        y[i] = f + I.cast(I.cast(1.5, I.f64), I.f32) + I.bitcast(v, I.f32)
        z[i] = (v // 3) % 5 + (v & 6) + (v | 1) + (v ^ 2) + (v << 1) + (v >> 1) + (~v)
        w[i, 0] = u == 0.0
        w[i, 1] = u != 0.0
        w[i, 2] = u < 0.0
        w[i, 3] = u <= 0.0
        w[i, 4] = u > 0.0
        w[i, 5] = I.select(u >= 0.0, ~(u > 1.0), u < 2.0)


@intent.kernel
def _shapes(x: I.In[I.f32, ("M", 6)], y: I.Out[I.f32, (6, "M")], p: I.Out[I.f32, ("M", 6, 2)],
            c: I.Out[I.index, ("K",)], n: I.index):
    v = x[:, :]
    t = I.transpose(v + x[0, :])  # a rank broadcast
    y[:, :] = I.reshape(I.reshape(t, (3, 2, x.shape[0])), (6, x.shape[0]))
    p[:, :, :] = I.join(v, I.where(v > 0.0, v, I.zeros(x.shape, I.f32)))
    dn = I.domain(0, n)
    tail = dn[1:]  # an open end on a derived extent reads it with `dim`
    idx = I.indices(tail)
    r = I.record(first=idx[0], whole=idx)
    c[I.domain(0, c.shape[0])[0:1]] = I.expand_dims(r.first, 0)  # a reshape to (1,)
    q = I.full((2,), 2.0, I.f32)
    y[0, 0] = q[1]
    I.assume_equal(c.shape[0], n)  # an extent equality the run checks


@intent.kernel
def _control(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)], s: I.Out[I.f32, (2,)]):
    d = I.domain(0, x.shape[0])
    for i in d:
        I.continue_(when=x[i] == 0.0)
        I.break_(when=x[i] < 0.0)
        y[i] = x[i]
    for i in I.parallel(d):
        y[i] = y[i] + 1.0
    total, count = I.loop(d, (I.cast(0.0, I.f32), I.cast(0, I.i32)), lambda i, c: (c[0] + x[i], c[1] + 1))
    halved = I.while_(lambda v: v > 1.0, lambda v: v * 0.5, total)
    s[0] = I.if_(count > 0, lambda: halved, lambda: halved * 0.0)
    s[1] = total


@intent.kernel
def _structured(x: I.In[I.f32, ("M", "N")], s: I.Out[I.f32, ("M",)], c: I.Out[I.f32, ("M", "N")],
                g: I.Out[I.f32, ("M", "M")]):
    v = x[:, :]
    s[:] = I.reduce.sum(v, axis=1)
    c[:, :] = I.cumsum(v, axis=1)
    g[:, :] = I.contract(v, v, reduce=((1, 1),), acc_dtype=I.f32)


@intent.kernel
def _regions(x: I.In[I.f32, ("N",)], total: I.Out[I.f32, (1,)], prefix: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    total[0] = I.region_fold(source=x[d], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0),
                             combine=lambda a, b: a + b, identity=I.cast(0.0, I.f32))
    outs, _ = I.region_scan(source=x[d], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0),
                            combine=lambda a, b: a + b, identity=I.cast(0.0, I.f32), initial_state=I.cast(0.0, I.f32),
                            apply=lambda t, s: s + t, emit=lambda s, state: I.cumsum(s, axis=0) + state)
    prefix[d] = outs


@intent.kernel
def _memory(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], h: I.Out[I.u32, (4,)], y: I.InOut[I.f32, ("N",)]):
    k = I.domain(0, idx.shape[0])
    i = idx[k]
    g = I.gather(x[:], i, valid=i >= 0, fill=0.0)
    h[:] = I.histogram(i, bins=4, valid=(i >= 0) & (i < 4), count_dtype=I.u32)
    b = I.buffer((idx.shape[0],), I.f32)
    b[k] = g
    y[i] = b[k]  # a data-indexed write: unique_store
    I.scatter_reduce(y, i, b[k], combine="add")


@intent.kernel
def _masked(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], y: I.InOut[I.f32, ("N",)]):
    k = I.domain(0, idx.shape[0])
    i = idx[k]
    ok = i >= 0
    b = I.buffer((idx.shape[0],), I.f32, init=0.0)
    I.store(b, k, I.load(x, i, valid=ok, fill=1.0), valid=ok)  # masked_read, masked_store
    I.store(y, i, I.gather(b, I.indices(k), valid=ok), valid=ok)  # masked_load, masked_write
    I.scatter_reduce(y, i, b[k], combine="add", valid=ok)


@intent.kernel
def _random(y: I.Out[I.u32, ("N",)], u: I.Out[I.f32, ("N",)], seed: I.u64):
    d = I.domain(0, y.shape[0])
    y[d] = I.random.bits(seed, I.indices(d))
    u[d] = I.random.uniform(seed, I.indices(d), I.f32)


@intent.kernel
def _atomics(idx: I.In[I.i32, ("N",)], c: I.InOut[I.i32, (4,)], f: I.InOut[I.f32, (4,)], y: I.Out[I.i32, ("N",)]):
    for i in I.parallel(I.domain(0, idx.shape[0])):
        a = I.atomic.load(c[0], order="acquire")
        I.atomic.store(c[1], a, order="release")
        b = I.atomic.add(c[idx[i]], 1, order="relaxed") + I.atomic.exchange(c[2], 5, order="acq_rel")
        b = b + I.atomic.max(c[3], 2, order="acquire") + I.atomic.min(c[3], 9, order="release")
        b = b + I.atomic.and_(c[2], 7, order="relaxed") + I.atomic.or_(c[2], 1, order="relaxed")
        b = b + I.atomic.xor(c[2], 3, order="relaxed") + I.cast(I.atomic.add(f[0], 1.0, order="relaxed"), I.i32)
        r = I.atomic.compare_exchange(c[0], 0, b, order="acq_rel")
        y[i] = I.select(r.success, r.old_value, b)


@intent.kernel
def _quant(x: I.In[I.f32, (2, 512)], y: I.In[I.f32, (512,)], o: I.Out[I.f32, (2,)]):
    a = I.quantize(x[:, :], format=I.quant.q4_k)
    b = I.quantize(y[:], format=I.quant.q8_k)
    o[:] = I.quantized_dot(a, b, lhs_format=I.quant.q4_k, rhs_format=I.quant.q8_k, acc_dtype=I.f32)


def test_coverage_quantized_shorthands_build_their_ops():
    names = [n.op.name for n in _quant.trace().body.nodes]
    assert surface.SHORTHANDS["quantize"] in names and surface.SHORTHANDS["quantized_dot"] in names


@intent.kernel
def _scaled_sparse(a: I.In[I.u8, ("M", "G", 16)], sa: I.In[I.u8, ("M", "G")], b: I.In[I.u8, ("G", 32, "N")],
                   sb: I.In[I.u8, ("N", "G")], x: I.In[I.f32, ("M", 4)], meta: I.In[I.i32, ("M", 4)],
                   w: I.In[I.f32, (8, "N")], c: I.Out[I.f32, ("M", "N")], d: I.Out[I.f32, ("M", "N")],
                   e: I.Out[I.f32, ("M", "N")], f: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.scaled_matmul(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=I.e2m1, rhs_format=I.e4m3,
                              group_size=32, acc_dtype=I.f32)
    d[:, :] = I.scaled_contract(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=I.e2m1, rhs_format=I.e4m3,
                                lhs_group_size=32, rhs_group_size=32, reduce=((1, 0), (2, 1)), batch=(),
                                acc_dtype=I.f32)
    e[:, :] = I.sparse_matmul(x[:, :], meta[:, :], w[:, :], format=I.sparse.two_of_four(), acc_dtype=I.f32)
    f[:, :] = I.sparse_contract(x[:, :], meta[:, :], w[:, :], format=I.sparse.two_of_four(), reduce=((1, 0),),
                                batch=(), acc_dtype=I.f32)


_COVERAGE_KERNELS = (_arith, _shapes, _control, _structured, _regions, _memory, _masked, _random, _atomics, _quant,
                     _scaled_sparse)


def _op_names(graph) -> set:
    return {n.op.name for n in graph.walk()}


def test_coverage_kernels_use_every_registered_op():
    used = set().union(*(_op_names(k.trace()) for k in _COVERAGE_KERNELS))
    assert set(ops.REGISTRY) - used == set(), "add a use of these ops to a coverage kernel"


@pytest.mark.parametrize("opname", sorted(ops.REGISTRY))
def test_coverage_every_op_prints(opname):
    for k in _COVERAGE_KERNELS:
        g = k.trace()
        if opname in _op_names(g):
            break
    else:
        pytest.fail(f"no coverage kernel uses {opname}")
    text = str(g)
    pattern = rf"^\s*(?:[^#]*?= )?{re.escape(opname)}(?:\s|$)"
    assert re.search(pattern, text, re.MULTILINE), f"{opname} is not printed:\n{text}"
    # Every node prints on its own line with the user's source location.
    count = sum(1 for n in g.walk() if n.op.name == opname)
    lines = [ln for ln in text.splitlines() if re.match(pattern, ln) and "# test_coverage.py:" in ln]
    assert len(lines) >= count, f"{opname}: {count} nodes, {len(lines)} printed lines"
