"""The ``tilelang-metal`` target's choices: TileLang's Metal target, the schedule's parallel programs, float-only helper
bodies.

The lowering is the one every TileLang target shares (:mod:`.emitter`); what differs here:

- Source anywhere, execution on macOS: TileLang lowers the program to Metal Shading Language on any OS
  (:func:`kernel_source`, ``tilelang.lower`` under ``tvm.target.Target("metal")``; the executable's ``.source``
  uses it when the target module has it, instead of compiling). Running a kernel needs a Metal runtime (macOS
  on Apple silicon, through PyTorch's MPS backend: ``torch.mps.compile_shader``, TileLang's ``torch``
  execution backend, not exercised yet); elsewhere calling the executable raises RuntimeError
  (:func:`require_runtime`). ``emulate=True`` runs the same Metal source on any OS instead, compiled as host C++
  against an emulation header that checks bounds and data races (:mod:`.metal_emulation`, ``build(..., emulate=True)``).
- Launch: the schedule's mappings, as on ``tilelang-cuda`` and by the same planners and emitters, in Metal's spelling
  (:mod:`.metal_grid`: threadgroups of threads, simdgroup shuffles, threadgroup memory and barriers, device atomics);
  a graph no planner takes runs in one threadgroup of one thread (``T.Kernel(1, threads=1)``, the correctness
  baseline). Each kernel of a program of several launches carries the prelude (Metal compiles each alone).
  TileLang's ``torch`` adapter launches one kernel: on a Mac, a program of several launches (a full reduction, a
  scan, a histogram) needs its ``tvm_ffi`` Metal backend (untested: no Mac here).
- Helpers: Metal has no 64-bit float, so the bodies are not :mod:`.c`'s. Per T10 the T4 functions Metal has are
  ``metal::precise::`` calls, division is the hardware's (correctly rounded in safe mode: the MSL specification's
  accuracy table, cited at :func:`_div`), NaN results and T4's special values are decided in code around them
  (compare and select), and ``flush_to_zero`` math is ``metal::fast::``; exact conversions and roundings are
  integer arithmetic, and the functions Metal lacks (erf, erfc, lgamma, i0) double-float evaluations
  (:mod:`.metal_math`). f64 is not a Metal dtype: a kernel that uses it is rejected with a LoweringError naming the
  dtype and the target. The helpers are ``static inline`` functions of the prelude (TVM's Metal code generator
  calls them by name and declares nothing).
- Numerics need fast math off. The prelude says so in the source (``#pragma METAL fp math_mode(safe)``,
  ``#pragma METAL fp contract(off)``, ``#pragma clang fp contract(off)``); a Mac build should also compile the
  library with ``MTLCompileOptions.mathMode = MTLMathModeSafe`` (``-fno-fast-math``), since Metal's default is
  fast math.
- Early exit (a failed run-time check, :mod:`.storage`): TileLang drops ``T.ret`` from Metal kernels and its
  Metal code generator has no ``T.thread_return``, so :data:`early_exit` calls ``itm_return``, a macro for
  ``return`` that every prelude defines. On a grid, the first failing thread claims the error record
  (:func:`.metal_grid.claim_source`).
- Workspaces: Metal kernels cannot allocate memory, so a buffer that is not small and static is a hidden buffer
  parameter the host allocates (``host_workspaces``, :mod:`.storage`); one whose size depends on data computed
  in the kernel is rejected.
- k-quant super-blocks (``quantize``): tilelang-c's bodies with Metal's types, address spaces and exact f32
  helpers (:mod:`.metal_quant`), the same bits as generic.
- ``torch.mps.compile_shader`` compiles with Metal's default options (fast math), which is why the pragmas
  are in the source rather than only in build flags.
"""
from __future__ import annotations

import platform
import re

import numpy as np

from ... import types as T
from ...graph.traits import APPROXIMATE
from . import c, metal_atomics, metal_lower
from .integer_bodies import integer_renderers
from .metal_math import BASE
from .metal_quant import FAMILIES as QUANT_FAMILIES

NAME = "tilelang-metal"
TILELANG_TARGET = "metal"
EXECUTION_BACKEND = "torch"
LANGUAGE = "tilelang.metal.language"
COMPILE_FLAGS = ()  # torch.mps.compile_shader takes none: the prelude's pragmas turn fast math off


def compile_flags() -> list:
    return list(COMPILE_FLAGS)

# Value dtypes held in Metal scalars: f16/bf16 values live in floats (rounded to their format, T3/T4), as on
# tilelang-c. Views and scalars are stored as on tilelang-c (bool as uint8, f16/bf16 as their uint16 bits).
M_TYPE = {"bool": "bool", "i8": "char", "i16": "short", "i32": "int", "i64": "long", "index": "long", "u8": "uchar",
          "u16": "ushort", "u32": "uint", "u64": "ulong", "f32": "float", "f16": "float", "bf16": "float"}
view_storage = c.view_storage
# TVM's Metal code generator passes a scalar narrower than 32 bits through a member of its argument union that it
# never declares (``arg.p.v_char`` of ``union __TVMArgUnion { int v_int[2]; }``: invalid Metal), so those scalars
# are int32 parameters holding the value (the kernel casts them back).
_SCALAR_STORAGE = {"bool": "int32", "i8": "int32", "i16": "int32", "u8": "int32", "u16": "int32"}


def scalar_storage(d: T.DType) -> str | None:
    """The TIR dtype of a runtime scalar parameter when it differs from the value dtype."""
    return _SCALAR_STORAGE.get(d.name) or c.scalar_storage(d)


host_workspaces = True  # Metal kernels cannot allocate: the host sizes every large buffer (storage.py)
early_exit = "T.evaluate(T.call_extern('int32', 'itm_return'))"  # `return;` from the kernel (see _HEADER)
_HEADER = """// intent_trace tilelang-metal helpers: IEEE numerics, so build with fast math off (MTLMathModeSafe).
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
#pragma clang fp contract(off)
#define itm_return() return
"""


def supports(d: T.DType) -> bool:
    """Whether values of ``d`` can live in this target's kernels (Metal has no 64-bit float)."""
    return d.name in M_TYPE


def launch(prelude: str | None, plan=None) -> str:
    """The plan's grid of threadgroups (:mod:`.metal_grid`), or one threadgroup of one thread (the serial program);
    the prelude always defines at least ``itm_return``."""
    prelude = prelude or repr(_HEADER)
    if plan is not None:
        return plan.launch(prelude)
    return f"with T.Kernel(1, threads=1, prelude={prelude}) as _:"


# --- helper bodies ---------------------------------------------------------------------------------------------
# Each renderer takes the helper's dtypes and returns the body of a function whose parameters are a, b, c.

def _m(d: T.DType) -> str:
    return M_TYPE[d.name]


def _u(d: T.DType) -> str:
    return "ulong" if d.bits == 64 else "uint"


def _narrow(d: T.DType) -> bool:
    return d.name in ("f16", "bf16")


_FORMAT = {"f32": (23, 8), "f16": (10, 5), "bf16": (7, 8)}


def _round(d: T.DType, expr: str) -> str:
    """A float expression rounded to ``d``'s format (RNE; a NaN comes back quiet, as a conversion makes it)."""
    return f"itb_r{d.name}({expr})" if _narrow(d) else expr


def _quiet(d: T.DType, x: str) -> str:
    return _round(d, x) if _narrow(d) else f"itb_quiet({x})"


def _from_bits(d: T.DType, bits: str) -> str:
    return {"f32": f"itb_f32({bits})", "f16": f"itb_f16_decode((ushort)({bits}))",
            "bf16": f"itb_bf16_decode((ushort)({bits}))"}[d.name]


def _df_result(d: T.DType) -> str:
    """The double-float ``y`` times ``2^k`` rounded once to ``d``."""
    return _from_bits(d, f"itb_df_bits(y, k, {', '.join(map(str, _FORMAT[d.name]))})")


def _int_literal(d: T.DType, v: int) -> str:
    if d.bits == 64 and v == -(1 << 63):
        return "(-9223372036854775807L - 1)"
    if d.bits == 32 and v == -(1 << 31):
        return "(-2147483647 - 1)"
    suffix = {"long": "L", "ulong": "ul", "uint": "u"}.get(_m(d), "")
    return f"({_m(d)}){v}{suffix}"


def _arith(op: str, sym: str):
    def body(d):
        if d.is_float:  # computed in f32 and rounded once more for f16/bf16, as tilelang-c does
            return f"return {_round(d, f'itb_{op}32(a, b)')};"
        return f"return ({_m(d)})(({_u(d)})a {sym} ({_u(d)})b);"
    return body


# Division is the hardware's: the MSL specification (version 2.0, 2017-09-12), section 7.4 "Floating-Point
# Accuracy", Table 36 (single-precision operations and functions with fast math disabled, MTLMathModeSafe, which
# the prelude's pragmas select) lists ``x / y`` and ``1.0 / x`` as "Correctly rounded": T3's division, so no
# software routine is kept for it (f16/bf16: the f32 quotient of two narrow values rounded once is the correctly
# rounded narrow quotient, 24 >= 2 * 11 + 2 bits). Only the NaN result is decided in code (compare and select).
# With flush_to_zero (approximate=True) the same division between flushed operands, flushed: Table 37 (fast math)
# allows ``x / y`` 2.5 ulp, over T4's 2 for ``fdiv(approximate=True)``, so fast::divide is not used.
def _div(d):
    return _nan_select(d, "a / b", "ab") if d.is_float else None


def _div_ftz(d):
    if d.name != "f32":
        return None
    return (f"float x = itb_ftz32(a), y = itb_ftz32(b); float r = itb_ftz32(x / y); if (r == r) return r; "
            f"if (x != x) return itb_quiet(x); if (y != y) return itb_quiet(y); return itb_nan();")


def _nan_select(d: T.DType, expr: str, operands: str, invalid: str = "itb_nan()") -> str:
    """``expr`` (an f32 value of the operands), rounded once to ``d``; a NaN result decided in code: the first NaN
    operand, quieted (x86's propagation, which the oracle has), else ``invalid`` (x86's default NaN, or the value
    the oracle's libm gives for that function). One compare on the path of every number (T10)."""
    nans = " ".join(f"if ({n} != {n}) return {_quiet(d, n)};" for n in operands)
    return f"float r = {expr}; if (r == r) return {_round(d, 'r')}; {nans} return {_round(d, invalid)};"






def _pow(d):
    if d.is_float:  # C99 pow: pow(x, 0) = pow(1, y) = 1 even for NaN; the rest is precise::pow (MSL Table 36)
        # (a NaN a keeps its sign, but an odd integer b clears it: as glibc's pow, which tilelang-c calls)
        odd = "(itb_floor32(b) == b && itb_abs32(b) < 16777216.0f && (((long)b) & 1) != 0)"
        return (f"if (b == 0 || a == 1.0f) return 1.0f; if (a != a) return {_quiet(d, f'({odd} ? itb_abs32(a) : a)')}; "
                f"if (b != b) return {_quiet(d, 'b')}; {_nan_select(d, 'metal::precise::pow(a, b)', '')}")
    if not d.is_int:
        return None
    u = _u(d)
    neg = "if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0); " if d.kind == "int" else ""
    return (f"{neg}{u} r = 1, x = ({u})a; ulong e = (ulong)b; "
            f"while (e != 0) {{ if ((e & 1) != 0) r *= x; x *= x; e >>= 1; }} return ({_m(d)})r;")


def _minmax(is_max: bool):
    def body(d):
        if d.is_float:  # IEEE 754-2019 maximum/minimum: a NaN operand wins (the first one); -0 < +0
            zero = "b : a" if is_max else "a : b"
            cmp = ">" if is_max else "<"
            return (f"if (a != a) return a; if (b != b) return b; "
                    f"if (a == 0 && b == 0) return (itb_bits32(a) >> 31) != 0 ? {zero}; return a {cmp} b ? a : b;")
        return f"return a {'>' if is_max else '<'} b ? a : b;" if d.is_int else None
    return body








def _neg(d):
    if d.is_float:  # flips the sign bit, also of NaN
        return "return itb_f32(itb_bits32(a) ^ 0x80000000u);"
    return f"return ({_m(d)})(({_u(d)})0 - ({_u(d)})a);" if d.is_int else None


def _abs(d):
    if d.is_float:
        return "return itb_abs32(a);"
    if d.kind == "uint":
        return "return a;"
    return f"return a < 0 ? ({_m(d)})(({_u(d)})0 - ({_u(d)})a) : a;" if d.is_int else None




# --- the T4 library: Metal's own functions (T10) -----------------------------------------------------------
# Each T4 function Metal has is ``metal::precise::<name>`` (MSL Table 36: its documented accuracy is the vendor bound
# kernel_bounds.VENDOR_ULPS["tilelang-metal"] charges, not T4's 2 ulp). T4's special values (C99 Annex F) and signed
# zeros are decided in code before the call, a NaN result by compare and select after it (the first NaN operand
# quieted, else the NaN the oracle's libm gives: x86's default NaN, +NaN for asin), so they hold whatever the
# library returns there. Two are compositions of precise:: calls (Metal has neither): log1p (Goldberg's
# log(u) * x / (u - 1), u = 1 + x, whose rounding error in u cancels) and sigmoid (e / (1 + e) with e = exp(-|x|)
# on the side where it cannot overflow). erf, erfc, lgamma and i0 have no Metal function at all: they stay the
# double-float evaluations of metal_math (the one place software math remains, because there is nothing native).
# ``_ftz`` families (flush_to_zero=True, which T4 allows only with approximate=True) use ``metal::fast::`` on
# flushed operands and flush the result.
_INF, _NAN_POS = "itb_f32(0x7f800000u)", "itb_f32(0x7fc00000u)"
_NATIVE = {  # family -> (the special cases, in terms of a, the value: a call of {ns}, the invalid NaN)
    "exp": (f"if (a == -{_INF}) return 0.0f;", "{ns}::exp(a)", "itb_nan()"),
    "exp2": (f"if (a == -{_INF}) return 0.0f;", "{ns}::exp2(a)", "itb_nan()"),
    "log": (f"if (a == 0) return -{_INF}; if (a < 0) return itb_nan(); if (a == {_INF}) return a;",
            "{ns}::log(a)", "itb_nan()"),
    "log1p": (f"if (a == 0 || a == {_INF}) return a; if (a == -1.0f) return -{_INF}; if (a < -1.0f) return itb_nan();",
              "itb_log1p_native(a)", "itb_nan()"),
    "sin": ("if (a == 0) return a;", "{ns}::sin(a)", "itb_nan()"),
    "cos": ("if (a == 0) return 1.0f;", "{ns}::cos(a)", "itb_nan()"),
    "asin": (f"if (a == 0) return a; if (itb_abs32(a) > 1.0f) return {_NAN_POS};", "{ns}::asin(a)", _NAN_POS),
    "tanh": (f"if (a == 0) return a; if (itb_abs32(a) == {_INF}) return a < 0 ? -1.0f : 1.0f;",
             "{ns}::tanh(a)", "itb_nan()"),
    "rsqrt": (f"if (a == 0) return itb_f32(itb_bits32(a) | 0x7f800000u); if (a < 0) return itb_nan(); "
              f"if (a == {_INF}) return 0.0f;", "{ns}::rsqrt(a)", "itb_nan()"),
    "sigmoid": (f"if (a == {_INF}) return 1.0f; if (a == -{_INF}) return 0.0f;", "itb_sigmoid_native(a)",
                "itb_nan()"),
}
_SOFTWARE = ("lgamma", "erf", "erfc", "i0", "expm1")  # no Metal function: metal_math's double-float evaluations


def _special(d: T.DType, text: str) -> str:
    """The special cases' ``return v;`` statements rounded to ``d`` (exact: every special value is a narrow one)."""
    return re.sub(r"return ([^;]+);", lambda m: f"return {_round(d, m.group(1))};", text) if _narrow(d) else text


def _native(fn: str, ftz: bool = False):
    special, call, invalid = _NATIVE[fn]
    ns = "metal::fast" if ftz else "metal::precise"
    call = call.format(ns=ns)

    def body(d):
        if not d.is_float or (ftz and _narrow(d)):
            return None
        nan = f"if (a != a) return {_quiet(d, 'a')}; "
        if ftz:  # flushed operand, flushed result (the special cases see the flushed operand)
            return (f"a = itb_ftz32(a); {nan}{special} float r = itb_ftz32({call}); if (r == r) return r; "
                    f"return {invalid};")
        return f"{nan}{_special(d, special)} {_nan_select(d, call, '', invalid)}"
    return body


def _math(fn: str, ftz: bool = False):
    # A double-float evaluation rounded once (metal_math), for the functions Metal lacks; the ftz forms are f32 only.
    def body(d):
        if not d.is_float or (ftz and _narrow(d)):
            return None
        if ftz:
            return (f"float x = itb_ftz32(a); if (x != x) return itb_quiet(x); int k = 0; "
                    f"itb_df y = itb_{fn}_df(x, k); return itb_ftz32({_df_result(d)});")
        return f"if (a != a) return {_quiet(d, 'a')}; int k = 0; itb_df y = itb_{fn}_df(a, k); return {_df_result(d)};"
    return body


def _fma(d):
    if not d.is_float:
        return None
    nan = (f"if (a != a) return {_quiet(d, 'a')}; if (b != b) return {_quiet(d, 'b')}; "
           f"if (c != c) return {_quiet(d, 'c')}; ")
    if not _narrow(d):
        return nan + "return itb_dnan(metal::fma(a, b, c));"
    # the exact a*b + c rounded once to the format (integer arithmetic), infinities as IEEE has them
    inf = "itb_f32(0x7f800000u)"
    return (nan + f"if (itb_abs32(c) == {inf} && itb_abs32(a) < {inf} && itb_abs32(b) < {inf}) return c; "
            f"if (itb_abs32(a) == {inf} || itb_abs32(b) == {inf} || itb_abs32(c) == {inf}) "
            f"return {_round(d, 'itb_dnan(a * b + c)')}; "
            f"return {_from_bits(d, 'itb_fma_bits(a, b, c, ' + ', '.join(map(str, _FORMAT[d.name])) + ')')};")


def _limits(d: T.DType) -> tuple:
    lo, hi = (-(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1) if d.kind == "int" else (0, (1 << d.bits) - 1)
    return _int_literal(d, lo), _int_literal(d, hi), f"{lo}.0f", f"{int(np.float32(hi))}.0f"  # exact float bounds


def _cast(src, dst):
    if dst.is_bool:
        return "return a != 0;"
    if dst.is_float and src.is_int and src.bits >= 32:  # RNE from the exact integer, in integer arithmetic
        mag = "a < 0 ? (ulong)0 - (ulong)a : (ulong)a" if src.kind == "int" else "(ulong)a"
        sign = "a < 0 ? 1u : 0u" if src.kind == "int" else "0u"
        man, width = _FORMAT[dst.name]
        return f"return {_from_bits(dst, f'itb_rne({sign}, {mag}, 0, {man}, {width})')};"
    if _narrow(dst) and not src.is_bool:  # from an exact float or small integer: one rounding
        return f"return {_round(dst, 'a' if src.is_float else '(float)a')};"
    if src.is_float and dst.is_float:  # f16/bf16 -> f32: a signaling NaN comes back quiet, as through double
        return "return a != a ? itb_quiet(a) : a;"
    if src.is_bool or dst.is_float or (src.is_int and dst.is_int):
        return f"return ({_m(dst)})a;"  # int -> int wraps; bool and small integers -> float are exact
    # float -> integer: truncate toward zero, saturate, NaN -> 0 (T3)
    lo, hi, flo, fhi = _limits(dst)
    return f"if (a != a) return 0; if (a <= {flo}) return {lo}; if (a >= {fhi}) return {hi}; return ({_m(dst)})a;"


def _bitcast(src, dst):
    if _narrow(src) or _narrow(dst):
        get = f"ushort u = itb_{src.name}_encode(a);" if _narrow(src) else "ushort u = as_type<ushort>(a);"
        put = f"return itb_{dst.name}_decode(u);" if _narrow(dst) else f"return as_type<{_m(dst)}>(u);"
        return f"{get} {put}"
    if not (src.is_float or dst.is_float):
        return f"return ({_m(dst)})a;"  # same width: the same bits
    return f"return as_type<{_m(dst)}>(a);"


def _bits(d):
    if d.name in _FORMAT:  # f16/bf16 constants arrive as the bits of their float value
        return "return itb_f32(a);"
    if d.bits == 64 and d.is_int:
        return f"return ({_m(d)})(((ulong)a << 32) | b);"
    return None


def _random_bits(d):
    # T8: word counter % 4 of Philox4x32-10((lo32(block), hi32(block), 0, 0), (lo32(seed), hi32(seed))).
    return ("ulong k = b >> 2; return itb_philox_word((uint)k, (uint)(k >> 32), 0u, 0u, (uint)a, (uint)(a >> 32), "
            "(int)(b & 3u));")


def _mx(fmt: str):
    def body(d):
        if d.name != "f32":
            return None
        # a: the carrier byte, b: the element's position in its group (e2m1: its parity picks the nibble), c: the
        # e8m0 scale code. value * 2^(c - 127) is exact unless it overflows (integer rounding: no subnormal flush).
        code = "(a >> (4 * (b & 1))) & 15" if fmt == "e2m1" else "a"
        return (f"uint v = itb_mx_{fmt}[{code}]; if ((v & 0x7f800000u) == 0x7f800000u) return itb_f32(v); "
                "if (c == 255) return itb_f32(0x7fc00000u); "
                "return itb_f32(itb_rne(v >> 31, itb_mant(v), itb_expo(v) + (int)c - 127, 23, 8));")
    return body


RENDER: dict = {
    "add": _arith("add", "+"), "sub": _arith("sub", "-"), "mul": _arith("mul", "*"), "div": _div,
    "div_ftz": _div_ftz, "pow": _pow, "max": _minmax(True), "min": _minmax(False), **integer_renderers(_m, _u),
    **{name: (lambda sym: lambda d: f"return a {sym} b;")(sym) for name, sym in
       (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="))},
    "neg": _neg, "abs": _abs, "select": lambda d: "return a ? b : c;", "fma": _fma,
    "floor": lambda d: f"return {_round(d, 'itb_floor32(a)')};" if d.is_float else None,
    "sqrt": lambda d: f"return {_round(d, 'itb_sqrt32(a)')};" if d.is_float else None,
    "cast": _cast, "bitcast": _bitcast, "bits": _bits,
    "decode": lambda d: f"return itb_{d.name}_decode(a);" if _narrow(d) else None,
    "encode": lambda d: f"return itb_{d.name}_encode(a);" if _narrow(d) else None,
    "random_bits": _random_bits, "mx_e2m1": _mx("e2m1"), "mx_e4m3": _mx("e4m3"),
}
for _name in _NATIVE:
    RENDER[_name] = _native(_name)
    RENDER[_name + "_ftz"] = _native(_name, ftz=True)
for _name in _SOFTWARE:
    RENDER[_name] = _math(_name)
    RENDER[_name + "_ftz"] = _math(_name, ftz=True)
RENDER["sqrt_ftz"] = _math("sqrt", ftz=True)
RENDER["floor_ftz"] = _math("floor", ftz=True)
# ``approximate=True`` alone: the precise bodies, within T4's bound (metal::fast:: may flush subnormals, which only
# the ``_ftz`` forms allow)
RENDER.update({op.name + "_approx": RENDER[op.name] for op in APPROXIMATE})


def helper_source(name: str, family: str, dtypes: tuple, ret: T.DType, args: tuple) -> str | None:
    """The Metal definition of one helper, or None when this target cannot provide it."""
    render = RENDER.get(family)
    if render is None or not all(supports(d) for d in (*dtypes, ret, *args)):
        return None
    body = render(*dtypes)
    if body is None:
        return None
    params = ", ".join(f"{_m(t)} {n}" for t, n in zip(args, "abc"))
    return f"static inline {_m(ret)} {name}({params}) {{ {body} }}"


# --- helpers with pointer operands (extern.py): atomics, the Philox block function, k-quant blocks (metal_quant) --
# A pointer's Metal type carries its address space (device for a view, thread for a local buffer), so these are
# templates over the pointer type. Atomics are Metal's device atomics on 32-bit elements (metal_atomics), plain
# read-modify-writes on the others, which only the serial program (one thread) calls.

def extern_source(name: str, family: str, dtypes: tuple, ret: T.DType, args: tuple, combine: str | None = None):
    """The Metal definition of a helper with pointer operands (atomics, ``philox4x32_10``, the k-quant blocks of
    :mod:`.metal_quant`), or None when this target cannot provide it."""
    atomic = family.startswith("atomic_")
    names = ("p", "a", "b") if atomic else tuple(f"p{k}" for k in range(len(args)))
    if any(not isinstance(a, str) and not supports(a) for a in args) or not supports(ret):
        return None
    if atomic:
        (d,) = dtypes
        if not (d.is_int or d.name == "f32") or (family.startswith("atomic_iadd") and d.bits not in (32, 64)):
            return None
        body = metal_atomics.body(family.split("_")[1], d, _m(d), combine)
    elif family == "philox4x32_10" or family in QUANT_FAMILIES:
        body = f"return itb_{family}({', '.join(names)});"
    else:
        return None
    pointers = [n for a, n in zip(args, names) if isinstance(a, str)]
    params = [f"P{n} {n}" if isinstance(a, str) else f"{_m(a)} {n}" for a, n in zip(args, names)]
    template = ", ".join(f"typename P{n}" for n in pointers)
    return f"template <{template}> static inline {_m(ret)} {name}({', '.join(params)}) {{ {body} }}"


BASE["itb_atomic_add64"] = metal_atomics.ADD64
BASE["itb_philox_word"] = """static inline uint itb_philox_word(uint c0, uint c1, uint c2, uint c3, uint k0, uint k1,
                                   int w) {
  /* Philox4x32-10 (Random123, T8): the key is bumped before rounds 2..10; returns output word w */
  for (int r = 0; r < 10; ++r) {
    if (r != 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    ulong p0 = (ulong)0xD2511F53u * c0, p1 = (ulong)0xCD9E8D57u * c2;
    uint n0 = (uint)(p1 >> 32) ^ c1 ^ k0, n2 = (uint)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint)p1; c3 = (uint)p0; c0 = n0; c2 = n2;
  }
  return w == 0 ? c0 : w == 1 ? c1 : w == 2 ? c2 : c3;
}"""
BASE["itb_philox4x32_10"] = """template <typename P> static inline int itb_philox4x32_10(P w) {
  /* w[0..3] counter words, w[4..5] key words -> w[0..3] the block's output words (the known-answer test seam) */
  uint c[4];
  for (int i = 0; i < 4; ++i)
    c[i] = itb_philox_word((uint)w[0], (uint)w[1], (uint)w[2], (uint)w[3], (uint)w[4], (uint)w[5], i);
  for (int i = 0; i < 4; ++i) w[i] = c[i];
  return 0;
}"""


def _mx_tables() -> None:
    from ... import _format_mx as MX  # noqa: PLC0415  (decoded by ml_dtypes: T6 forbids hand-written tables)

    for name, values in (("itb_mx_e2m1", MX.code_table("e2m1")), ("itb_mx_e4m3", MX.code_table("e4m3"))):
        bits = np.asarray(values, np.float64).astype(np.float32).view(np.uint32)  # exact: at most 4 bits, |v| <= 448
        BASE[name] = f"constant uint {name}[{len(bits)}] = {{{', '.join(f'0x{int(b):08x}u' for b in bits)}}};"


_mx_tables()

_BASE_NAME = re.compile(r"\bitb_\w+")


def prelude(definitions: list) -> str:
    """The Metal text placed before the kernel: the header, the internal helpers the definitions use, then them."""
    needed = c.base_helpers(definitions, BASE, _BASE_NAME)
    return "\n".join([_HEADER.rstrip("\n"), *(BASE[n] for n in needed), *definitions]) + "\n"


# --- source without a Mac; running with one -----------------------------------------------------------------------

kernel_source = metal_lower.kernel_source  # the Metal source of a program (lowered on any OS, cached)


def to_device(tensor):
    return tensor.to("mps")


def synchronize() -> None:
    import torch

    torch.mps.synchronize()


def require_runtime() -> None:
    """Raise RuntimeError unless this machine can run Metal kernels (macOS on Apple silicon, PyTorch with MPS)."""
    system, machine = platform.system(), platform.machine()
    why = f"this machine is {system} {machine}"
    if system == "Darwin" and machine == "arm64":
        try:
            import torch

            if torch.backends.mps.is_available():
                return
            why = "PyTorch's MPS backend is not available"
        except Exception as e:
            why = f"torch failed to import: {e}"
    raise RuntimeError(f"target {NAME} needs a Metal runtime (macOS on an Apple GPU, with PyTorch's MPS backend) to "
                       f"run kernels; {why}. The Metal source is generated on any OS: see the executable's .source")
