"""The Metal Shading Language source of a tilelang-metal program: what TileLang's Metal code generator writes for the
program text (on any OS: ``tilelang.lower`` under ``tvm.target.Target("metal")``), repaired where it prints invalid
Metal.

Lowering costs seconds for a grid program (TileLang's passes), and the same text is lowered by the test suite's
Metal-source check, the emulator and ``.source``, often in different processes. So TileLang's output is kept on
disk under the intent_trace cache root (:mod:`~intent_trace.caches`), one file per program text and TileLang
version (``metal-source-<version>/<sha256 of the text>.metal``): it is the code generator's output for exactly that
text, which a lookup reads back instead of lowering again; the repair is applied after every lookup, so a change to
it never meets a stale file. Nothing cached here is executed: the emulator compiles what it translates, keyed by the
full C++ text (:mod:`.metal_emulation.kernel`).
"""
from __future__ import annotations

import functools
import hashlib
import linecache
import os
import re
import tempfile

from ...caches import cache_path
from ...errors import LoweringError
from .metal_emulation.translate import TranslationError, split_inline_conditionals

NAME = "tilelang-metal"


@functools.lru_cache(maxsize=256)
def kernel_source(program: str) -> str:
    """The Metal source of the program text, repaired: TVM's Metal code generator prints a declaration it binds
    inside an expression into the middle of an assignment (invalid Metal), which is moved out on the same lines
    (:func:`~.metal_emulation.translate.split_inline_conditionals`), and a bfloat constant as a half literal
    (:func:`bfloat_literals`)."""
    try:
        return bfloat_literals(split_inline_conditionals(_tilelang_metal(program)))
    except TranslationError as e:
        raise LoweringError(f"target {NAME}: TileLang's Metal source has a statement it cannot repair: {e}") from e


_BFLOAT_LOCAL = re.compile(r"^\s*bfloat\s+(\w+)\s*;", re.M)


def bfloat_literals(source: str) -> str:
    """TVM's Metal code generator prints a bfloat constant with the half suffix: the zero a guarded load of a bfloat
    buffer falls back to comes out as ``bfloat condval; ... condval = 0.000000e+00h;``, a half that Metal does not
    convert to bfloat implicitly. Each such assignment to a bfloat local becomes ``bfloat(0.000000e+00f)``."""
    names = set(_BFLOAT_LOCAL.findall(source))
    if not names:
        return source
    assign = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")(\s*=\s*)(-?[\d.]+(?:e[+-]?\d+)?)h\s*;")
    return assign.sub(r"\1\2bfloat(\3f);", source)


def _tilelang_metal(program: str) -> str:
    """TileLang's Metal source for the program text, from the disk cache or lowered now (and kept)."""
    import tilelang

    digest = hashlib.sha256(program.encode()).hexdigest()
    path = os.path.join(cache_path(f"metal-source-{tilelang.__version__}"), f"{digest}.metal")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        pass
    source = _lower(program, digest)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(source)
    os.replace(tmp, path)  # whole or absent: a concurrent reader never sees part of it
    return source


def _lower(program: str, digest: str) -> str:
    import tilelang
    import tvm

    filename = f"<intent_trace {NAME} {digest[:16]}>"  # TileLang's frontend reads the function's source via inspect
    linecache.cache[filename] = (len(program), None, program.splitlines(True), filename)
    namespace: dict = {"__name__": f"intent_trace_metal_{digest[:16]}"}
    exec(compile(program, filename, "exec"), namespace)  # noqa: S102  (our own generated text)
    try:
        with tvm.target.Target("metal"):
            return tilelang.lower(namespace["kernel"], target="metal").kernel_source
    except Exception as e:
        raise LoweringError(f"target {NAME}: TileLang failed to lower the generated program to Metal: {e}") from e
