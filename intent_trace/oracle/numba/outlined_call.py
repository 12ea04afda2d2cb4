"""Calls of an outlined loop body through a symbol of its own, never through a linked copy (issue 19: compile time).

When a jitted function calls another, Numba links the callee's LLVM module into the caller's and optimises and
emits the callee's code again there. A ``prange`` loop in the parallel build goes through four such modules (the
parfor gufunc, two wrappers around it, the kernel itself), so the outlined loop body (:mod:`.outline`), nearly all
of a kernel's code, was optimised and turned into machine code five times: for ``attention_f16``, 3.6 of its 9.4
CPU seconds. :func:`call_outlined` compiles the body once, in its own module, and calls it through a symbol named
after the body and its argument types (registered with LLVM's process-wide symbol table, where the machine-code
loader looks up what a module does not define), so every caller holds a call instruction and nothing more.

Numba's disk cache stores a caller's machine code with that reference unresolved. Loading it needs the symbol
defined first, so each caller's code library carries a reload hook (Numba's ``reload_init``, pickled with the
cached entry and run before the entry's machine code is loaded): it compiles the body for the same argument types
(from Numba's own cache, whose entries are verified as every other's, :mod:`.target`) and registers its address.
The body's module and the caller's are one generated module (the same file, the same cache key), so the body a
cached caller calls is the one generated with it.
"""
from __future__ import annotations

import functools
import hashlib
import sys

from llvmlite import binding as ll
from numba.core import cgutils, types
from numba.extending import intrinsic

_PREFIX = "intent_trace.outlined."


def symbol(module_name: str, qualname: str, argtypes: tuple) -> str:
    """The symbol of the body ``module_name.qualname`` compiled for ``argtypes``: the generated module's name holds
    the graph's key, and Numba's type names tell every compiled signature apart (they are its cache index keys)."""
    digest = hashlib.sha256("\0".join(str(t) for t in argtypes).encode()).hexdigest()[:24]
    return f"{_PREFIX}{module_name}.{qualname}.{digest}"


def _register(dispatcher, argtypes: tuple, name: str) -> None:
    """Compile ``dispatcher`` for ``argtypes`` (or load it from Numba's cache) and register its native entry point
    as the symbol ``name``."""
    dispatcher.compile(argtypes)
    cres = dispatcher.overloads[argtypes]
    ll.add_symbol(name, cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name))


def define(module_name: str, qualname: str, argtypes: tuple, name: str) -> None:
    """The reload hook of a cached caller (module-level, so it pickles by reference): :func:`_register` the body
    ``module_name.qualname``."""
    module = sys.modules.get(module_name)
    if module is None:  # a cached caller is loaded only through its module (target.load), which puts it there
        raise RuntimeError(f"intent_trace cpu: the generated module {module_name} is not loaded; cannot load the "
                           f"outlined loop body {qualname} its cached code calls")
    _register(getattr(module, qualname), argtypes, name)


@intrinsic
def call_outlined(typingctx, body, *args):
    """``body(*args)``, ``body`` a jitted function, called through its own symbol
    (:func:`define`); an error status it returns propagates as a direct call's does."""
    sig = typingctx.resolve_function_type(body, args, {})  # compiles the body for these arguments
    if sig is None:
        return None
    argtypes = tuple(sig.args)
    py_func = body.dispatcher.py_func
    where = (py_func.__module__, py_func.__qualname__, argtypes)
    name = symbol(*where)
    _register(body.dispatcher, argtypes, name)
    reload = functools.partial(define, *where, name)

    def codegen(context, builder, signature, values):
        context.active_code_library._reload_init.add(reload)
        packed = cgutils.unpack_tuple(builder, values[1])  # the star arguments arrive as one tuple
        callee_args = [context.cast(builder, v, have, want) for v, have, want in zip(packed, args, argtypes)]
        fnty = context.call_conv.get_function_type(sig.return_type, argtypes)
        callee = cgutils.get_or_insert_function(builder.module, fnty, name)
        status, result = context.call_conv.call_function(builder, callee, sig.return_type, argtypes, callee_args)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return result

    return sig.return_type(body, types.StarArgTuple.from_types(args)), codegen
