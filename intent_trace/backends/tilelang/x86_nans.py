"""x86's NaN results decided in code around a C helper body (T3: "NaN payloads are values").

The oracles run on x86, whose arithmetic returns its first NaN operand, quieted, and the default NaN 0xFFC00000 for
an invalid operation (inf - inf, 0 * inf, sqrt(-1)). Two targets need the rule spelled out around the C body:

- tilelang-cuda, for every arithmetic helper: NVIDIA's arithmetic returns the canonical NaN 0x7FFFFFFF for both.
- tilelang-c, for the commutative ones (add, mul, fma): g++ may swap their operands (``a + b`` compiled to return
  b's NaN), and glibc's ``fmaf`` is a vfmadd whose NaN order is its instruction form's (b's NaN before a's). Also for
  f16/bf16, whose C bodies compute in float and round (``s + x[i]`` with ``s`` loop-invariant returned x's NaN):
  the first NaN operand, a float holding the format's value, quieted and rounded to the format as a result is.
"""
from __future__ import annotations

from . import c

_NAN_BITS = {"f32": ("float", "itb_f32", "itb_bits32", "0x00400000u", "0xffc00000u"),
             "f64": ("double", "itb_f64", "itb_bits64", "0x0008000000000000ull", "0xfff8000000000000ull")}
#: the families whose operands g++ or the vfmadd form may put in either order
COMMUTATIVE = frozenset({"add", "mul", "fma"})
_HELD_IN_FLOAT = ("f16", "bf16")  # C floats holding the format's values (c.py); their NaNs are float NaNs


def applies(family: str, ret, args: tuple, families: frozenset) -> bool:
    return family in families and ret.name in _NAN_BITS and all(a == ret for a in args)


def wrap(inner: str, name: str, d, arity: int, spelling: c.Spelling) -> str:
    """``name``: the C body (``inner``, defined as ``<name>_ieee``) with x86's NaN results decided around it."""
    t, to_float, to_bits, quiet_bit, default = _NAN_BITS["f32" if d.name in _HELD_IN_FLOAT else d.name]
    nan = f"{to_float}(q | {quiet_bit})"
    nan = f"itb_r{d.name}({nan})" if d.name in _HELD_IN_FLOAT else nan  # rounded to the format as its results are
    names = "abc"[:arity]
    # a NaN operand makes the result NaN, so only a NaN result looks at the operands: one compare on the fast path.
    # Selects, not returns: nvcc made each early return a branch region (a row's write pass paid three per element
    # and could not schedule one element's loads and stores across the next one's); the default NaN is quiet already
    bits = "uint64_t" if d.name == "f64" else "uint32_t"
    picks = " ".join(f"q = {n} != {n} ? {to_bits}({n}) : q;" for n in reversed(names))  # the first NaN operand's
    return (f"{inner}\n{spelling.function} {t} {name}({', '.join(f'{t} {n}' for n in names)}) {{ "
            f"{t} r = {name}_ieee({', '.join(names)}); {bits} q = {default}; {picks} "
            f"return r == r ? r : {nan}; }}")


def c_helper_source(name: str, family: str, dtypes: tuple, ret, args: tuple) -> str | None:
    """tilelang-c's helpers: C's bodies, the commutative float ones with x86's NaN results decided around them."""
    narrow = family in COMMUTATIVE and ret.name in _HELD_IN_FLOAT and all(a == ret for a in args)
    if narrow or applies(family, ret, args, COMMUTATIVE):
        inner = c.helper_source(f"{name}_ieee", family, dtypes, ret, args)
        return None if inner is None else wrap(inner, name, ret, len(args), c.C_SPELLING)
    return c.helper_source(name, family, dtypes, ret, args)
