"""KIR -> the text of one TileLang program for a target value: the launch pre-pass, then one emission.

Every dynamic extent is a ``T.dynamic`` variable shared by the buffer shapes that name it, so one compilation
serves every shape; TileLang's wrapper reads the extents from the tensors it is given. Nothing here knows a
target by name: the target is a :class:`.spec.TileLangTarget` (:mod:`.target` resolves names).
"""
from __future__ import annotations

import attrs

from ...errors import LoweringError
from ...graph import ops
from ...graph.values import KernelGraph
from .emitter import Scalar, TileLangEmitter, View
from .rules import REJECTED, RULES
from .storage import ERROR_PARAM, LIMIT_PARAM


@attrs.frozen
class Program:
    """A generated TileLang program and what its hidden parameters (after the graph's own) need at each call."""

    text: str
    error_sites: tuple  # ErrorSite per run-time check; the error record ``E`` is the last parameter when any
    workspaces: tuple  # storage.Workspace parameters, which follow the graph's own
    allocation_limit: bool = False  # the hidden int64 LIMIT_PARAM (limits.allocation_limit) follows them


def lower(graph: KernelGraph, spec, checks: bool = True) -> Program:
    """The TileLang program for ``graph`` on target ``spec`` (a :class:`.spec.TileLangTarget`), with the error sites
    of its run-time checks and the workspaces the host allocates (:mod:`.storage`)."""
    nest, grid, program = _plan(graph, spec, checks)
    return program if program is not None else _generate(graph, spec, checks, nest, grid)


def plan_launch(graph: KernelGraph, spec, checks: bool = True) -> tuple:
    """The pre-pass that decides the launch before the program is written: (FlatNest or None, a grid plan or None).
    A target's planners propose, in order: a row group (cuda_rows.row_plan: a block per row, returned as the grid
    plan), the one write nest as a grid of threads (cuda_kernels.flat_nest), the top-level parallel loop
    (cuda_kernels.parallel_grid). A grid program cannot hold a workspace (every thread would share the one buffer),
    so a graph whose serial program needs one keeps the serial launch. The serial program's workspaces are those of
    any launch (the plans change only the outermost loop and the launch line, not what is stored), so the pre-pass
    reads them from the serial lowering, which is all it writes (a few milliseconds of text; no compilation). A row
    group changes more than the launch, so its own program is written and kept only when it has no run-time check
    and no workspace (it cannot fail) and the emitter wrote it (else the next planner is asked)."""
    nest, grid, _ = _plan(graph, spec, checks)
    return nest, grid


def _plan(graph: KernelGraph, spec, checks: bool) -> tuple:
    """(nest, grid, the program when planning already wrote it)."""
    rows = spec.row_group(graph) if spec.row_group is not None else None
    if rows is not None:
        try:
            program = _generate(graph, spec, checks, None, rows)
        except LoweringError:
            program = None  # an op the row emitter cannot place: the other plans
        if program is not None and not program.error_sites and not program.workspaces:
            return None, rows, program
    nest = spec.flat_nest(graph) if spec.flat_nest is not None else None  # the one write nest as a grid
    if nest is not None and not _final_write_nest(graph, nest):
        nest = None  # a nest the program does not have: every thread would run the whole write
    grid = spec.parallel_grid(graph) if spec.parallel_grid is not None and nest is None else None
    if nest is None and grid is None:
        return None, None, None
    if _generate(graph, spec, checks, None, None).workspaces:
        return None, None, None
    return nest, grid, None


def _final_write_nest(graph: KernelGraph, nest) -> bool:
    """Whether ``nest`` is the loop nest of the graph's final write: its extents are the written view's."""
    nodes = graph.body.nodes
    if not nodes or nodes[-1].op is not ops.write:
        return False
    names = {id(ev.extent): f"d{k}" for k, ev in enumerate(graph.extents)}
    return tuple(names.get(id(s)) for s in nodes[-1].inputs[0].type.shape) == tuple(nest.shape)


def _generate(graph: KernelGraph, spec, checks: bool, nest, grid) -> Program:
    emitter = getattr(grid, "emitter", TileLangEmitter)  # a plan that places more than the launch has its own
    em = emitter(graph, spec, RULES, REJECTED, checks, nest=nest, grid=grid)
    dims = []
    for k, ev in enumerate(graph.extents):
        name = f"d{k}"
        dims.append(f"{name} = T.dynamic({name!r}, 'int64')")
        em.env[ev] = Scalar(name)
        em.dim_names[ev.extent] = name
    params = []
    for k, p in enumerate(graph.params):
        name, t = f"p{k}", p.type
        if not spec.supports(t.dtype):
            raise LoweringError(f"target {spec.name} cannot lower kernel {graph.name}: {p.kind} {p.name} has dtype "
                                f"{t.dtype}, which this target does not support yet")
        if p.kind == "view":
            storage = spec.view_storage(t.dtype)
            shape = em.shape(t)
            params.append(f"{name}: T.Tensor(({', '.join(shape or ('1',))},), {storage or em.tir(t.dtype)!r})")
            em.env[p.var] = View(name, shape, t.dtype, p.name, rank0=not shape, storage=storage)
        else:
            storage = spec.scalar_storage(t.dtype)
            params.append(f"{name}: T.{storage or em.tir(t.dtype)}")
            em.env[p.var] = Scalar(f"T.Cast({em.tir(t.dtype)!r}, {name})" if storage else name)
    em.depth = 2
    em.run_region(graph.body)
    em.release(em.depth)
    if em.flat_nest is not None:  # the launch is a grid but no loop became its threads
        raise em.reject("internal: the planned write nest is not one the emitter wrote")
    params += [space.param() for space in em.workspaces]
    if em.uses_limit:  # heap allocations compare their size with the call's allocation limit (.storage)
        params.append(f"{LIMIT_PARAM}: T.int64")
    dims += [line for space in em.workspaces for line in space.dynamic_lines()]
    if em.error_sites:  # the hidden error record, last (the executable passes it)
        params.append(f"{ERROR_PARAM}: T.Tensor((4,), 'int64')")
    body = ["        " + line for line in em.constant_lines] + em.lines
    prelude = spec.prelude(list(em.helpers.values())) if em.helpers else None
    lines = [
        f"# Generated by intent_trace (target {spec.name}) from a KIR graph. Do not edit: regenerated from the KIR.",
        f"import {spec.language} as T",
        "",
    ]
    if prelude is not None:
        text = f"'''{prelude}'''" if "'''" not in prelude and "\\" not in prelude else repr(prelude)
        lines += [f"PRELUDE = {text}", ""]
    launch = spec.launch("PRELUDE" if prelude is not None else None, nest or grid)
    lines += [*dims, "", "", "@T.prim_func", f"def kernel({', '.join(params)}):", "    " + launch,
              *(body or ["        pass"]), ""]
    return Program("\n".join(lines), tuple(em.error_sites), tuple(em.workspaces), em.uses_limit)
