"""The ``tilelang-cuda`` target's choices: TileLang's CUDA target, the C helper bodies as device functions.

The lowering is the one every TileLang target shares; what differs here:

- Helpers: the same C++ bodies as :mod:`.c` (one definition of each op's numerics), rendered with the device
  spelling (:data:`DEVICE`: ``__device__ __forceinline__`` so nvcc inlines them, ``__clzll``, device tables).
- Compiler flags (``tl.device_compile_flags``): ``--fmad=false`` (nvcc contracts ``a*b + c`` into an
  FMA by default; T3 forbids it), ``-prec-div=true -prec-sqrt=true -ftz=false`` (IEEE division and
  square root, subnormals kept) and never ``--use_fast_math`` (``tl.enable_fast_math`` off).
- Launch: one thread block of one thread runs the shared serial program, the correctness baseline every
  kernel lowers to. Layered on it (:mod:`.cuda_kernels`, joined to this target in :mod:`.targets`): a graph
  whose one effect is a whole write runs on a grid of threads, one or eight elements each (``flat_nest``); a
  graph's top-level ``parallel`` loop runs one iteration per thread (``parallel_grid``; a failed check is
  claimed atomically, ``claim_source``); and recognised graphs get tiled specialisations (matmuls,
  :mod:`.cuda_matmul`; flash attention).
- Buffers sized at run time are hidden buffer parameters the executable allocates (``host_workspaces``,
  :mod:`.storage`), not device-heap allocations.
- Arguments live in device memory: the staged host copies go to the GPU for the call and come back
  after ``torch.cuda.synchronize()``.
"""
from __future__ import annotations

import re

from ... import types as T
from . import c, cuda_atomics, x86_nans
from .cuda_half_hardware import HARDWARE
from .lanes import Lanes

NAME = "tilelang-cuda"
TILELANG_TARGET = "cuda"
EXECUTION_BACKEND = "tvm_ffi"
LANGUAGE = "tilelang.language"
COMPILE_FLAGS = ()


def compile_flags() -> list:
    return list(COMPILE_FLAGS)  # nvcc's flags are pass configs (tl.device_compile_flags)


PASS_CONFIGS = {"tl.enable_fast_math": False,
                "tl.device_compile_flags": ["--fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"]}

# ptxas (-O2 and up) miscompiles our while loops on sm_90a: ``while (1) { if (!g) break; v = c; if (!(v < 0))
# break; c = v - 1; }`` from c = 5 stored 0 (at -O2 it never ended), where the PTX nvcc gave was right and ptxas
# -O0/-O1 ran it right (H200, tests/language/test_control_loop_while.py::test_while_false_at_start_returns_init). A
# program with a while loop is therefore assembled at -O1; every other program keeps ptxas' default.
_WHILE_PTXAS = ["-Xptxas", "-O1"]
_WHILE = re.compile(r"^\s+while ", re.M)  # a while loop in the program text


#: a line of a program that places every barrier itself: TileLang's barrier insertion cannot see where an
#: asynchronous copy's writes land (at the program's wait, cuda_matmul_simt) and would add barriers of its own
OWN_BARRIERS = "# barriers: the program's own"


def pass_configs(program: str) -> dict:
    """The TileLang pass configuration for one program text (see _WHILE_PTXAS, OWN_BARRIERS)."""
    configs = PASS_CONFIGS
    if _WHILE.search(program):
        configs = {**configs, "tl.device_compile_flags": [*configs["tl.device_compile_flags"], *_WHILE_PTXAS]}
    if OWN_BARRIERS in program:
        configs = {**configs, "tl.disable_thread_storage_sync": True}
    return configs


supports = c.supports
view_storage = c.view_storage
_SCALAR_STORAGE = {"u32": "int32", "u64": "int64"}  # TVM's CUDA launcher packs no unsigned scalar arguments


def scalar_storage(d) -> str | None:
    return _SCALAR_STORAGE.get(d.name) or c.scalar_storage(d)


# A failed run-time check (storage.py) leaves the kernel: TileLang's CUDA code generator drops ``T.ret`` from a
# ``__global__ void`` kernel, so the exit is a call of ``itc_return``, a prelude macro for ``return``.
early_exit = "T.evaluate(T.call_extern('int32', 'itc_return'))"
_HEADER = "#define itc_return() return\n"


def launch(prelude: str | None, plan=None) -> str:
    prelude = prelude or repr(_HEADER)  # every launch defines itc_return
    if plan is not None:  # a grid of threads (cuda_kernels.FlatNest, ParallelGrid)
        return plan.launch(prelude)
    return f"with T.Kernel(1, threads=1, prelude={prelude}) as _:"


def _shuffle(em, kind: str, value: str, step: int, dtype: str) -> str:
    return f"T.shfl_{kind}({value}, {step})"  # TileLang's warp shuffles (__shfl_xor_sync, __shfl_up_sync)


def _atomic_add(em, cell: str, value: str, dtype: str) -> str:
    return f"T.atomic_add({cell}, {value})"  # atomicAdd on shared or global memory, every count dtype


LANES = Lanes(shuffle=_shuffle, atomic_add=_atomic_add)


def claim_source() -> str:
    """``itc_claim(&E[0], code)``: the first thread whose check fails records it (threads of a ParallelGrid)."""
    return ("__device__ __forceinline__ bool itc_claim(int64_t* e, int64_t code) { return atomicCAS("
            "(unsigned long long*)e, 0ull, (unsigned long long)code) == 0ull; }")


# The helper bodies are C's (one definition of each op's numerics), spelled as device functions: nvcc inlines them.
DEVICE = c.Spelling(function="__device__ __forceinline__", static="static __device__ __forceinline__",
                    table="static __device__ const", clz="__clzll")


# NaNs (T3): NVIDIA's arithmetic returns the canonical NaN 0x7FFFFFFF where x86 (the oracles') returns its first NaN
# operand or its default NaN, so these helpers decide NaNs in code around the C body (:mod:`.x86_nans`; Metal's too)
_X86_NANS = frozenset({"add", "sub", "mul", "div", "sqrt", "floor", "fma"})


# Signed 8- and 16-bit negations: on an H100 (the GPU suite, 2026-12-07) ptxas kept the negation of -32768 as +32768
# in its 32-bit register, so a comparison read it as positive (``-y < x`` false for y = -32768, x = 0): the C body
# ``(int16_t)(0u - (uint32_t)a)`` becomes PTX ``neg.s16``. Here the operation is done in 32 bits (exact: no int16 or
# int8 product or difference overflows an int) and passed through a ``prmt`` (``__byte_perm``) before its
# truncation: an operation LLVM cannot see through, so it does not narrow the arithmetic back to ``neg.s16``, and the
# narrow value reaches its users as a conversion of a 32-bit register, which ptxas extends. (``__byte_perm`` reads
# three bits of each selector nibble: 0x9910 is 0x1110, the low two bytes then copies of byte 1; 0x8880 is byte 0
# four times. The bytes the truncation keeps are the low ones either way.) ``sub`` and ``mul`` too: LLVM makes them
# ``neg.s16`` once an inlined literal 0 or -1 meets them. Measured on the H100 over every int16 and int8 value: the C
# bodies wrong for -32768 (neg and abs), this form (neg, and abs through it) right everywhere; one instruction more.
_PRMT_SELECTOR = {8: "0x8880", 16: "0x9910"}
_WIDE = {"neg": "-(int)a", "sub": "(int)a - (int)b", "mul": "(int)a * (int)b", "abs": "-(int)a"}  # abs: of a < 0


def _narrow_signed(name: str, family: str, ret, args: tuple) -> str:
    """``neg``/``abs``/``sub``/``mul`` of a signed 8- or 16-bit ``ret``, computed in 32 bits, truncated after a prmt."""
    t, names = c.C_TYPE[ret.name], "abc"[:len(args)]
    params = ", ".join(f"{c.C_TYPE[a.name]} {n}" for a, n in zip(args, names))
    low = f"({t})__byte_perm({_WIDE[family]}, 0, {_PRMT_SELECTOR[ret.bits]})"
    body = f"a < 0 ? {low} : a" if family == "abs" else low
    return f"{DEVICE.function} {t} {name}({params}) {{ return {body}; }}"


# T4 functions (T10): on f32, and on f16/bf16 computed in f32 and rounded once, a helper calls CUDA's precise
# single-precision library function (``expf``, ``erff``, ``tanhf``, ...; c.CUDA_F32_MATH), never a double-precision
# one (the main cost of softmax, log-softmax and GELU on the H200: f64 throughput is a fraction of f32's) and never
# fast math (``__expf``). Its accuracy is the CUDA C Programming Guide's documented bound, which the verifier charges
# (kernel_bounds.VENDOR_ULPS, from the ops' MathSpec); its special values are C99 Annex F's, as CUDA documents them.
# A NaN result is decided around the call as x86 gives it (CUDA's library returns its canonical NaN): a NaN operand
# quieted, or the default NaN for an invalid argument (log(-1), sin(inf)); one compare on the fast path. f64 and the
# flush-to-zero forms keep C's double bodies.
_F32_RESULT = {"f32": "r", "f16": "itb_rf16(r)", "bf16": "itb_rbf16(r)"}


#: a NaN result ``r`` of a one-operand function of ``a`` as x86 gives it: ``a`` quieted, else the default NaN
_X86_NAN_RESULT = "if (r != r) r = a != a ? itb_f32(itb_bits32(a) | 0x00400000u) : itb_f32(0xffc00000u); "


def _vendor_math(name: str, family: str, d) -> str:
    fn = c.CUDA_F32_MATH[family]
    return (f"{DEVICE.function} float {name}(float a) {{ float r = {fn}(a); "
            f"{_X86_NAN_RESULT}return {_F32_RESULT[d.name]}; }}")


# Approximate options (T4, T10: "map to the hardware's approximate instructions"), f32 only (T4):
# - ``I.exp2(x, approximate=True, flush_to_zero=True)``: ``ex2.approx.ftz.f32``, one ``MUFU.EX2``: subnormal operands
#   and results are zeros of the same sign, as the option says (FlashAttention's softmax: one instruction a score);
# - ``I.exp2(x, approximate=True)``: ``ex2.approx.f32`` (what ``exp2f`` compiles to: the subnormal range costs a
#   compare and two predicated multiplies around the ``MUFU.EX2``), within 2 ulp over the whole range;
# - ``I.tanh(x, approximate=True)``: ``tanh.approx.f32`` (``MUFU.TANH``, sm_75 and later), T4's absolute 2^-10.9
#   charged by the verifier; the zero's sign is the operand's by a select (T4's tanh(-0) = -0 on every target);
# - ``I.fdiv(a, b, approximate=True)``: ``div.full.f32`` (:func:`approximate_div`).
# A NaN result is decided as x86 gives it around each (the serial helpers); the tile programs' fast bodies leave it
# to the hardware (a row or output holding a NaN is recomputed by the serial helpers there).
APPROXIMATE_PTX = {"exp2_ftz": "ex2.approx.ftz.f32", "exp2_approx": "ex2.approx.f32",
                   "tanh_approx": "tanh.approx.f32"}
_APPROXIMATE_SPECIALS = {"tanh_approx": "r = a == 0.0f ? a : r; "}


def approximate_math(name: str, family: str, x86_nan: bool = True) -> str:
    """``name`` as the PTX instruction of :data:`APPROXIMATE_PTX`; ``x86_nan``: a NaN result decided as x86 gives it
    (:func:`_vendor_math`), else the hardware's canonical NaN (the tile programs' fast bodies)."""
    nan = _X86_NAN_RESULT if x86_nan else ""
    return (f'{DEVICE.function} float {name}(float a) {{ float r; asm("{APPROXIMATE_PTX[family]} %0, %1;" '
            f': "=f"(r) : "f"(a)); {_APPROXIMATE_SPECIALS.get(family, "")}{nan}return r; }}')


def approximate_div(name: str) -> str:
    """``I.fdiv(a, b, approximate=True)`` on f32: PTX's ``div.full.f32`` (2 ulp over the full range of operands, a
    reciprocal and a multiply with scaling instead of the IEEE division's Newton iterations) where its quotient is a
    normal number; a zero, subnormal, infinite or NaN quotient takes the IEEE one (a predicated path that ordinary
    operands never take: the flushes and special cases of the instruction are not what the option allows, T4's
    bound is ulps of the quotient and its special values IEEE's), and x86's NaN rule around it (:mod:`.x86_nans`)."""
    inner = (f"{DEVICE.function} float {name}_ieee(float a, float b) {{ float r; "
             f'asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); float m = fabsf(r); '
             f"return m >= 0x1p-126f && m <= 0x1.fffffep127f ? r : a / b; }}")
    return x86_nans.wrap(inner, name, T.f32, 2, DEVICE)


# Conversions between f32 and f16/bf16 (T1: round to nearest even; the C bodies round through double, once): the
# hardware's conversion instructions give the same bits for every value but a NaN (they return their canonical NaN;
# T3 wants NumPy's payload bits), so a NaN takes the C body's NaN case, written out as bits, and every other value
# one instruction instead of the software rounding (a row kernel's f16 loads and stores spent most of their time
# there).

def _hardware_conversion(name: str, family: str, dtypes: tuple) -> str | None:
    """``name`` as the hardware conversion with the C body's NaN case written out as bits (:data:`_NAN_BITS_OF`),
    or None when it is no conversion between f32 and f16/bf16 (a cast rounds f32 to the format, an encode stores a
    format value's bits, a decode widens them)."""
    narrow = dtypes[-1].name if family == "cast" else dtypes[0].name
    if narrow not in HARDWARE or (family == "cast" and (len(dtypes) != 2 or dtypes[0].name != "f32")):
        return None
    hw = HARDWARE[narrow]
    form = {"cast": ("float", "float", "a != a", hw.rounded("a")),
            "encode": ("uint16_t", "float", "a != a", hw.encoded("a")),
            "decode": ("float", "uint16_t", f"(a & 0x7fffu) > {hw.infinity_bits}", hw.decoded("a"))}.get(family)
    if form is None:
        return None
    result, operand, is_nan, hardware = form
    # a NaN is widened, narrowed or rounded by its bits: a select of two cheap values, not a branch to the C body, so
    # that a row's loads, each decoded as it arrives, are all issued before the first is waited on, a gather's
    # elements, each stored as it arrives, are not issued one after another, and a row's write pass (a cast to f16
    # per element) has no branch region per element
    return (f"{hw.include}{DEVICE.function} {result} {name}({operand} a) {{ "
            f"return {is_nan} ? {_NAN_BITS_OF[family][narrow]} : {hardware}; }}")


#: a NaN's bits widened to f32 as the C bodies' decode does (itb_f16_decode's all-ones exponent case; bf16 is f32's
#: upper half)
_NAN_DECODE = {"f16": "itb_f32(((uint32_t)(a & 0x8000u) << 16) | 0x7f800000u | ((uint32_t)(a & 0x3ffu) << 13))",
               "bf16": "itb_f32((uint32_t)a << 16)"}
#: an f32 NaN's bits narrowed as the C bodies' encode does (itb_f16_encode: the payload's top ten bits, 0x7c01 when
#: they are all zero, which would be infinity; bf16 is f32's upper half)
_NAN_ENCODE = {"f16": "(uint16_t)(((itb_bits32(a) >> 16) & 0x8000u) | ((itb_bits32(a) >> 13) & 0x3ffu ? "
                      "0x7c00u | ((itb_bits32(a) >> 13) & 0x3ffu) : 0x7c01u))",
               "bf16": "(uint16_t)(itb_bits32(a) >> 16)"}
#: an f32 NaN rounded to the format and widened back, as the C bodies' cast does (itb_df16/itb_dbf16 of the NaN
#: widened to double, which quiets it on x86: f16 keeps the quieted payload's top ten bits, bf16 none)
_NAN_CAST = {"f16": "itb_f32((itb_bits32(a) & 0x80000000u) | 0x7fc00000u | (itb_bits32(a) & 0x003fe000u))",
             "bf16": "itb_f32((itb_bits32(a) & 0x80000000u) | 0x7fc00000u)"}
_NAN_BITS_OF = {"decode": _NAN_DECODE, "encode": _NAN_ENCODE, "cast": _NAN_CAST}


def helper_source(name: str, family: str, dtypes: tuple, ret, args: tuple) -> str | None:
    if family in c.CUDA_F32_MATH and ret.name in _F32_RESULT and dtypes == (ret,) and args == (ret,):
        return _vendor_math(name, family, ret)
    if family in APPROXIMATE_PTX and ret.name == "f32" and dtypes == (ret,) and args == (ret,):
        return approximate_math(name, family)
    if family == "div_approx" and ret.name == "f32" and dtypes == (ret,) and args == (ret, ret):
        return approximate_div(name)
    if family in ("cast", "encode", "decode"):
        converted = _hardware_conversion(name, family, dtypes)
        if converted is not None:
            return converted
    if family in _WIDE and ret.kind == "int" and ret.bits in _PRMT_SELECTOR \
            and all(a == ret for a in args) and dtypes == (ret,):
        return _narrow_signed(name, family, ret, args)
    if x86_nans.applies(family, ret, args, _X86_NANS):
        inner = c.helper_source(f"{name}_ieee", family, dtypes, ret, args, DEVICE)
        return None if inner is None else x86_nans.wrap(inner, name, ret, len(args), DEVICE)
    return c.helper_source(name, family, dtypes, ret, args, DEVICE)


def prelude(definitions: list) -> str:
    return _HEADER + c.prelude([*cuda_atomics.cas_helpers(definitions, DEVICE), *definitions], DEVICE)


def extern_source(name: str, family: str, dtypes: tuple, ret, args: tuple, combine: str | None = None):
    """Helpers with pointer operands as device functions: atomics are device atomics (:mod:`.cuda_atomics`,
    compare-and-swap loops around the serial program's combine), k-quant blocks and Philox the C bodies."""
    source = cuda_atomics.extern_source if family.startswith("atomic_") else c.extern_source
    return source(name, family, dtypes, ret, args, combine, DEVICE)


# Buffers that are not small and static are workspaces the executable allocates in device memory (storage.py):
# the device heap (``malloc`` in a kernel) is small by default and slow.
host_workspaces = True


def to_device(tensor):
    return tensor.cuda()


def synchronize() -> None:
    import torch

    torch.cuda.synchronize()


def require_runtime() -> None:
    try:
        import tilelang  # noqa: F401
        import torch
    except Exception as e:
        raise RuntimeError(f"target {NAME} needs the tilelang package (0.1.15) and torch, which failed to import: "
                           f"{e}") from e
    if not torch.cuda.is_available():
        raise RuntimeError(f"target {NAME} needs an NVIDIA GPU with a CUDA driver; torch sees none on this machine "
                           f"(tilelang-c runs the same kernels on the CPU)")
