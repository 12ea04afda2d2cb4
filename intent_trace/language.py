"""The ``I`` namespace: thin surface functions, each building canonical KIR.

``from intent_trace import I``. Everything here either names a type, spells a parameter, or
forwards to one builder in :mod:`intent_trace.proxies` that emits the canonical op listed for
it in :mod:`intent_trace.graph.surface`.
"""
from __future__ import annotations

from . import types as _T
from .graph import traits as _traits
from .params import Constexpr, Enum, In, InOut, Out  # noqa: F401
from .proxies import aggregates as _aggregates
from .proxies import build as _b
from .proxies import domain as _domain

# dtypes (T1)
bool = _T.bool_  # noqa: A001  (I.bool is the intent dtype)
bool_ = _T.bool_
i8, i16, i32, i64 = _T.i8, _T.i16, _T.i32, _T.i64
u8, u16, u32, u64 = _T.u8, _T.u16, _T.u32, _T.u64
f16, bf16, f32, f64 = _T.f16, _T.bf16, _T.f32, _T.f64
index = _T.index
e2m1, e4m3, e8m0 = _T.e2m1, _T.e4m3, _T.e8m0

# domains and control
domain = _domain.domain
indices = _domain.indices
parallel = _domain.parallel


def assume_equal(lhs, rhs):
    """State an extent equality the tracer cannot prove (``n = I.assume_equal(x.shape[0], 2 * y.shape[0])``):
    from here on the two are one extent; the run checks it (ValueError naming both sides). See proxies.assume."""
    from .proxies import assume as _assume

    return _assume.assume_equal(lhs, rhs)

# Structured control (§5, §6: proxies.control) and structured operations (§7, §8: proxies.structured)
# load on first use: a kernel that uses none of them never imports them, which keeps a new process
# that only runs cached kernels cheap. The module __getattr__ below (PEP 562) hands out the
# implementing objects themselves, so identity, signatures and docstrings are those of the module.
_ON_FIRST_USE = {
    "if_": "control", "loop": "control", "while_": "control", "break_": "control", "continue_": "control",
    "reduce": "structured", "arg_reduce": "structured", "scan": "structured", "cumsum": "structured",
    "cummax": "structured",
}


def __getattr__(name: str):
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__package__}.proxies.{module}"), name)
    globals()[name] = value  # later lookups are plain module attributes
    return value


def __dir__():
    return sorted(set(globals()) | set(_ON_FIRST_USE))


def region_fold(*, source, axis, summarize, combine, identity, operands=()):
    """Spec §9.1: fold summaries of compiler-chosen contiguous slices (see intent_trace.proxies.region)."""
    from .proxies import region as _region

    return _region.region_fold(source=source, axis=axis, summarize=summarize, combine=combine, identity=identity,
                               operands=operands)


def region_scan(*, source, axis, combine, identity, summarize=None, initial_state=None, apply=None, emit=None,
                operands=()):
    """Spec §9.2: (outputs, final_state); element-wise without summarize/apply/emit (an ordinary scan)."""
    from .proxies import region as _region

    return _region.region_scan(source=source, axis=axis, combine=combine, identity=identity, summarize=summarize,
                               initial_state=initial_state, apply=apply, emit=emit, operands=operands)

# named multiplication (§10); implemented in intent_trace.proxies.contract


def contract(lhs, rhs, *, reduce, batch=(), acc_dtype):
    """Paired-axis multiply-add: ``reduce``/``batch`` are ((lhs_axis, rhs_axis), ...) pairs."""
    from .proxies import contract as _c

    return _c.contract(lhs, rhs, reduce=reduce, batch=batch, acc_dtype=acc_dtype)


def dot(lhs, rhs, *, acc_dtype):
    from .proxies import contract as _c

    return _c.dot(lhs, rhs, acc_dtype=acc_dtype)


def matvec(matrix, vector, *, acc_dtype, transpose=False):
    from .proxies import contract as _c

    return _c.matvec(matrix, vector, acc_dtype=acc_dtype, transpose=transpose)


def vecmat(vector, matrix, *, acc_dtype, transpose=False):
    from .proxies import contract as _c

    return _c.vecmat(vector, matrix, acc_dtype=acc_dtype, transpose=transpose)


def matmul(lhs, rhs, *, acc_dtype, transpose_lhs=False, transpose_rhs=False):
    from .proxies import contract as _c

    return _c.matmul(lhs, rhs, acc_dtype=acc_dtype, transpose_lhs=transpose_lhs, transpose_rhs=transpose_rhs)


def outer(lhs, rhs):
    """[M] x [N] -> [M, N]: a broadcast multiply (no reduction, no accumulator)."""
    from .proxies import contract as _c

    return _c.outer(lhs, rhs)


# indexed access (§13, §15); implemented in intent_trace.proxies.memory


def gather(source, index, *, valid=None, fill=0):
    """Gather from a tensor (pure) or a view/buffer (a masked read): ``index`` is an integer tensor (rank-1 source)
    or a tuple, one per axis."""
    from .proxies import memory as _m

    return _m.gather(source, index, valid=valid, fill=fill)


def load(target, index, *, valid=None, fill=0, **unknown):
    """Masked read of a view or buffer (spec §15): ``target[index]`` where ``valid``, ``fill`` elsewhere; an invalid
    lane reads nothing and is not bounds-checked (Triton's ``tl.load(ptr, mask=, other=)``)."""
    from .proxies import masked as _k

    return _k.load(target, index, valid=valid, fill=fill, **unknown)


def store(target, index, value, *, valid=None, **unknown):
    """Masked write (spec §15): ``target[index] = value`` where ``valid``; an invalid lane has no effect."""
    from .proxies import masked as _k

    _k.store(target, index, value, valid=valid, **unknown)


def histogram(values, *, bins, valid=None, count_dtype):
    from .proxies import memory as _m

    return _m.histogram(values, bins=bins, valid=valid, count_dtype=count_dtype)


def buffer(shape, dtype, *, init=None):
    """A kernel-local logical buffer, indexed like a view (reads and writes in program order)."""
    from .proxies import memory as _m

    return _m.buffer(shape, dtype, init=init)


def scatter_reduce(dest, index, values, *, combine, valid=None):
    """Combine ``values`` into ``dest`` at ``index``; combine is add/max/min/and/or/xor or a pure helper; lanes where
    ``valid`` is False combine nothing."""
    from .proxies import memory as _m

    return _m.scatter_reduce(dest, index, values, combine=combine, valid=valid)


# RNG (§17) and atomics (§16): namespaces implemented in intent_trace.proxies.random / .atomic


class _LazyNamespace:
    """``I.random`` / ``I.atomic``: attribute access forwards to the implementing module."""

    def __init__(self, module: str, name: str):
        self._module, self._name = module, name

    def __getattr__(self, attr):
        import importlib

        module = importlib.import_module(self._module)
        if attr.startswith("_") or attr not in getattr(module, "__all__", ()):
            raise AttributeError(f"I.{self._name} has no {attr!r}")
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"I.{self._name}"


random = _LazyNamespace("intent_trace.proxies.random", "random")
sparse = _LazyNamespace("intent_trace.proxies.sparse_formats", "sparse")  # two_of_four(), one_of_two()
quant = _LazyNamespace("intent_trace.proxies.quant_formats", "quant")  # q4_k, q8_k


def scaled_matmul(lhs, lhs_scale, rhs, rhs_scale, *, lhs_format, rhs_format, group_size, acc_dtype):
    """Spec §11: the closed positional schema [M,G,C], [M,G], [G,C,N], [N,G] with one group size."""
    from .proxies import scaled as _s

    return _s.scaled_matmul(lhs, lhs_scale, rhs, rhs_scale, lhs_format=lhs_format, rhs_format=rhs_format,
                            group_size=group_size, acc_dtype=acc_dtype)


def scaled_contract(lhs, lhs_scale, rhs, rhs_scale, *, lhs_format, rhs_format, lhs_group_size, rhs_group_size,
                    reduce, batch=(), acc_dtype):
    from .proxies import scaled as _s

    return _s.scaled_contract(lhs, lhs_scale, rhs, rhs_scale, lhs_format=lhs_format, rhs_format=rhs_format,
                              lhs_group_size=lhs_group_size, rhs_group_size=rhs_group_size, reduce=reduce,
                              batch=batch, acc_dtype=acc_dtype)


def sparse_contract(compressed, metadata, dense_rhs, *, format, reduce, batch=(), acc_dtype):  # noqa: A002
    """Spec §12: a structured-sparse lhs (closed format schema) against a dense rhs."""
    from .proxies import scaled as _s

    return _s.sparse_contract(compressed, metadata, dense_rhs, format=format, reduce=reduce, batch=batch,
                              acc_dtype=acc_dtype)


def sparse_matmul(compressed, metadata, rhs, *, format, acc_dtype):  # noqa: A002
    from .proxies import scaled as _s

    return _s.sparse_matmul(compressed, metadata, rhs, format=format, acc_dtype=acc_dtype)


def quantize(values, *, format):  # noqa: A002
    """quantization.md Q2: f32[..., K] -> the format's record."""
    from .proxies import quant as _q

    return _q.quantize(values, format=format)


def quantized_dot(lhs, rhs, *, lhs_format, rhs_format, acc_dtype):
    """quantization.md Q3."""
    from .proxies import quant as _q

    return _q.quantized_dot(lhs, rhs, lhs_format=lhs_format, rhs_format=rhs_format, acc_dtype=acc_dtype)
atomic = _LazyNamespace("intent_trace.proxies.atomic", "atomic")

# values
select = _b.select
where = _b.select
record = _aggregates.record
reshape = _b.reshape
expand_dims = _b.expand_dims  # size-one axes (also x[:, None]); a reshape
transpose = _b.transpose
join = _b.join


def cast(value, dtype):
    """Convert to ``dtype`` by the T3 rules (a Python number becomes a typed constant)."""
    return _b.convert("cast", value, dtype)


def bitcast(value, dtype):
    """Reinterpret the bits as ``dtype`` of the same width."""
    return _b.convert("bitcast", value, dtype)


def full(shape, fill, dtype):
    """A tensor of ``shape`` (static ints or traced extents) filled with ``fill``; no storage implied."""
    return _b.full(shape, fill, dtype)


def zeros(shape, dtype):
    return _b.full(shape, 0, dtype)


def maximum(a, b):
    """IEEE 754-2019 maximum: NaN if either is NaN; -0 < +0."""
    return _b.binary("maximum", a, b)


def minimum(a, b):
    return _b.binary("minimum", a, b)


def fma(a, b, c):
    """``a * b + c`` rounded once."""
    return _b.elementwise("fma", (a, b, c))


def fdiv(lhs, rhs, *, approximate=False, flush_to_zero=False):
    """Floating division with explicit numeric options (T4); the default equals ``/``."""
    ref = lhs if hasattr(lhs, "type") else rhs
    return _b.binary("div", lhs, rhs, _b.math_options("I.fdiv", ref, approximate, flush_to_zero))


def exp2(value, *, approximate=False, flush_to_zero=False):
    return _b.unary("exp2", value, _b.math_options("I.exp2", value, approximate, flush_to_zero))


def tanh(value, *, approximate=False):
    return _b.unary("tanh", value, _b.math_options("I.tanh", value, approximate, False, ("approximate",)))


def _unary(name: str):
    def f(value):
        return _b.unary(name, value)

    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"Elementwise {name} (numerics chapter T4)."
    return f


# Every other T4 function is I.<its shorthand>, generated from the registry (a function with numeric options, such
# as exp2 and tanh above, is written out, since its options need normalising and their own errors).
for _op in _traits.MATH_FUNCTIONS:
    for _name in _op.shorthands:
        if _name not in globals():
            globals()[_name] = _unary(_op.name)
del _op, _name


def logical_not(value):
    return _b.unary("invert", value)


# ``from intent_trace.language import *`` exports every public name, the ones loaded on first use included.
__all__ = sorted({name for name in globals() if not name.startswith("_")} | set(_ON_FIRST_USE))
