"""The ``tilelang-c`` target's choices: TileLang's C target, one serial program, C helper bodies.

Everything target-specific about ``tilelang-c`` is here; the lowering (:mod:`.emitter`) is shared.

- Launch: one tile program (``T.Kernel(1)``) whose loops are ``T.serial``: the C target is
  single-threaded and lowers ``T.Parallel`` to serial loops anyway.
- Compiler flags: TileLang compiles the generated C++ with ``g++/clang++ -std=c++17 -fPIC -shared``
  and no optimisation level; ``tilelang.compile(compile_flags=...)`` appends ours (LibraryGenerator
  splits and de-duplicates them). ``-ffp-contract=off`` forbids FMA contraction (T3: ``a*b + c``
  rounds twice), ``-fno-fast-math`` keeps IEEE semantics, ``-fwrapv`` makes signed index arithmetic
  wrap instead of being undefined, and ``-fno-strict-aliasing`` keeps TVM's pointer-cast
  ``reinterpret`` well defined.
- Helpers: every KIR value operation is a call of a small helper (:mod:`.scalar_rules` names
  them); this module writes their C++ bodies, which the kernel receives through
  ``T.Kernel(prelude=...)``. TVM declares each ``T.call_extern`` callee ``extern "C"`` itself, so the
  definitions are ``extern "C" inline``. Helpers keep the numerics out of reach of TVM's
  simplifier, which treats float arithmetic algebraically (it folds ``x - x`` to 0 and
  ``x + 0.0`` to ``x``) and integer arithmetic as if it never overflowed.
"""
from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import string
import subprocess
import tempfile

import attrs

from ... import caches
from ... import types as T
from ...graph.traits import APPROXIMATE
from .c_blocks import BLOCK_BASE, SCALAR_BASE
from .integer_bodies import integer_renderers

NAME = "tilelang-c"
TILELANG_TARGET = "c"
EXECUTION_BACKEND = "cython"
LANGUAGE = "tilelang.cpu.language"
COMPILE_FLAGS = ("-O2", "-ffp-contract=off", "-fno-fast-math", "-fwrapv", "-fno-strict-aliasing")


def launch(prelude: str | None, plan=None) -> str:
    """The header of the kernel body: one serial tile program (or a plan's blocks, one after another: the tests
    run CUDA's parallel-loop mapping here, cuda_kernels.ParallelGrid with ``emulated``)."""
    if plan is not None:
        return plan.launch(prelude)
    return f"with T.Kernel(1, prelude={prelude}) as _:" if prelude else "with T.Kernel(1) as _:"


def claim_source() -> str:
    """``itc_claim(&E[0], code)``: record the first failed check (the C target's threads run one at a time)."""
    return ('extern "C" inline bool itc_claim(int64_t* e, int64_t code) { if (*e != 0) return false; '
            '*e = code; return true; }')


def compile_flags() -> list:
    """COMPILE_FLAGS plus a precompiled TileLang runtime header when one can be built here.

    TileLang's C output includes ``tl_templates/cpp/common.h`` (with ``half.hpp``), which costs about
    0.6 s of the ~1 s g++ spends per kernel. We precompile it once per machine, compiler and flags
    (``-include`` of a one-line header whose ``.gch`` sits beside it); g++ falls back to the plain
    header if the PCH does not match, so this only ever saves time.
    """
    flags = _pch_flags(caches.cache_root())
    if flags and not os.path.exists(flags[1]):  # a removed temporary verification root: build it again
        _pch_flags.cache_clear()
        flags = _pch_flags(caches.cache_root())
    return [*COMPILE_FLAGS, *flags]


@functools.lru_cache(maxsize=None)
def _pch_flags(root: str) -> tuple:
    """The PCH flags for the cache ``root`` (``intent_trace.caches``; keyed by it, as a verification redirects it)."""
    try:
        import tilelang
        from tilelang.contrib.cc import get_cplus_compiler

        cxx = get_cplus_compiler()
        if cxx is None:
            return ()
        src = os.path.join(os.path.dirname(tilelang.__file__), "src")
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
        key = hashlib.sha256("\0".join([cxx, version, src, tilelang.__version__, *COMPILE_FLAGS]).encode()).hexdigest()
        directory = os.path.join(root, f"tilelang-pch-{key[:16]}")
        header = os.path.join(directory, "it_tl_common.h")
        if not os.path.exists(header + ".gch"):
            os.makedirs(directory, exist_ok=True)
            tmp = tempfile.mkdtemp(dir=directory)
            with open(os.path.join(tmp, "it_tl_common.h"), "w") as f:
                f.write("#include <tl_templates/cpp/common.h>\n")
            subprocess.run([cxx, "-std=c++17", "-fPIC", f"-I{src}", *COMPILE_FLAGS, "-x", "c++-header",
                            os.path.join(tmp, "it_tl_common.h"), "-o", os.path.join(tmp, "it_tl_common.h.gch")],
                           capture_output=True, check=True, timeout=120)
            os.replace(os.path.join(tmp, "it_tl_common.h"), header)
            os.replace(os.path.join(tmp, "it_tl_common.h.gch"), header + ".gch")
            os.rmdir(tmp)
        return ("-include", header)
    except Exception:  # no PCH: the plain header works, only slower
        return ()


def to_device(tensor):
    """Where the kernel's arguments live: host memory (torch tensors that share the staged arrays)."""
    return tensor


def synchronize() -> None:
    """A C-target call returns when its work is done."""


def require_runtime() -> None:
    try:
        import tilelang  # noqa: F401
        from tilelang.contrib.cc import get_cplus_compiler
    except Exception as e:
        raise RuntimeError(f"target {NAME} needs the tilelang package (0.1.15), which failed to import: {e}") from e
    if get_cplus_compiler() is None:
        raise RuntimeError(f"target {NAME} needs a C++ compiler (g++, clang++ or c++ on PATH, or $CXX) to build "
                           f"TileLang's C output; none was found")


# --- dtypes --------------------------------------------------------------------------------------------

C_TYPE = {"bool": "bool", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t", "index": "int64_t",
          "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "f32": "float", "f64": "double",
          "f16": "float", "bf16": "float"}  # f16/bf16 values are floats holding the format's values (T3, T4)
_LIMITS = {"i8": ("INT8_MIN", "INT8_MAX"), "i16": ("INT16_MIN", "INT16_MAX"), "i32": ("INT32_MIN", "INT32_MAX"),
           "i64": ("INT64_MIN", "INT64_MAX"), "index": ("INT64_MIN", "INT64_MAX"), "u8": ("0", "UINT8_MAX"),
           "u16": ("0", "UINT16_MAX"), "u32": ("0", "UINT32_MAX"), "u64": ("0", "UINT64_MAX")}


def supports(d: T.DType) -> bool:
    """Whether values of ``d`` can live in this target's kernels."""
    return d.name in C_TYPE


# TileLang's C-target wrapper has no uint32 (and keeps bool buffers as int8), and passes scalars through a ctypes
# table without uint8, uint16 or uint32: such views and scalars travel as the TIR dtype of the same width given
# here (the bits unchanged) and are converted where they are loaded, stored or bound.
_VIEW_STORAGE = {"bool": "uint8", "u32": "int32", "f16": "uint16", "bf16": "uint16"}
_SCALAR_STORAGE = {"u8": "int8", "u16": "int16", "u32": "int32"}


def view_storage(d: T.DType) -> str | None:
    """The TIR dtype of a view's buffer when it differs from the value dtype."""
    return _VIEW_STORAGE.get(d.name)


def scalar_storage(d: T.DType) -> str | None:
    """The TIR dtype of a runtime scalar parameter when it differs from the value dtype."""
    return _SCALAR_STORAGE.get(d.name)


def _c(d: T.DType) -> str:
    return C_TYPE[d.name]


def _u(d: T.DType) -> str:
    """The unsigned type integer arithmetic wraps in (never promoted to int)."""
    return "uint64_t" if d.bits == 64 else "uint32_t"


def _f32(d: T.DType) -> bool:
    """Values held in a C float: f32, and f16/bf16 (whose results are rounded to their format)."""
    return d.name in ("f32", "f16", "bf16")


def _narrow(d: T.DType) -> bool:
    return d.name in ("f16", "bf16")


def _rf(d: T.DType) -> str:
    """float -> the nearest value of ``d`` (RNE), as a float."""
    return f"itb_r{d.name}"


def _df(d: T.DType) -> str:
    """double -> the nearest value of ``d`` (RNE, one rounding), as a float."""
    return f"itb_d{d.name}"


# --- helper bodies -------------------------------------------------------------------------------------
# Each renderer takes the helper's dtypes and returns the body of a function whose parameters are a, b, c.

def _arith(sym):
    def body(d):
        if _narrow(d):  # computed in f32 and rounded once more, as generic does (innocuous: f32 has >= 2p + 2 bits)
            return f"return {_rf(d)}(a {sym} b);"
        if d.is_float:
            return f"return a {sym} b;"
        return f"return ({_c(d)})(({_u(d)})a {sym} ({_u(d)})b);"
    return body


def _div(d):
    if _narrow(d):
        return f"return {_rf(d)}(a / b);"
    return "return a / b;" if d.is_float else None


def _div_ftz(d):
    if not d.is_float or _narrow(d):
        return None
    f = "itb_ftz32" if _f32(d) else "itb_ftz64"
    return f"return {f}({f}(a) / {f}(b));"






def _pow(d):
    if _narrow(d):
        return f"return {_df(d)}(pow((double)a, (double)b));"
    if d.is_float:
        return "return (float)pow((double)a, (double)b);" if _f32(d) else "return pow(a, b);"
    if not d.is_int:
        return None
    u = _u(d)
    neg = "if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0); " if d.kind == "int" else ""
    return (f"{neg}{u} r = 1, x = ({u})a; uint64_t e = (uint64_t)b; "
            f"while (e) {{ if (e & 1) r *= x; x *= x; e >>= 1; }} return ({_c(d)})r;")


def _minmax(is_max):
    def body(d):
        if d.is_float:
            bits = "itb_bits32" if _f32(d) else "itb_bits64"
            shift = 31 if _f32(d) else 63
            # IEEE 754-2019 maximum/minimum: a NaN operand wins (the first one); -0 < +0.
            zero = "b : a" if is_max else "a : b"
            cmp = ">" if is_max else "<"
            return (f"if (a != a) return a; if (b != b) return b; "
                    f"if (a == 0 && b == 0) return ({bits}(a) >> {shift}) ? {zero}; return a {cmp} b ? a : b;")
        if not d.is_int:
            return None
        return f"return a {'>' if is_max else '<'} b ? a : b;"
    return body








def _compare(sym):
    return lambda d: f"return a {sym} b;"


def _neg(d):
    if d.is_float:  # flips the sign bit, also of NaN
        return "return itb_f32(itb_bits32(a) ^ 0x80000000u);" if _f32(d) else \
            "return itb_f64(itb_bits64(a) ^ 0x8000000000000000ull);"
    return f"return ({_c(d)})(({_u(d)})0 - ({_u(d)})a);" if d.is_int else None


def _abs(d):
    if d.is_float:
        return "return itb_f32(itb_bits32(a) & 0x7fffffffu);" if _f32(d) else \
            "return itb_f64(itb_bits64(a) & 0x7fffffffffffffffull);"
    if d.kind == "uint":
        return "return a;"
    return f"return a < 0 ? ({_c(d)})(({_u(d)})0 - ({_u(d)})a) : a;" if d.is_int else None




def _floor(d):
    if not d.is_float:
        return None
    # Exact in every format. A NaN comes back quiet (IEEE; glibc's floor returns a signaling NaN unchanged), and
    # f16/bf16 NaNs as their conversion from float makes them (ml_dtypes' bfloat16 floor gives the canonical NaN).
    body = f"a != a ? a + a : {'floorf' if _f32(d) else 'floor'}(a)"
    return f"return {_rf(d)}({body});" if _narrow(d) else f"return {body};"


def _sqrt(d):
    if _narrow(d):
        return f"return {_df(d)}(sqrt((double)a));"
    if not d.is_float:
        return None
    return f"return a != a ? a + a : {'sqrtf' if _f32(d) else 'sqrt'}(a);"  # correctly rounded


# Unary math: computed in double from the exact input and rounded once (T4: within 2 ulp; libm's double
# functions are within 1 ulp, and the final rounding adds at most half an ulp of the result). Each entry is
# (the double function C calls, CUDA's precise single-precision function): tilelang-cuda calls the latter for f32,
# and for f16/bf16 computed in f32 (T10; cuda.py), within the bound its op's MathSpec cites (graph/ops.py). None:
# CUDA keeps the double body too (lgammaf's documented error is unbounded inside (-10.001, -2.264); CUDA has no
# sigmoid, and i0 is not worth cyl_bessel_i0f's 6 ulp).
_MATH = {"exp": ("exp", "expf"), "log": ("log", "logf"), "log1p": ("log1p", "log1pf"), "lgamma": ("lgamma", None),
         "sin": ("sin", "sinf"), "asin": ("asin", "asinf"), "cos": ("cos", "cosf"), "erf": ("erf", "erff"),
         "erfc": ("erfc", "erfcf"), "exp2": ("exp2", "exp2f"), "tanh": ("tanh", "tanhf"), "i0": ("itb_i0", None),
         "rsqrt": ("itb_rsqrt", "rsqrtf"), "sigmoid": ("itb_sigmoid", None), "expm1": ("expm1", "expm1f")}
#: helper family -> the CUDA single-precision library function that computes it on tilelang-cuda (cuda.py)
CUDA_F32_MATH = {family: f32 for family, (_, f32) in _MATH.items() if f32 is not None}


def _math(fn, ftz=False):
    def body(d):
        if not d.is_float or (ftz and _narrow(d)):
            return None
        if _narrow(d):  # rounded from double as NumPy/ml_dtypes convert a NaN (_df)
            return _math_value(fn, ftz, d)
        return _QUIET_NAN[d.name == "f64"] + _math_value(fn, ftz, d)
    return body


# T3: an f32/f64 NaN operand comes back quieted with its payload and sign, set bit by bit (a libm may return a
# signalling NaN as it is, and a GPU's arithmetic returns its canonical NaN, so neither `return a` nor `a + a` would
# do)
_QUIET_NAN = {False: "if (a != a) return itb_f32(itb_bits32(a) | 0x00400000u); ",
              True: "if (a != a) return itb_f64(itb_bits64(a) | 0x0008000000000000ull); "}


def _math_value(fn, ftz, d) -> str:
    if _narrow(d):
        return f"return {_df(d)}({fn}((double)a));"
    if not ftz:
        return f"return (float){fn}((double)a);" if _f32(d) else f"return {fn}(a);"
    if _f32(d):
        return f"return itb_ftz32((float){fn}((double)itb_ftz32(a)));"
    return f"return itb_ftz64({fn}(itb_ftz64(a)));"


def _select(d):
    return "return a ? b : c;"


def _fma(d):
    if not d.is_float:
        return None
    if _narrow(d):  # the exact result rounded to odd in double, then once to the format (as generic)
        return f"return {_df(d)}(itb_fma_rto((double)a, (double)b, (double)c));"
    return "return fmaf(a, b, c);" if _f32(d) else "return fma(a, b, c);"


def _cast(src, dst):
    if dst.is_bool:
        return "return a != 0;"
    if _narrow(dst) and not src.is_bool:
        if src.name in ("i64", "index", "u64"):  # to double rounded to odd: the final rounding stays single
            return f"return {_df(dst)}(itb_{'u' if src.name == 'u64' else 'i'}64_rto(a));"
        return f"return {_df(dst)}((double)a);"
    if src.is_float and dst.is_float:  # as generic converts (through double): a signaling NaN comes back quiet
        if _c(src) == _c(dst):  # f16/bf16 -> f32: GCC would fold (float)(double)a to a, so quiet it by hand
            return "return a != a ? itb_f32(itb_bits32(a) | 0x400000u) : a;"
        if _narrow(src):  # -> f64: NumPy widens a half exactly, keeping a signaling NaN signaling
            return ("if (a != a) { uint32_t u = itb_bits32(a); return itb_f64(((uint64_t)(u >> 31) << 63) | "
                    "0x7ff0000000000000ull | ((uint64_t)(u & 0x7fffffu) << 29)); } return (double)a;")
        return f"return ({_c(dst)})a;"
    if src.is_bool or dst.is_float or (src.is_int and dst.is_int):
        return f"return ({_c(dst)})a;"  # int -> int wraps (two's complement); int/float -> float rounds RNE
    # float -> integer: truncate toward zero, saturate, NaN -> 0 (T3). (F)MIN is exact; (F)MAX may round up to
    # 2^bits, which is why the upper test is >=.
    lo, hi = _LIMITS[dst.name]
    f = _c(src)
    return (f"if (a != a) return 0; if (a <= ({f}){lo}) return {lo}; if (a >= ({f}){hi}) return {hi}; "
            f"return ({_c(dst)})a;")


def _bitcast(src, dst):
    if _narrow(src) or _narrow(dst):
        get = f"uint16_t u = itb_{src.name}_encode(a);" if _narrow(src) else "uint16_t u; memcpy(&u, &a, 2);"
        put = f"return itb_{dst.name}_decode(u);" if _narrow(dst) else f"{_c(dst)} r; memcpy(&r, &u, 2); return r;"
        return f"{get} {put}"
    return f"{_c(dst)} r; memcpy(&r, &a, sizeof r); return r;"


def _decode(d):
    return f"return itb_{d.name}_decode(a);" if _narrow(d) else None


def _encode(d):
    return f"return itb_{d.name}_encode(a);" if _narrow(d) else None


def _bits(d):
    if _f32(d):  # f16/bf16 constants arrive as the bits of their float value
        return "return itb_f32(a);"
    if d.name == "f64":
        return "return itb_f64(((uint64_t)a << 32) | b);"
    if d.bits == 64 and d.is_int:
        return f"return ({_c(d)})(((uint64_t)a << 32) | b);"
    return None


RENDER: dict = {
    "add": _arith("+"), "sub": _arith("-"), "mul": _arith("*"), "div": _div, "div_ftz": _div_ftz,
    "pow": _pow, "max": _minmax(True), "min": _minmax(False), **integer_renderers(_c, _u),
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"), "le": _compare("<="), "gt": _compare(">"),
    "ge": _compare(">="), "neg": _neg, "abs": _abs,
    "floor": _floor, "sqrt": _sqrt, "select": _select, "fma": _fma, "cast": _cast, "bitcast": _bitcast,
    "bits": _bits, "decode": _decode, "encode": _encode,
}
for _name, (_fn, _) in _MATH.items():
    RENDER[_name] = _math(_fn)
    RENDER[_name + "_ftz"] = _math(_fn, ftz=True)
RENDER["sqrt_ftz"] = _math("sqrt", ftz=True)
RENDER["floor_ftz"] = _math("floor", ftz=True)
# ``approximate=True`` alone (scalar_rules.option_family): C computes the exact result, which meets T4's bound
RENDER.update({op.name + "_approx": RENDER[op.name] for op in APPROXIMATE})


# Internal helpers the bodies call (static: TVM never declares them). Included when a body names them:
# the scalar ones and the block ones of c_blocks.py, the MX decoding tables (below).
BASE = {**SCALAR_BASE, **BLOCK_BASE}

_BASE_NAME = re.compile(r"\bitb_\w+")


@attrs.frozen(slots=True)
class Spelling:
    """How a C++ dialect qualifies what the helper bodies define: a helper TVM calls (``function``), an internal
    file-scope function (``static``), a file-scope table (``table``), and its count-leading-zeros builtin. The
    bodies are one text; tilelang-c renders them with :data:`C_SPELLING`, tilelang-cuda with its device spelling."""

    function: str
    static: str
    table: str
    clz: str

    def render(self, template: str) -> str:
        """A definition of the internal helpers (:data:`BASE`), its ``$`` slots filled with this spelling."""
        return string.Template(template).substitute(static=self.static, table=self.table, clz=self.clz)


C_SPELLING = Spelling('extern "C" inline', "static inline", "static const", "__builtin_clzll")


def helper_source(name: str, family: str, dtypes: tuple, ret: T.DType, args: tuple,
                  spelling: Spelling = C_SPELLING) -> str | None:
    """The C++ definition of one helper, or None when this target cannot provide it."""
    render = RENDER.get(family)
    if render is None or not all(supports(d) for d in (*dtypes, ret, *args)):
        return None
    body = render(*dtypes)
    if body is None:
        return None
    params = ", ".join(f"{_c(t)} {n}" for t, n in zip(args, "abc"))
    return f'{spelling.function} {_c(ret)} {name}({params}) {{ {body} }}'


def base_helpers(definitions: list, base: dict, pattern=None) -> list:
    """The internal helpers (``itb_*`` names in ``base``) the definitions use, each after its own dependencies."""
    pattern = pattern or _BASE_NAME
    needed: list = []
    visiting: set = set()

    def need(text: str) -> None:
        for name in pattern.findall(text):
            if name not in needed and name not in visiting:
                visiting.add(name)
                need(base[name])  # its own dependencies first
                needed.append(name)

    for d in definitions:
        need(d)
    return needed


def prelude(definitions: list, spelling: Spelling = C_SPELLING) -> str:
    """The C++ text placed before the kernel: the internal helpers the definitions use, then them."""
    return "\n".join(["#include <string.h>", "#include <math.h>", "#include <stdint.h>",
                      *(spelling.render(BASE[n]) for n in base_helpers(definitions, BASE)), *definitions]) + "\n"


# === Atomics, RNG, microscaling decoding and k-quant blocks (atomic.py, random.py, scaled.py, quant.py) =======
# Helpers with pointer operands (an element's address, a block's buffers) are written by ``extern_source``: its
# ``args`` are DTypes (a value of that dtype) or TIR storage dtype names (a pointer to elements stored as that).

_TIR_C = {"bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
          "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t", "float32": "float",
          "float64": "double"}


def _atomic_body(op: str, d: T.DType, combine: str | None) -> str:
    # tilelang-c runs one serial program (one thread): a plain read, modify and write of the element, in program
    # order, is a correct implementation of every memory order (relaxed, acquire, release, acq_rel). The element is
    # accessed through a pointer to its value type (u32 views are stored as int32: same width, wrap-around).
    c = _c(d)
    q = f"{c}* q = ({c}*)p;"
    if op == "load":
        return f"{q} return *q;"
    if op == "store":
        return f"{q} *q = a; return 0;"
    if op == "cas":
        return f"{q} {c} old = *q; if (old == a) *q = b; return old;"
    new = "a" if op == "exchange" else f"{combine}(old, a)"
    return f"{q} {c} old = *q; *q = {new}; return old;"


def extern_source(name: str, family: str, dtypes: tuple, ret: T.DType, args: tuple, combine: str | None = None,
                  spelling: Spelling = C_SPELLING):
    """The C++ definition of a helper with pointer operands, or None when this target cannot provide it.

    Families: ``atomic_<op>_<order...>`` (op load, store, exchange, add, max, min, and, or, xor, cas; ``combine``
    names the elementwise helper giving the new value from (old, a)), ``quantize_q8_k`` / ``quantize_q4_k`` (one
    256-element super-block) and ``philox4x32_10`` (the Random123 block function on six words in place)."""
    atomic = family.startswith("atomic_")
    names = ("p", "a", "b") if atomic else tuple(f"p{k}" for k in range(len(args)))
    if any(not isinstance(a, str) and not supports(a) for a in args):
        return None
    if atomic:
        (d,) = dtypes
        if not (d.is_int or d.name == "f32"):
            return None
        body = _atomic_body(family.split("_")[1], d, combine)
    elif family in ("quantize_q8_k", "quantize_q4_k", "philox4x32_10"):
        body = f"return itb_{family}({', '.join(names)});"
    else:
        return None
    return pointer_helper(name, ret, args, names, body, spelling)


def pointer_helper(name: str, ret: T.DType, args: tuple, names: tuple, body: str,
                   spelling: Spelling = C_SPELLING) -> str:
    """The definition of helper ``name`` whose ``args`` are DTypes (a value) or TIR storage names (a pointer)."""
    params = [f"{_TIR_C[a]}* {n}" if isinstance(a, str) else f"{_c(a)} {n}" for a, n in zip(args, names)]
    return f'{spelling.function} {_c(ret)} {name}({", ".join(params)}) {{ {body} }}'


def _random_bits(d):
    # T8: word counter % 4 of Philox4x32-10((lo32(block), hi32(block), 0, 0), (lo32(seed), hi32(seed))).
    return ("uint64_t k = b >> 2; return itb_philox_word((uint32_t)k, (uint32_t)(k >> 32), 0u, 0u, "
            "(uint32_t)a, (uint32_t)(a >> 32), (int)(b & 3u));")


def _mx(fmt: str):
    def body(d):
        if d.name not in ("f32", "f64"):
            return None
        # a: the carrier byte, b: the element's position in its group (e2m1: its parity picks the nibble), c: the
        # e8m0 scale code. The product is exact in double (T6); one conversion to the accumulator.
        code = "(a >> (4 * (b & 1))) & 15" if fmt == "e2m1" else "a"
        return f"return ({_c(d)})(itb_mx_{fmt}[{code}] * itb_mx_e8m0[c]);"
    return body


RENDER["random_bits"] = _random_bits
RENDER["mx_e2m1"] = _mx("e2m1")
RENDER["mx_e4m3"] = _mx("e4m3")


def _double_table(name: str, values) -> str:
    items = ", ".join(("-NAN" if math.copysign(1.0, v) < 0 else "NAN") if v != v else float(v).hex() for v in values)
    return f"$table double {name}[{len(values)}] = {{{items}}};"


def _mx_tables() -> None:
    from ... import _format_mx as MX  # noqa: PLC0415  (decoded by ml_dtypes: T6 forbids hand-written tables)

    BASE["itb_mx_e2m1"] = _double_table("itb_mx_e2m1", MX.code_table("e2m1"))
    BASE["itb_mx_e4m3"] = _double_table("itb_mx_e4m3", MX.code_table("e4m3"))
    BASE["itb_mx_e8m0"] = _double_table("itb_mx_e8m0", MX.scale_table())


_mx_tables()

# === Workspaces (storage.py): heap buffers whose size is known only at run time ================================
# The C target rejects stack allocations of dynamic size; such buffers come from these helpers (TVM declares each
# callee from its call: a handle is ``void*``). A failed allocation returns null, which the kernel checks.

_WORKSPACE = {
    "itw_alloc": "#include <stdlib.h>\n"
                 "extern \"C\" inline void* itw_alloc(int64_t n, int64_t size) {\n"
                 "  if (n < 0 || (n > 0 && size > INT64_MAX / n)) return (void*)0;\n"
                 "  return malloc(n > 0 ? (size_t)(n * size) : 1);\n"
                 "}",
    "itw_calloc": "#include <stdlib.h>\n"
                  "extern \"C\" inline void* itw_calloc(int64_t n, int64_t size) {\n"
                  "  return n < 0 ? (void*)0 : calloc(n > 0 ? (size_t)n : 1, (size_t)size);\n"
                  "}",
    "itw_free": "extern \"C\" inline int32_t itw_free(void* p) { free(p); return 0; }",
    # a * b for element counts, or -1 when an operand is -1 or negative or the product overflows int64
    "itw_mul": "extern \"C\" inline int64_t itw_mul(int64_t a, int64_t b) {\n"
               "  if (a < 0 || b < 0 || (a != 0 && b > INT64_MAX / a)) return -1;\n"
               "  return a * b;\n"
               "}",
    "itw_null": "extern \"C\" inline bool itw_null(void* p) { return p == 0; }",
}


def workspace_source(name: str) -> str | None:
    """The C++ definition of a workspace helper (``itw_alloc``, ``itw_calloc``, ``itw_free``, ``itw_null``,
    ``itw_mul``)."""
    return _WORKSPACE.get(name)


# A failed run-time check (storage.py) leaves the kernel at once: the C target's kernel returns int32.
early_exit = "T.evaluate(T.ret(T.int32(0)))"
