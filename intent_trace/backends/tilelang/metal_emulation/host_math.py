"""Which Metal library functions a Metal source calls that the emulator runs as the host's libm.

``itm_library.h`` defines ``metal::precise::`` and ``metal::fast::`` (exp, log, sin, pow, rsqrt, ...) over the
host's C library, because Apple's are not available off a Mac: the MSL specification bounds their error (most
``precise::`` functions within 4 ulp, ``fast::`` coarser) without fixing their bits. An emulated result that
depends on one of them is the host's answer, not the GPU's. :func:`host_math` names them, so the verifier can say
so (``oracle/verification/emulation.py``). The unqualified spellings are listed too: with ``using namespace metal``
an unqualified ``exp(x)`` is the library's as well (in C++ it would be the host's ``expf``).
"""
from __future__ import annotations

import re

FUNCTIONS = ("exp", "exp2", "exp10", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
             "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt", "pow", "powr", "atan2", "rsqrt", "divide")
_NAMES = "|".join(FUNCTIONS)
_QUALIFIED = re.compile(rf"(?<![\w.])(?:metal::)?(precise|fast)::({_NAMES})\s*\(")
_PLAIN = re.compile(rf"(?<![\w.:>])(?:metal::)?({_NAMES})\s*\(")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def host_math(source: str) -> tuple:
    """The library functions ``source`` calls (outside comments) whose emulated results are the host's, sorted:
    ``precise::exp``, ``fast::exp``, ``exp`` (unqualified). sqrt and divide are listed too: whether an Apple GPU
    rounds them as the host does is the specification's claim, not something the emulator shows."""
    code = _COMMENT.sub(" ", source)
    found = {f"{kind}::{name}" for kind, name in _QUALIFIED.findall(code)}
    found |= set(_PLAIN.findall(_QUALIFIED.sub(" ", code)))
    return tuple(sorted(found))
