"""The surface table: every user spelling and the canonical op it builds.

Proxy dunders are generated from :data:`BINARY_DUNDERS` and :data:`UNARY_DUNDERS`; the ``I``
namespace functions are thin wrappers listed in :data:`SHORTHANDS`. Nothing here computes: it
is the map that ``tests/graph/test_coverage.py`` checks against the registry.
"""
from __future__ import annotations

# dunder -> (canonical op, operands reflected)
BINARY_DUNDERS = {
    "__add__": ("add", False), "__radd__": ("add", True),
    "__sub__": ("sub", False), "__rsub__": ("sub", True),
    "__mul__": ("mul", False), "__rmul__": ("mul", True),
    "__truediv__": ("div", False), "__rtruediv__": ("div", True),
    "__floordiv__": ("floordiv", False), "__rfloordiv__": ("floordiv", True),
    "__mod__": ("mod", False), "__rmod__": ("mod", True),
    "__pow__": ("pow", False), "__rpow__": ("pow", True),
    "__and__": ("and_", False), "__rand__": ("and_", True),
    "__or__": ("or_", False), "__ror__": ("or_", True),
    "__xor__": ("xor", False), "__rxor__": ("xor", True),
    "__lshift__": ("shl", False), "__rlshift__": ("shl", True),
    "__rshift__": ("shr", False), "__rrshift__": ("shr", True),
    "__eq__": ("eq", False), "__ne__": ("ne", False),
    "__lt__": ("lt", False), "__le__": ("le", False),
    "__gt__": ("gt", False), "__ge__": ("ge", False),
}

UNARY_DUNDERS = {"__neg__": "neg", "__invert__": "invert", "__abs__": "abs"}

# I.<name> -> canonical op (the function in language.py builds it)
SHORTHANDS = {
    "maximum": "maximum", "minimum": "minimum", "fdiv": "div", "fma": "fma", "select": "select",
    "where": "select", "cast": "cast", "bitcast": "bitcast", "reshape": "reshape", "transpose": "transpose",
    "full": "full", "zeros": "full", "join": "join", "record": "record", "domain": "domain",
    "indices": "indices", "parallel": "parallel", "loop": "loop", "while_": "while", "if_": "if",
    "break_": "break", "continue_": "continue", "logical_not": "invert",
    "reduce": "reduce", "reduce.sum": "reduce", "reduce.max": "reduce", "reduce.any": "reduce", "reduce.all": "reduce",
    "arg_reduce.max": "reduce", "scan": "scan", "cumsum": "scan", "cummax": "scan",
    "contract": "contract", "dot": "contract", "matvec": "contract", "vecmat": "contract", "matmul": "contract",
    "outer": "mul", "region_fold": "region_fold", "region_scan": "region_scan",
    "gather": "gather", "histogram": "histogram", "buffer": "buffer", "scatter_reduce": "scatter_reduce",
    "random.bits": "random_bits", "random.uniform": "random_bits",
    "scaled_matmul": "scaled_contract", "scaled_contract": "scaled_contract", "sparse_contract": "sparse_contract",
    "sparse_matmul": "sparse_contract", "quantize": "quantize", "quantized_dot": "quantized_dot",
    "atomic.load": "atomic_load", "atomic.store": "atomic_store", "atomic.add": "atomic_rmw",
    "atomic.exchange": "atomic_rmw", "atomic.max": "atomic_rmw", "atomic.min": "atomic_rmw", "atomic.and_": "atomic_rmw",
    "atomic.or_": "atomic_rmw", "atomic.xor": "atomic_rmw", "atomic.compare_exchange": "atomic_compare_exchange",
    **{name: name for name in ("exp", "log", "log1p", "lgamma", "sin", "asin", "cos", "floor", "erf", "erfc",
                               "i0", "rsqrt", "sqrt", "sigmoid", "abs", "exp2", "tanh")},
}
