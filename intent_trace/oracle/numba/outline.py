"""Top-level parallel loop bodies of a generated kernel as functions of their own (issue 19: compile time).

Numba compiles a ``prange`` loop through its parfor passes, whose copy propagation deep-copies per-block sets of
the body's variables: time that grows with the body's blocks times its variables (for ``attention_f16``, the
parfor fusion and lowering passes were two thirds of its first parallel-build call). So in the parallel build
each top-level ``for i in prange(n): body`` of the generated function becomes a function

    def body_k(lo, hi, <the body's free variables>):
        for i in range(lo, hi):
            body

called once per chunk of iterations (``for i in prange(chunks)``, at most :data:`CHUNKS` chunks of consecutive
iterations): the parfor passes see a loop of one call, which costs nothing beside a chunk of iterations. The call
is ``R.call_outlined(body_k, ...)`` (:mod:`.outlined_call`): through the body's own symbol, so the body is compiled
once and not again in each of the modules the parfor machinery links (the gufunc, its wrappers, the kernel). The
iterations, their order within a chunk and every statement are the loop's own, so results are unchanged; only
where the iterations run is as before (any thread, any order). The serial build keeps its loops: a function
call would cost it compile time (Numba links the callee's code into the caller and optimises it again there)
and buy nothing.

A buffer each iteration allocates at the top of the body, of extents fixed on entry, is allocated once per call
instead (:func:`_per_iteration_buffer`): a row kernel's row buffers, once per chunk of rows; in the serial build,
once before the loop (:func:`hoist_buffers`).

A loop is left as it is where outlining would change its meaning: when its body assigns a name used outside
it (a value carried across iterations or out of the loop), returns, or its ``prange`` has other than one
argument.
"""
from __future__ import annotations

import ast
import builtins
import threading

import attrs

from .staging import ENTRY_EXTENT

CHUNKS = 256  # the most calls a parallel loop makes: enough to balance its iterations over any machine's threads
_PREFIX = "body_"
# CPython 3.11's ast.parse is not thread-safe (its recursion-depth bookkeeping is interpreter-wide: two threads
# parsing at once raise "SystemError: AST constructor recursion depth mismatch", python/cpython#106905), and
# kernels compile on whichever thread calls them first: one outline at a time.
_AST_LOCK = threading.Lock()


@attrs.frozen(slots=True)
class Outlined:
    """The source lines of the parallel build's function (its body, indented once), and the helper functions
    (complete ``def`` blocks, without decorators) it calls."""

    parallel: tuple
    helpers: tuple


def _names(nodes, ctx=ast.expr_context) -> set:
    return {n.id for tree in nodes for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _is_prange_loop(stmt) -> bool:
    it = getattr(stmt, "iter", None)
    return isinstance(stmt, ast.For) and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
        it.func.id == "prange"


def _loops(stmts):
    """(the statement list holding it, its index, the loop) for every prange loop not inside another."""
    for k, stmt in enumerate(stmts):
        if _is_prange_loop(stmt):
            yield stmts, k, stmt
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                yield from _loops(inner)


def _names_outside(node, loop) -> set:
    """Every name ``node`` mentions outside the subtree ``loop``."""
    if node is loop:
        return set()
    found = {node.id} if isinstance(node, ast.Name) else set()
    for child in ast.iter_child_nodes(node):
        found |= _names_outside(child, loop)
    return found


def _free_variables(fn, loop, known: set) -> list | None:
    """The loop body's free variables (sorted), or None when the loop must stay where it is."""
    if len(loop.iter.args) != 1 or loop.iter.keywords or loop.orelse or not isinstance(loop.target, ast.Name):
        return None
    body = loop.body
    if any(isinstance(n, (ast.Return, ast.FunctionDef, ast.Lambda, ast.Global, ast.Nonlocal))
           for tree in body for n in ast.walk(tree)):
        return None
    stored = _names(body, ast.Store) | {loop.target.id}
    if stored & _names_outside(fn, loop):  # a value carried across iterations or out of the loop
        return None
    return sorted(_names(body, ast.Load) - stored - known)


def _per_iteration_buffer(stmt) -> bool:
    """``a = R.alloc_empty((extents fixed on entry,), dtype)``: a buffer every iteration allocates afresh. Its
    contents never outlive the iteration (nothing is carried across iterations, :func:`_free_variables`) and
    ``alloc_empty`` promises none, so one buffer serves a whole chunk: one allocation per call, not per row."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return False
    call = stmt.value
    if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "R.alloc_empty" and len(call.args) == 2
            and isinstance(call.args[0], ast.Tuple)):
        return False
    return all(ENTRY_EXTENT.fullmatch(ast.unparse(e)) for e in call.args[0].elts)


def _limit_check(stmt) -> bool:
    """An allocation's size check (``if elements * itemsize > limit: ...``): the allocation after it stays after
    it (checked before it is attempted); buffers checked before the parallel loop (staging.py) have none."""
    return isinstance(stmt, ast.If) and "limit" in _names([stmt.test])


def _hoisted(loop) -> list:
    """The statements of ``loop``'s body that allocate a :func:`_per_iteration_buffer` not checked just before."""
    return [stmt for before, stmt in zip([None, *loop.body], loop.body)
            if _per_iteration_buffer(stmt) and not _limit_check(before)]


def _statements(source: str) -> list:
    return ast.parse(source).body


def hoist_buffers(name: str, params: list, lines: list, module_names: set) -> list:
    """The serial build's body ``lines`` with each top-level loop's per-iteration buffers allocated once before
    the loop, as an outlined body allocates them once per chunk (the loops :func:`outline` would outline; the
    others as they are): in the serial build a row kernel allocated and freed a row buffer per row (layer norm
    4096x1024: 2.33 ms against the parallel build's 1.81 on one thread)."""
    with _AST_LOCK:
        fn = _statements(f"def {name}({', '.join(params)}):\n" + "\n".join(lines))[0]
        known = set(module_names) | set(dir(builtins))
        moved = False
        for stmts, k, loop in reversed(list(_loops(fn.body))):  # last first: the indices stay valid
            hoisted = _hoisted(loop) if _free_variables(fn, loop, known) is not None else []
            if hoisted:
                loop.body = [stmt for stmt in loop.body if stmt not in hoisted]
                runs = ast.unparse(loop.iter.args[0])
                for stmt in hoisted:  # no iteration, no buffer: its size was checked only where a row runs
                    shape = stmt.value.args[0]
                    shape.elts = [_statements(f"({ast.unparse(e)} if {runs} > 0 else 0)")[0].value
                                  for e in shape.elts]
                stmts[k:k] = hoisted
                moved = True
        if not moved:
            return lines
        return ["    " + line for stmt in fn.body for line in ast.unparse(stmt).splitlines()]


def outline(name: str, params: list, lines: list, module_names: set) -> Outlined | None:
    """Outline the top-level prange loops of the function ``name(params)`` whose body is ``lines`` (indented
    once; ``module_names``: the generated module's globals); None when none can be."""
    with _AST_LOCK:
        return _outline(name, params, lines, module_names)


def _outline(name: str, params: list, lines: list, module_names: set) -> Outlined | None:
    fn = _statements(f"def {name}({', '.join(params)}):\n" + "\n".join(lines))[0]
    known = set(module_names) | set(dir(builtins))
    helpers = []
    loops = list(_loops(fn.body))
    for i, (stmts, k, loop) in reversed(list(enumerate(loops))):  # last first: the indices stay valid
        free = _free_variables(fn, loop, known)
        if free is None:
            continue
        helper = f"{_PREFIX}{i}"
        extent = ast.unparse(loop.iter.args[0])
        func = _statements(f"def {helper}({', '.join(('_lo', '_hi', *free))}):\n"
                           f"    for {loop.target.id} in range(_lo, _hi):\n        pass")[0]
        hoisted = _hoisted(loop)
        func.body[0].body = [stmt for stmt in loop.body if stmt not in hoisted]
        func.body[:0] = hoisted
        helpers.append(ast.unparse(func))
        extra = "".join(f", {v}" for v in free)
        n, chunks = f"_n{i}", f"_chunks{i}"
        q = loop.target.id  # the loop's own index names its chunks (a name nothing else uses)
        stmts[k:k + 1] = _statements(
            f"{n} = {extent}\n{chunks} = R.min2({n}, {CHUNKS})\n"
            f"for {q} in prange({chunks}):\n"  # a prange index may be typed unsigned: int64 before it meets n
            f"    R.call_outlined({helper}, np.int64({q}) * {n} // {chunks}, (np.int64({q}) + 1) * {n} // {chunks}{extra})")
    if not helpers:
        return None

    body = tuple("    " + line for stmt in fn.body for line in ast.unparse(stmt).splitlines())
    return Outlined(body, tuple(reversed(helpers)))
