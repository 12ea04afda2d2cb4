"""What a TileLang target is: one frozen value (:class:`TileLangTarget`), read by the emitter, the driver and the
executable. :mod:`.targets` builds the three instances (``C``, ``CUDA``, ``METAL``) from the target modules
(:mod:`.c`, :mod:`.cuda`, :mod:`.metal`), which hold the spelling (helper bodies, launch lines, flags).

Every capability is a field, so a target that lacks one says so with its default (``None``, ``False``, no
specialisations) instead of by an attribute its module happens not to define; the emitter and the executable
never probe a module. A test target is a changed copy (``attrs.evolve(C, host_workspaces=True)``).
"""
from __future__ import annotations

from collections.abc import Callable

import attrs


def _no_specializations(graph, target) -> tuple:
    return ()


@attrs.frozen(slots=True)
class TileLangTarget:
    """One TileLang target: names, dtype storage, helper bodies, launch, compilation, runtime and capabilities."""

    name: str  # "tilelang-c": what ``intent.compile`` and error messages call it
    tilelang_target: str  # TileLang's own target name ("c", "cuda", "metal")
    execution_backend: str  # TileLang's execution backend ("cython", "tvm_ffi", "torch")
    language: str  # the TileLang language module the program imports as ``T``

    # dtypes: which values the target holds, and how views and scalar parameters store them
    supports: Callable  # DType -> bool
    view_storage: Callable  # DType -> TIR dtype of a view's buffer when it differs from the value's, else None
    scalar_storage: Callable  # DType -> TIR dtype of a scalar parameter when it differs, else None

    # helper bodies (the program's prelude)
    helper_source: Callable  # (name, family, dtypes, ret, args) -> definition of an elementwise helper, or None
    prelude: Callable  # [definitions] -> the prelude text (the internal helpers they use, then them)

    # launch: ``launch(prelude, plan)`` heads the kernel body; ``plan`` is None (one serial program) or the
    # launch plan the pre-pass chose (cuda_kernels.FlatNest or ParallelGrid), which writes its own line
    launch: Callable

    extern_source: Callable | None = None  # helpers with pointer operands (atomics, k-quants, Philox), or None
    workspace_source: Callable | None = None  # heap allocation helpers (itw_*) for buffers sized at run time
    claim_source: Callable | None = None  # itc_claim: the first failed check of a thread grid claims the record

    # checks and storage
    early_exit: str | None = None  # the statement that leaves the kernel after a failed check (None: no checks)
    host_workspaces: bool = False  # buffers sized at run time are parameters the host allocates (not the heap)

    # compilation
    compile_flags: Callable = list  # () -> the C/C++ compiler flags
    pass_configs: Callable = attrs.field(default=lambda program: {})  # program text -> TileLang pass configs

    # runtime
    to_device: Callable = attrs.field(default=lambda tensor: tensor)  # a staged torch tensor -> target memory
    # where the kernels read memory the caller's torch tensors may already be in ("cuda"): such tensors are used
    # in place (inputs) or staged there (outputs), never copied through the host; None: host memory only
    device_tensors: str | None = None
    synchronize: Callable = attrs.field(default=lambda: None)  # wait for the target's queued work
    require_runtime: Callable = attrs.field(default=lambda: None)  # RuntimeError naming what this machine lacks
    kernel_source: Callable | None = None  # program -> the target source, without compiling (Metal)
    emulated_executable: Callable | None = None  # (graph, target, checks) -> an executable run by a host emulator

    # launch planners and specialisations (graph -> plan or None; graph -> specialisations)
    row_group: Callable | None = None  # reductions along rows: a block of threads per row (cuda_rows)
    flat_nest: Callable | None = None  # the graph's one whole write as a grid of threads
    parallel_grid: Callable | None = None  # the graph's top-level parallel loop, one iteration per thread
    # histograms, scatters and row gathers: grids over the values, updates or output rows, collisions combined by
    # device atomics (cuda_indexed); a plan writes its own program, which may check (a failed check is claimed)
    indexed_grid: Callable | None = None
    specializations: Callable = _no_specializations  # (graph, this target) -> tiled programs chosen per call
    # full reductions and scans over a long axis: a multi-block program (several kernels, partials in workspaces
    # of its own: cuda_reduce), asked after row_group
    multi_block: Callable | None = None
    # an ordered loop whose carry is a vector of independent lanes: one thread a lane (cuda_region_carry), asked last
    carried_lanes: Callable | None = None
    # how the threads of a block exchange values in the block programs (shuffles, atomic adds: lanes.Lanes), None
    # for a target that runs them only emulated (serial loops)
    lanes: object | None = None
    # every kernel of a program of several launches carries the prelude (Metal compiles each kernel alone)
    prelude_every_kernel: bool = False
    # graph -> why this target's planners refuse a grid the shared planners would give (Metal's atomics), or None:
    # the first reason a serial part gives
    grid_refusal: Callable | None = None
