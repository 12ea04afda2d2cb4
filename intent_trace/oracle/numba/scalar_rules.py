"""Scalar expressions for every elementwise op, per dtype: one table keyed by OpDef.

Each rule takes the operand dtype, the operand expressions (names of Numba locals) and the
node, and returns one Python expression. The emitter uses the same table for scalar values and
for each element of a fused tensor expression. f16/bf16 values are float32 numbers in the
format's value set; results are rounded back with ``R.round_f16``/``R.round_bf16``.
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops

NARROW = ("f16", "bf16")
NP_NAME = {"bool": "np.bool_", "i8": "np.int8", "i16": "np.int16", "i32": "np.int32", "i64": "np.int64",
           "u8": "np.uint8", "u16": "np.uint16", "u32": "np.uint32", "u64": "np.uint64", "f16": "np.float32",
           "bf16": "np.float32", "f32": "np.float32", "f64": "np.float64", "index": "np.int64"}


def np_type(d: T.DType) -> str:
    """The Numba scalar type holding values of ``d`` (f16/bf16 live in float32)."""
    return NP_NAME[d.name]


def round_to(d: T.DType, expr: str) -> str:
    """Round a float32 (or exact) expression to the value set of ``d``."""
    if d.name == "f16":
        return f"R.round_f16({expr})"
    if d.name == "bf16":
        return f"R.round_bf16({expr})"
    return f"{np_type(d)}({expr})"


def from_f64(d: T.DType, expr: str) -> str:
    """Round a float64 expression once to ``d``."""
    if d.name == "f16":
        return f"R.f64_to_f16({expr})"
    if d.name == "bf16":
        return f"R.f64_to_bf16({expr})"
    return f"{np_type(d)}({expr})"


def _wrap_int(d: T.DType, expr: str) -> str:
    return f"{np_type(d)}({expr})"


_ARITH = {ops.add: "+", ops.sub: "-", ops.mul: "*"}


def _is_i64(d: T.DType) -> bool:
    return d.kind == "int" and d.bits == 64


def arith(node, d, a, b):
    """``a op b`` as written: for floats, right wherever LLVM cannot swap the operands or at most one is a NaN."""
    sym = _ARITH[node.op]
    if d.is_float:
        return round_to(d, f"{a} {sym} {b}") if d.name in NARROW else f"{a} {sym} {b}"
    if _is_i64(d):
        return f"R.{node.op.name}_i64({a}, {b})"
    return _wrap_int(d, f"{a} {sym} {b}")


#: the float ops whose operands LLVM may swap: ``fadd``/``fmul`` are commutative in its IR (NaN payloads unspecified)
COMMUTED = frozenset({ops.add, ops.mul})


def first_nan_arith(node, d, a, b):
    """Float add/mul returning the first NaN operand, quieted (T3, x86's rule), whatever order LLVM gives the
    operands. x86 returns its instruction's first source NaN, and LLVM puts either operand there: a load it folds
    into the instruction is always the second source (``x[i] + y * 1.5`` returned y's NaN), and a loop-invariant
    operand held in a register is the first (``x[i] + s`` returned s's).

    Spelled ``a op (a if a is NaN else b)``, which is right in either order: where ``a`` is a NaN both operands are
    that NaN, so the result is ``a`` quieted (x86 quiets a signalling NaN in either position); where it is not, at
    most ``b`` is a NaN and the result is ``b`` quieted in either order, or the default NaN (inf - inf, 0 * inf), the
    same in either order. One compare and one blend per element; :mod:`.elementwise` leaves it out where an operand
    cannot be a NaN or the order is free."""
    if not d.is_float or a == b:
        return arith(node, d, a, b)
    return arith(node, d, a, f"({a} if {a} != {a} else {b})")


def invariant_first_nan_arith(node, d, a, b, invariant: int):
    """:func:`first_nan_arith` where operand ``invariant`` (0: a, 1: b) holds one value across the loop (a scalar
    argument, a row's value): the plain op while that operand is not a NaN, which is right in either order (at most
    the other operand is a NaN), and the compare and blend only while it is one. The test is loop-invariant: LLVM
    hoists it and unswitches the loop on it (a chain of six ``v * s`` ran as fast as the plain ops; with the blend
    in the loop, 3.1x as long)."""
    s = (a, b)[invariant]
    if not d.is_float or a == b:
        return arith(node, d, a, b)
    return f"({arith(node, d, a, b)} if {s} == {s} else {first_nan_arith(node, d, a, b)})"


def div(node, d, a, b):
    if node.attr("flush_to_zero"):
        tiny = _tiny(d)
        return f"R.ftz({from_f64(d, f'np.float64(R.ftz({a}, {tiny})) / np.float64(R.ftz({b}, {tiny}))')}, {tiny})"
    if d.name == "f32":
        # float32 division is correctly rounded: the same bits as dividing in float64 and rounding (53 >= 2 * 24
        # + 2), NaN payloads and the default NaN included, at twice the vector width
        return f"np.float32({a} / {b})"
    return from_f64(d, f"np.float64({a}) / np.float64({b})")


def _int_variant(d: T.DType) -> str:
    return "u" if d.kind == "uint" else "s"


def floordiv(node, d, a, b):
    return _wrap_int(d, f"R.idiv_{_int_variant(d)}({a}, {b})")


def mod(node, d, a, b):
    return _wrap_int(d, f"R.imod_{_int_variant(d)}({a}, {b})")


def pow_(node, d, a, b):
    if d.is_float:
        return from_f64(d, f"math.pow(np.float64({a}), np.float64({b}))")
    return _wrap_int(d, f"R.ipow_{'u' if d.kind == 'uint' else 's'}({a}, {b})")


def minmax(node, d, a, b):
    is_max = node.op is ops.maximum
    if d.is_float:
        return f"R.{'fmax' if is_max else 'fmin'}({a}, {b})"
    return f"{'max' if is_max else 'min'}({a}, {b})"


_BIT = {ops.and_: "&", ops.or_: "|", ops.xor: "^"}


def bitwise(node, d, a, b):
    sym = _BIT[node.op]
    if d.is_bool:
        return f"({a} {sym} {b})"
    return _wrap_int(d, f"{a} {sym} {b}")


def shift(node, d, a, b):
    if node.op is ops.shl:
        return f"R.shl_i64({a}, {b})" if _is_i64(d) else _wrap_int(d, f"R.shl({a}, {b}, {d.bits})")
    return _wrap_int(d, f"R.shr_{'u' if d.kind == 'uint' else 's'}({a}, {b}, {d.bits})")


_CMP = {ops.eq: "==", ops.ne: "!=", ops.lt: "<", ops.le: "<=", ops.gt: ">", ops.ge: ">="}


def compare(node, d, a, b):
    return f"({a} {_CMP[node.op]} {b})"


# float32 bodies: exp without a libm call (vectorisable, runtime.exp_f32), log a float32 libm call (< 1 ulp)
_MATH_F32 = {ops.exp: "R.exp_f32", ops.log: "np.log"}
_MATH_F64 = {"exp": "math.exp", "log": "math.log", "log1p": "math.log1p", "lgamma": "R.lgamma", "sin": "math.sin",
             "asin": "math.asin", "cos": "math.cos", "erf": "math.erf", "erfc": "math.erfc", "i0": "R.i0",
             "rsqrt": "R.rsqrt", "sqrt": "math.sqrt", "sigmoid": "R.sigmoid", "exp2": "R.exp2", "tanh": "math.tanh",
             "expm1": "math.expm1"}


def _tiny(d: T.DType) -> str:
    return {"f32": "np.float32(1.1754943508222875e-38)", "f64": "2.2250738585072014e-308"}[d.name]


def unary_math(node, d, x):
    op = node.op
    if op is ops.floor:
        return f"np.floor({x})" if d.name not in NARROW else f"np.float32(np.floor({x}))"
    if op is ops.abs:
        if d.is_float:
            return f"R.abs64({x})" if d.name == "f64" else f"R.abs32({x})"
        return f"R.abs_i64({x})" if _is_i64(d) else _wrap_int(d, f"abs({x})")
    if d.name == "f32" and op in _MATH_F32 and not node.attr("flush_to_zero"):
        # within T4's 2 ulp: exp_f32 rounds a float64 within 2^-46 once; glibc's logf is within 1 ulp
        return f"{_MATH_F32[op]}({x})"
    if op is ops.exp and d.name in NARROW and not node.attr("flush_to_zero"):
        return from_f64(d, f"R.exp_f64_of_f32({x})")  # vectorisable, within 2^-46 before the one rounding
    fn = _MATH_F64[op.name]
    if node.attr("flush_to_zero"):
        tiny = _tiny(d)
        return f"R.ftz({from_f64(d, f'{fn}(np.float64(R.ftz({x}, {tiny})))')}, {tiny})"
    return from_f64(d, f"{fn}(np.float64({x}))")


def neg(node, d, x):
    if d.is_float:
        return f"R.neg64({x})" if d.name == "f64" else f"R.neg32({x})"
    if _is_i64(d):
        return f"R.neg_i64({x})"
    return _wrap_int(d, f"-{x}")


def invert(node, d, x):
    return f"(not {x})" if d.is_bool else _wrap_int(d, f"~{x}")


def select(node, d, p, a, b):
    return f"({a} if {p} else {b})"


def fma(node, d, a, b, c):
    if d.name in ("f32", "f64"):
        return f"R.fma_nan({a}, {b}, {c})"
    return from_f64(d, f"R.fma_rto(np.float64({a}), np.float64({b}), np.float64({c}))")


# --- conversions ---------------------------------------------------------------------------------

def cast_expr(src: T.DType, dst: T.DType, x: str) -> str:
    if src is dst:
        return x
    if dst.is_bool:
        return f"({x} != 0)"
    if src.is_bool:
        return f"{np_type(dst)}({x})"
    if dst.is_float:
        if src.is_float:
            if dst.name in NARROW:
                return round_to(dst, x) if src.name != "f64" else from_f64(dst, x)
            return f"{np_type(dst)}({x})"
        if dst.name in NARROW:
            widen = "R.u64_to_f64_rto" if src.name == "u64" else "R.i64_to_f64_rto"
            arg = f"np.uint64({x})" if src.name == "u64" else f"np.int64({x})"
            return from_f64(dst, f"{widen}({arg})")
        return f"{np_type(dst)}({x})"
    if src.is_float:
        if dst.name == "u64":
            return f"np.uint64(R.f2u({x}, {dst.max}))"
        return f"{np_type(dst)}(R.f2i({x}, {dst.min}, {dst.max}))"
    return f"{np_type(dst)}({x})"  # integer -> integer wraps


_BITS_OF = {  # (source dtype name) -> expression giving the unsigned bit pattern
    "f32": "R.f32_bits({})", "f64": "R.f64_bits({})", "f16": "R.f16_bits({})", "bf16": "R.bf16_bits({})",
    "i8": "R.i8_as_u8({})", "i16": "R.i16_as_u16({})", "i32": "R.i32_as_u32({})", "i64": "R.i64_as_u64({})",
    "index": "R.i64_as_u64({})", "u8": "np.uint8({})", "u16": "np.uint16({})", "u32": "np.uint32({})",
    "u64": "np.uint64({})",
}
_FROM_BITS = {
    "f32": "R.bits_f32({})", "f64": "R.bits_f64({})", "f16": "R.f16_value({})", "bf16": "R.bf16_value({})",
    "i8": "R.u8_as_i8({})", "i16": "R.u16_as_i16({})", "i32": "R.u32_as_i32({})", "i64": "R.u64_as_i64({})",
    "index": "R.u64_as_i64({})", "u8": "np.uint8({})", "u16": "np.uint16({})", "u32": "np.uint32({})",
    "u64": "np.uint64({})",
}


def bitcast_expr(src: T.DType, dst: T.DType, x: str) -> str:
    if src is dst:
        return x
    return _FROM_BITS[dst.name].format(_BITS_OF[src.name].format(x))


def cast(node, d, x):
    return cast_expr(node.inputs[0].type.dtype, node.attr("dtype"), x)


def bitcast(node, d, x):
    return bitcast_expr(node.inputs[0].type.dtype, node.attr("dtype"), x)


SCALAR_RULES: dict = {ops.sub: arith, **{op: first_nan_arith for op in COMMUTED}}
for _name, _fn in (("div", div), ("floordiv", floordiv), ("mod", mod), ("pow", pow_), ("maximum", minmax),
                   ("minimum", minmax), ("and_", bitwise), ("or_", bitwise), ("xor", bitwise), ("shl", shift),
                   ("shr", shift), ("neg", neg), ("invert", invert), ("select", select), ("fma", fma),
                   ("cast", cast), ("bitcast", bitcast)):
    SCALAR_RULES[ops.REGISTRY[_name]] = _fn
for _name in ops.COMPARE:
    SCALAR_RULES[ops.REGISTRY[_name]] = compare
for _name in ops.UNARY_MATH:
    SCALAR_RULES[ops.REGISTRY[_name]] = unary_math
