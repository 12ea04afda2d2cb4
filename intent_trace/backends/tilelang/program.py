"""KIR -> the text of one TileLang program for a target value: the launch pre-pass, then one emission.

Every dynamic extent is a ``T.dynamic`` variable shared by the buffer shapes that name it, so one compilation
serves every shape; TileLang's wrapper reads the extents from the tensors it is given. Nothing here knows a
target by name: the target is a :class:`.spec.TileLangTarget` (:mod:`.target` resolves names).
"""
from __future__ import annotations

import re

import attrs

from ...errors import LoweringError
from ...graph import ops
from ...graph.values import KernelGraph
from ...schedule import carry, indexed, region, region_scan
from ...schedule.plan import Part, Schedule
from ...schedule.prologue import Prologue, extent_index, prologue
from ...schedule.recognition import Rejected
from ...schedule.rows import RowGroup
from ...schedule.rows import recognise as recognise_rows
from .emitter import Scalar, TileLangEmitter, View
from .rules import REJECTED, RULES
from .storage import ERROR_PARAM, LIMIT_PARAM, checks_on


@attrs.frozen
class Program:
    """A generated TileLang program and what its hidden parameters (after the graph's own) need at each call."""

    text: str
    error_sites: tuple  # ErrorSite per run-time check; the error record ``E`` is the last parameter when any
    workspaces: tuple  # storage.Workspace parameters, which follow the graph's own
    allocation_limit: bool = False  # the hidden int64 LIMIT_PARAM (limits.allocation_limit) follows them
    # the graph's prologue checks (schedule.prologue) this program leaves to the host, which makes them before any
    # launch (executable.check_prologue); empty when the program does not check
    prologue: tuple = ()


def lower(graph: KernelGraph, spec, checks: bool = True) -> Program:
    """The TileLang program for ``graph`` on target ``spec`` (a :class:`.spec.TileLangTarget`), with the error sites
    of its run-time checks and the workspaces the host allocates (:mod:`.storage`)."""
    launch = _plan(graph, spec, checks)
    return launch.program or _generate(graph, spec, checks, launch.nest, launch.grid)


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
    launch = _plan(graph, spec, checks)
    return launch.nest, launch.grid


@attrs.frozen
class _Launch:
    nest: object = None
    grid: object = None
    program: Program | None = None  # written while planning (a row group's)
    refused: tuple = ()  # why a proposed plan was not taken


#: The plans that write a program of their own, asked in this order: the target's planner, what makes its program
#: unusable (said when it is refused) and the test of its program. A row group must not fail and has no workspace;
#: a multi-block program's workspaces are its own partials (its emitter refuses any other), but it must not fail;
#: an indexed grid (histogram, scatter, row gather: cuda_indexed) may check (a failed check is claimed) but the
#: threads of a grid cannot share a workspace.
_OWN_PROGRAM_PLANS = (
    (lambda spec: spec.row_group, "has run-time checks or workspaces (a row group must not fail)",
     lambda program: not program.error_sites and not program.workspaces),
    (lambda spec: spec.multi_block, "has run-time checks (it must not fail)", lambda program: not program.error_sites),
    (lambda spec: spec.indexed_grid, "needs a workspace, which the threads of a grid cannot share",
     lambda program: not program.workspaces),
    (lambda spec: spec.carried_lanes, "has run-time checks or workspaces (a lane's thread must not fail or share "
     "buffers)", lambda program: not program.error_sites and not program.workspaces),
)


def _plan(graph: KernelGraph, spec, checks: bool) -> _Launch:
    refused = []
    for planner, refusal, accepts in _OWN_PROGRAM_PLANS:
        plan = planner(spec)(graph) if planner(spec) is not None else None
        if plan is None:
            continue
        what = (getattr(plan, "mapping", None) or "row_group").replace("_", " ")
        try:
            program = _generate(graph, spec, checks, None, plan)
        except LoweringError as e:  # an op the plan's emitter cannot place: the other plans
            program, why = None, f"the {what} program could not be written ({e})"
        else:
            why = f"the {what} program {refusal}"
        if program is not None and accepts(program):
            return _Launch(None, plan, program)
        refused.append(why)
    nest = spec.flat_nest(graph) if spec.flat_nest is not None else None  # the one write nest as a grid
    if nest is not None and not _final_write_nest(graph, nest):
        nest = None  # a nest the program does not have: every thread would run the whole write
    grid = spec.parallel_grid(graph) if spec.parallel_grid is not None and nest is None else None
    if nest is None and grid is None:
        return _Launch(refused=tuple(refused))
    if _generate(graph, spec, checks, None, None).workspaces:
        refused.append("its program needs a workspace, which the threads of a grid cannot share")
        return _Launch(refused=tuple(refused))
    return _Launch(nest, grid)


def _final_write_nest(graph: KernelGraph, nest) -> bool:
    """Whether ``nest`` is the loop nest of the graph's final write: its extents are the written view's."""
    nodes = graph.body.nodes
    if not nodes or nodes[-1].op is not ops.write:
        return False
    index = extent_index(graph)  # the names _generate gives the extents
    return tuple(f"d{index[s]}" if s in index else None for s in nodes[-1].inputs[0].type.shape) == tuple(nest.shape)


def _generate(graph: KernelGraph, spec, checks: bool, nest, grid) -> Program:
    emitter = getattr(grid, "emitter", TileLangEmitter)  # a plan that places more than the launch has its own
    em = emitter(graph, spec, RULES, REJECTED, checks, nest=nest, grid=grid)
    dims = []
    # Extents stated equal (I.assume_equal, every statement a prologue check) take their class's first name: the
    # host checks the statements before any launch (executable.check_prologue; with checks=False the program trusts
    # them, T9), so a domain(0, K) over an axis of N needs no bounds check and a plan's emitter names one extent.
    same = extent_index(graph)
    for k, ev in enumerate(graph.extents):
        name = f"d{k}"
        dims.append(f"{name} = T.dynamic({name!r}, 'int64')")
        em.env[ev] = Scalar(f"d{same[ev.extent]}")
        em.dim_names[ev.extent] = f"d{same[ev.extent]}"
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
    every = spec.prelude_every_kernel  # each kernel is compiled alone: each carries the prelude
    prelude = spec.prelude(list(em.helpers.values())) if em.helpers or every else None
    lines = [
        f"# Generated by intent_trace (target {spec.name}) from a KIR graph. Do not edit: regenerated from the KIR.",
        f"import {spec.language} as T",
        "",
    ]
    if prelude is not None:
        text = f"'''{prelude}'''" if "'''" not in prelude and "\\" not in prelude else repr(prelude)
        lines += [f"PRELUDE = {text}", ""]
    launch = spec.launch("PRELUDE" if prelude is not None else None, nest or grid)
    if every:
        launch, body = _with_prelude(launch), [_with_prelude(line) for line in body]
    lines += [*dims, "", "", "@T.prim_func", f"def kernel({', '.join(params)}):", "    " + launch,
              *(body or ["        pass"]), ""]
    hoisted = tuple(n for n in graph.body.nodes if id(n) in em.hoisted)
    return Program("\n".join(lines), tuple(em.error_sites), tuple(em.workspaces), em.uses_limit, hoisted)


_LAUNCH = re.compile(r"^(\s*with T\.Kernel\((?:(?!prelude=).)*)\) as (\w+):$", re.M)


def _with_prelude(text: str) -> str:
    """Every launch line of ``text`` that names no prelude, naming ``PRELUDE``."""
    return _LAUNCH.sub(r"\1, prelude=PRELUDE) as \2:", text)


# --- the schedule, as people and tests read it (exe.schedule, print(exe)) --------------------------------------

def schedule_of(graph: KernelGraph, spec, checks: bool = True, specializations=None) -> Schedule:
    """Which mapping each part of ``graph`` gets on target ``spec`` and why: the tiled specialisations (each with
    the calls it runs for), then the general program's launch as the pre-pass plans it (:func:`plan_launch`); its
    prologue names the checks the host makes before any launch (the graph's prologue checks, when it checks)."""
    if specializations is None:
        specializations = spec.specializations(graph, spec)
    names = [ev.extent.name for ev in graph.extents]
    first = prologue(graph) if checks_on(spec, checks) else Prologue()
    parts = [_specialization_part(s, names) for s in specializations]
    launch = _plan(graph, spec, checks)
    nest, grid = launch.nest, launch.grid
    if isinstance(getattr(grid, "group", None), RowGroup) or launch.program is not None:
        parts.append(grid.part(graph))  # a plan that wrote its own program (row group, multi-block, indexed grid)
    elif nest is not None:
        parts.append(Part("flat_nest", "the graph's one effect is a whole write of a pure expression of whole-axis "
                          "reads: its elements are independent, spread over a grid of threads (coalesced)",
                          (("elements", " * ".join(names[int(d[1:])] for d in nest.shape)),
                           ("threads", nest.threads), ("per_thread", nest.vector * nest.group)),
                          nodes=(graph.body.nodes[-1],)))
    elif grid is not None:
        parts.append(Part("parallel_grid", "the graph's top-level parallel loop: its iterations are independent "
                          "(language §5), one per thread", (("iterations", _extent_text(grid.length, names)),
                                                            ("threads", grid.threads)), nodes=(grid.node,)))
    else:
        hoisted = {id(n) for n in first.checks}  # made on the host: not the program's
        parts.append(Part("serial", _serial_reason(graph, spec, launch),
                          nodes=tuple(n for n in graph.body.nodes if id(n) not in hoisted)))
    return Schedule(parts, first.describe())


def _extent_text(text: str, names: list) -> str:
    for k, name in reversed(list(enumerate(names))):  # d10 before d1
        text = text.replace(f"d{k}", name)
    return text


def _specialization_part(s, names: list) -> Part:
    when = [f"{names[k]} % {t} == 0" if t > 1 else f"{names[k]} > 0" for k, t in getattr(s, "divides", ())]
    when += [f"{names[k]} == {n}" for k, n in getattr(s, "equals", ())]
    if getattr(s, "least", 0):
        tiles = " * ".join(f"ceil({names[k]} / {t})" if t > 1 else names[k] for k, t in s.grid)
        when.append(f"{tiles} >= {s.least} blocks")
    if getattr(s, "part", None) is not None:  # a program that describes itself (cuda_region's segmented fold)
        return attrs.evolve(s.part, when=", ".join(when) or "always")
    name = getattr(s, "name", "?")
    reason = ("a recognised contraction: output tiles per block, K-loop pipelined, tails masked, for the calls "
              "``when`` admits")
    tile = (("tile", "x".join(str(t) for _, t in s.grid[:2])),) if getattr(s, "grid", ()) else ()
    return Part("tiled_matmul", reason, (("program", name), *tile), when=", ".join(when) or "always")


def _serial_reason(graph: KernelGraph, spec, launch: _Launch) -> str:
    if spec.row_group is None and spec.flat_nest is None and spec.parallel_grid is None:
        return f"target {spec.name} runs one serial program (it plans no grids of threads)"
    why = list(launch.refused)
    own = spec.grid_refusal(graph) if spec.grid_refusal is not None else None
    if own is not None:
        why.insert(0, f"target {spec.name} cannot run its grid: {own}")
    if spec.row_group is not None:
        rows = recognise_rows(graph)
        if isinstance(rows, Rejected):
            why.append(f"not a row group: {rows.reason}")
    if spec.flat_nest is not None and spec.flat_nest(graph) is None:
        why.append("not one whole write of a pure expression of whole-axis reads (flat_nest)")
    if spec.parallel_grid is not None and spec.parallel_grid(graph) is None:
        why.append("no top-level parallel loop whose iterations could be threads (parallel_grid)")
    if spec.indexed_grid is not None and indexed.why_not(graph) is not None:
        why.append(indexed.why_not(graph))
    fold = region.recognise(graph) if any(n.op is ops.region_fold for n in graph.walk()) else None
    if isinstance(fold, Rejected):
        why.append(f"not a segmented fold: {fold.reason}")
    scan = region_scan.recognise(graph) if spec.multi_block is not None and \
        any(n.op is ops.region_scan for n in graph.walk()) else None
    if isinstance(scan, Rejected):
        why.append(f"not a segmented scan: {scan.reason}")
    lanes = carry.recognise(graph) if spec.carried_lanes is not None else None
    if isinstance(lanes, Rejected) and any(n.op is ops.loop for n in graph.body.nodes):
        why.append(f"not carried lanes: {lanes.reason}")
    return "one thread runs it: " + "; ".join(why)
