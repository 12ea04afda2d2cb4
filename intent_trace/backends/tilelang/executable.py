"""A TileLang program compiled and run: ``tilelang.compile`` once per text, then checked, staged calls.

Checks. The program's run-time checks record an error that :meth:`TileLangExecutable.__call__` raises after the
launch; the graph's prologue checks (:mod:`intent_trace.schedule.prologue`: ``I.assume_equal`` over extents and
scalars) are made first, on the host (:func:`check_prologue`), and no program contains them.

Caching: compiled kernels per (target, program text) in process, and TileLang's own disk cache
(``~/.tilelang/cache``, keyed by the prim_func's script, the target and the compiler flags) makes a new process
skip the C++ compiler. ``.source`` is the program text followed by the target source TileLang generated from it.
"""
from __future__ import annotations

import functools
import hashlib
import linecache
from collections.abc import Callable

import ml_dtypes
import numpy as np

from ...arguments import bind_arguments
from ...display import ExecutableDisplay
from ...errors import LoweringError
from ...graph.values import KernelGraph
from ...limits import allocation_limit, check_allocation
from ...schedule.prologue import prologue
from ...specialize import respecialize
from .program import lower, schedule_of

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


# --- compilation -------------------------------------------------------------------------------------------

_KERNELS: dict = {}  # (target, program text) -> compiled TileLang kernel


def compiled(target: str, program: str) -> bool:
    """Whether this process has compiled ``program`` for the target called ``target``."""
    return (target, program) in _KERNELS


def compile_with(program: str, spec):
    """Run the program text to get its prim_func and compile it with TileLang for target ``spec`` (cached per
    target and text)."""
    key = (spec.name, program)
    kernel = _KERNELS.get(key)
    if kernel is not None:
        return kernel
    spec.require_runtime()
    import tilelang

    digest = hashlib.sha256(program.encode()).hexdigest()[:16]
    # TileLang's frontend reads the function's source through inspect: register the text under its file name.
    filename = f"<intent_trace {spec.name} {digest}>"
    linecache.cache[filename] = (len(program), None, program.splitlines(True), filename)
    namespace: dict = {"__name__": f"intent_trace_tilelang_{digest}"}
    exec(compile(program, filename, "exec"), namespace)  # noqa: S102  (our own generated text)
    try:
        kernel = tilelang.compile(namespace["kernel"], target=spec.tilelang_target,
                                  execution_backend=spec.execution_backend, compile_flags=list(spec.compile_flags()),
                                  pass_configs=dict(spec.pass_configs(program)) or None)
    except Exception as e:
        raise LoweringError(f"target {spec.name}: TileLang failed to compile the generated program: {e}") from e
    _KERNELS[key] = kernel
    return kernel


# --- the prologue ----------------------------------------------------------------------------------------

def check_prologue(graph: KernelGraph, values: list, dims: dict, nodes: tuple | None = None) -> None:
    """Make the graph's prologue checks for one call, before anything is staged or launched: a failed one raises
    its :mod:`~intent_trace.codegen.checks` exception (``I.assume_equal``'s ValueError naming both sides, with the
    note naming its op and line, as a program's error record would) and no output is touched.

    Why on the host rather than in a first program: the operands are the call's extents and integer scalars, known
    here once the arguments are bound, so deciding them costs no launch, no synchronisation and no compilation, and
    a grid, row-group or multi-block program that relies on them never runs when they fail (in a program, every
    thread of a grid would make the same check, and a block's threads leaving before a barrier, or a later kernel of
    a multi-launch program running after the first failed, is exactly what those programs must not do).

    The nodes (the checks and the index arithmetic they read: a few integer operations) are evaluated by the
    reference interpreter's own rules on these values, so the host computes exactly what the language defines for
    them (wrap-around integers, truncating division) with no second evaluator to drift from it; nothing is
    generated or ``eval``-ed, and user text reaches only the message's text fields. ``nodes``: the graph's
    prologue nodes (:attr:`~intent_trace.schedule.prologue.Prologue.nodes`), found once per executable."""
    from ...oracle.generic import GenericInterpreter  # the reference rules, loaded when a graph has a prologue

    interpreter = GenericInterpreter(graph, values, dims)
    for node in prologue(graph).nodes if nodes is None else nodes:
        interpreter.run_node(node)


# --- the executable --------------------------------------------------------------------------------------

_NP_STORAGE = {"uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32, "uint16": np.uint16,
               "int64": np.int64}


@functools.lru_cache(maxsize=None)
def _torch_dtype(np_dtype):
    import torch

    if np.dtype(np_dtype) == _BFLOAT16:  # NumPy has no bfloat16: torch cannot take ml_dtypes' from NumPy
        return torch.bfloat16
    return torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype


def _compact_strides(shape: tuple) -> tuple:
    """Row-major strides (in elements) as TVM declares a compact buffer's: each the product of the later extents."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _empty_tensor(shape: tuple, np_dtype, device: str | None = None):
    """A torch tensor with no elements, strided as TVM strides a compact buffer (each stride the product of the
    later extents, so 0 before a zero extent): TileLang's wrapper checks static strides, and ``torch.empty``
    strides (3, 0) as (1, 1) where a buffer of static shape (M, 0) has strides (0, 1). On the host, or made on
    ``device`` (the target's memory) directly."""
    import torch

    return torch.empty_strided(tuple(shape), _compact_strides(shape), dtype=_torch_dtype(np_dtype), device=device)


def _host_tensor(work: np.ndarray):
    """A torch tensor sharing ``work``'s memory (an empty one strided as TileLang expects)."""
    import torch

    return torch.from_numpy(work) if work.size else _empty_tensor(work.shape, work.dtype)


def _stage_host(p, v: np.ndarray, storage: str | None, spec):
    """(the kernel's tensor, the commit or None) for a view bound as a NumPy array: a contiguous copy (an output's
    always, starting from the caller's values), in the storage dtype, moved to the target's memory; an output is
    committed into the caller's array from the copy."""
    if p.type.access != "In" or not v.flags.c_contiguous:
        check_allocation(f"the staging copy of view {p.name} of shape {v.shape}", v.shape, v.itemsize)
    host_work = np.array(v, copy=True, order="C") if p.type.access != "In" else np.ascontiguousarray(v)
    work = host_work.view(_NP_STORAGE[storage]) if storage else host_work
    if not p.type.shape:
        work = work.reshape(1)
    tensor = spec.to_device(_host_tensor(work))
    if p.type.access == "In":
        return tensor, None

    def commit():
        if tensor.device.type != "cpu" and work.size:  # device outputs come back into the staged host copy
            work[...] = tensor.cpu().numpy().view(work.dtype).reshape(work.shape)
        np.copyto(v, host_work)

    return tensor, commit


def _stage_device(p, v, storage: str | None, spec):
    """(the kernel's tensor, the commit or None) for a view bound as a tensor in the target's memory: an input is
    read where it is (a copy only when it is strided or starts off a 16-byte boundary), an output runs on a device
    copy that is committed into the caller's tensor (strides kept) only after the kernel succeeded; either
    reinterpreted as the storage dtype the program declares (f16 as its uint16 bits, bool as uint8)."""
    value = v.dtype
    stored = _torch_dtype(np.dtype(_NP_STORAGE[storage])) if storage else value
    shape = tuple(v.shape) or (1,)
    if not v.numel():
        work = spec.to_device(_empty_tensor(shape, np.dtype(_NP_STORAGE[storage]) if storage else
                                            p.type.dtype.np))
        return work, None
    # an input is read where it is when it is contiguous and starts on a 16-byte boundary (a tiled program's TMA
    # descriptors need it; a slice such as x[1:] of a torch tensor does not): every other view runs on a copy
    copied = p.type.access != "In" or not v.is_contiguous() or v.data_ptr() % 16 != 0
    if copied:
        check_allocation(f"the staging copy of view {p.name} of shape {tuple(v.shape)}", v.shape, v.element_size())
    import torch

    work = v.clone(memory_format=torch.contiguous_format) if copied else v
    work = work.reshape(shape).as_strided(shape, _compact_strides(shape))  # the strides TVM checks
    tensor = work.view(stored)
    if p.type.access == "In":
        return tensor, None
    return tensor, lambda: v.copy_(work.view(value).reshape(v.shape))


# launch's host path (issue 17). On by default because each does strictly less host work per call than before, with
# the same device work; not yet timed on a GPU (tools/launch_ab.py times each against its switch, main side by side;
# tools/launch_host.py, kernel mocked on the C target: 1.44 -> 0.62 us GELU, 3.2 -> 0.8 full sum, 3.6 -> 1.2 cumsum).
#: launch calls the compiled module's entry directly (_entry); False: through TileLang's wrapper
DIRECT_ENTRY = True
#: scratch workspaces up to this size are made once per stream and reused (TileLangExecutable._workspace_maker)
REUSED_WORKSPACE_BYTES = 1 << 20
REUSED_STREAMS = 8  # streams per argument shapes that keep workspaces; calls on more allocate per call
#: a reused zeroed workspace is zero-filled again right after the call that used it (False: not reused)
ZERO_AFTER = True


def _stream_key(device: str) -> Callable | None:
    """``key()``: (the current device, its current stream's handle), where ``device`` is torch's CUDA (two calls
    into torch's C API, about a tenth of a microsecond each); None where the target has no streams (or torch
    lacks the calls): then nothing is reused."""
    if device != "cuda":
        return None
    import torch

    get_device = getattr(torch._C, "_cuda_getDevice", None)
    get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if get_device is None or get_stream is None:
        return None

    def key() -> tuple:
        index = get_device()
        return index, get_stream(index)

    return key


def _entry(kernel) -> Callable:
    """What a launch calls: the compiled module's own entry function where TileLang's adapter is TVM-FFI's and
    allocates no outputs (ours never asks it to), else the kernel. TileLang's wrapper around that entry (the
    argument count, a Python loop over the parameters placing inputs and outputs, the executable's lazy load and
    its attribute lookup) costs a few microseconds a call and decides nothing our plan has not: the entry itself
    still checks each tensor's dtype, shape, strides and device, and takes the stream from torch's current one."""
    adapter = getattr(kernel, "adapter", None)
    executable = getattr(adapter, "_get_executable", None)
    if not DIRECT_ENTRY or executable is None or getattr(adapter, "result_idx", True) or \
            getattr(adapter, "_ffi_callee_allocated_output_abi", False):
        return kernel
    try:
        module = executable()
        module = module.jit() if hasattr(module, "jit") else module
        return module.main
    except Exception:  # noqa: BLE001 (another TileLang's layout: its own wrapper is always right)
        return kernel


class TileLangExecutable(ExecutableDisplay):
    """``build(graph, target="tilelang-c")``: the graph lowered to TileLang, compiled on first use."""

    def __init__(self, graph: KernelGraph, spec, checks: bool = True):
        self.spec = spec  # the TileLangTarget (.spec)
        self.graph = graph
        self.target = spec.name
        self.checks = checks
        program = lower(graph, spec, checks)
        self.program, self.error_sites, self.workspaces = program.text, program.error_sites, program.workspaces
        self.prologue = program.prologue  # checks made on the host before any launch (check_prologue)
        self._prologue_nodes = prologue(graph).nodes if self.prologue else ()
        self.allocation_limit = program.allocation_limit
        # tiled programs for recognised graphs, chosen per call by its extents (JIT specialisations)
        self.specializations = tuple(self.spec.specializations(graph, self.spec))
        self._kernel = None

    @functools.cached_property
    def schedule(self):
        """Which mapping each part of the graph got on this target and why (program.schedule_of; no compilation).
        Computed once: every input of it is fixed at construction, and deriving it plans the programs again (a row
        program's fast and careful copies written out: 21 ms for row_argmax)."""
        return schedule_of(self.graph, self.spec, self.checks, self.specializations)

    @property
    def kernel(self):
        """The compiled TileLang kernel (a ``tilelang.JITKernel``)."""
        if self._kernel is None:
            self._kernel = compile_with(self.program, self.spec)
        return self._kernel

    @property
    def source(self) -> str:
        """The TileLang program, then the target source TileLang generated from it."""
        lower = self.spec.kernel_source  # tilelang-metal: lowered to source, not compiled
        parts = [self.program, lower(self.program) if lower is not None else self.kernel.get_kernel_source()]
        for spec in self.specializations:
            parts += [spec.program, lower(spec.program) if lower is not None
                      else compile_with(spec.program, self.spec).get_kernel_source()]
        return "\n".join(parts)

    def __call__(self, *args, **constexprs) -> None:
        if constexprs:  # another constexpr value: that specialisation runs the arguments (intent_trace.specialize)
            return respecialize(self, constexprs)(*args)
        params = self.graph.params
        values, dims = bind_arguments(self.graph, args, target=self.target, device=self.spec.device_tensors)
        if self.prologue:  # before anything is staged or launched: a failed check leaves every output as it was
            check_prologue(self.graph, values, dims, self._prologue_nodes)
        kernel, special = self._kernel_for(dims)
        import torch

        commits, call_args = [], []
        for k, (p, v) in enumerate(zip(params, values)):
            if p.kind != "view":
                storage = self.spec.scalar_storage(p.type.dtype)
                if storage:  # the same width: the bits (u32 as int32); narrower: the value widened (Metal)
                    v, store = np.asarray(v), np.dtype(_NP_STORAGE[storage])
                    v = v.view(store) if v.dtype.itemsize == store.itemsize else v.astype(store)
                call_args.append(v.item())
                continue
            storage = self.spec.view_storage(p.type.dtype)
            stage = _stage_host if isinstance(v, np.ndarray) else _stage_device
            # Outputs run on copies that are committed only after the kernel returned (and never alias inputs).
            tensor, commit = stage(p, v, storage, self.spec)
            if special and storage and k not in special.stored:  # a specialisation's buffers: value dtypes
                tensor = tensor.view(_torch_dtype(p.type.dtype.np))
            if commit is not None:
                commits.append(commit)
            call_args.append(tensor)
        call_args += self._workspace_tensors(dims, values, special.workspaces if special else None)
        if not special:
            if self.allocation_limit:
                call_args.append(allocation_limit())
        err = None
        if self.error_sites and not special:  # the hidden error record (.storage): code, then three values
            err = self.spec.to_device(torch.zeros(4, dtype=torch.int64))
            call_args.append(err)
        kernel(*call_args)
        self.synchronize()
        if err is not None:
            code, *recorded = (int(v) for v in err.cpu())
            if code:  # nothing is committed: the caller's arrays stay as they were
                raise self.error_sites[code - 1].error(recorded)
        for commit in commits:
            commit()

    def launch(self, *device_args) -> None:
        """Run on arguments already in the target's memory (e.g. CUDA torch tensors), in their value dtypes or
        their storage dtypes (``view_storage``: f16 as uint16, ...), with no checks and no staging: for benchmarks
        and pipelines that keep their data on the device. The extents come from the tensors' shapes; a
        specialisation is used when its tiles divide them. The work per call is a lookup by the shapes (the
        kernel's entry point, the dtype each tensor is viewed as, the workspaces) and the launch: at the zoo's
        sizes a call's host path is part of its time (tools/launch_overhead.py), so nothing is redone per call
        that the shapes decide."""
        shapes = tuple([getattr(a, "shape", None) for a in device_args])
        plan = self._launches.get(shapes)
        if plan is None:
            plan = self._launches[shapes] = self._launch_plan(device_args)
        entry, views, extra, after = plan
        args = device_args if views is None else [a.view(view[0]) if view is not None and a.dtype == view[1] else a
                                                  for a, view in zip(device_args, views)]
        if extra is None:
            entry(*args)
            return
        trailing = extra(device_args)
        entry(*args, *trailing)
        if after is not None:  # the next call's zeros, queued behind this call on its stream
            after(trailing)

    @functools.cached_property
    def _launches(self) -> dict:
        """``launch``'s plans by the arguments' shapes."""
        return {}

    def _launch_plan(self, device_args) -> tuple:
        """(the chosen program's entry point (:func:`_entry`), None where no argument is reinterpreted or per
        argument None or (the torch dtype the program reads it as, the other dtype it may come in: its value or
        storage dtype), None or the function giving the trailing buffers: workspaces, the error record, None or
        what runs on those buffers after the launch: :meth:`_workspace_maker`'s ``after``)."""
        dims = {}
        for p, a in zip(self.graph.params, device_args):
            if p.kind == "view":
                for e, n in zip(p.type.shape, tuple(a.shape)):
                    if not isinstance(e, int):
                        dims[e] = n
        kernel, special = self._kernel_for(dims)
        views = []
        for k, p in enumerate(self.graph.params):
            storage = self.spec.view_storage(p.type.dtype) if p.kind == "view" else None
            # the chosen program's dtype: the general program's storage dtype, a specialisation's value dtype
            use_value = bool(special) and k not in special.stored
            if storage is None:
                views.append(None)
                continue
            value, stored = _torch_dtype(p.type.dtype.np), _torch_dtype(np.dtype(storage))
            views.append((value, stored) if use_value else (stored, value))
        views = tuple(views) if any(v is not None for v in views) else None
        trailing = []  # a specialisation's: none; the general program's: its limit and error record, made once
        if special:
            spaces = special.workspaces
        else:
            spaces = self.workspaces
            if self.allocation_limit:
                trailing.append(allocation_limit())
            if self.error_sites:  # launch never reads it: a kernel that fails a check stops either way
                import torch

                trailing.append(self.spec.to_device(torch.zeros(4, dtype=torch.int64)))
        made = self._workspace_maker(dims, spaces) if spaces else None
        if made is None:
            extra = (lambda device_args: trailing) if trailing else None
        elif not trailing:
            extra = made
        else:
            def extra(device_args) -> list:
                return [*made(device_args), *trailing]
        return _entry(kernel), views, extra, getattr(made, "after", None)

    def _workspace_maker(self, dims: dict, spaces) -> Callable:
        """``made(device_args)``: the workspaces for one ``launch`` with these extents. Where no scalar argument
        sizes them, their shapes are computed and checked against the allocation limit here, once, and a call
        only allocates (and zero-fills the ``zeroed`` ones) in the target's memory: the host's time per launch is
        part of what a single call costs (tools/launch_overhead.py: a full sum's launch path was twice a plain
        kernel call's).

        Scratch workspaces (none ``zeroed``: the program writes every element it reads before reading it, so no
        call depends on what the previous one left) of at most :data:`REUSED_WORKSPACE_BYTES` are made once per
        CUDA stream and reused by every later call on it: the stream orders those calls, so none overlaps
        another's use, and a call on another stream (which may overlap) gets its own (:func:`_stream_key`). A
        ``zeroed`` workspace (a ticket, status flags) is reused the same way where :data:`ZERO_AFTER`: ``made.after``
        (the plan's last part) zero-fills it again right after the launch that used it, on the same stream, so the
        next call on that stream finds it zero whatever this one left, and the memset is queued behind the kernel
        instead of before it (a single call's latency no longer holds an allocation and a memset's launch). Where
        the target has no streams every workspace is fresh per call, zeroed ones zero-filled first."""
        device = self.spec.device_tensors
        if device is None or any(space.sized_by_arguments for space in spaces):
            return lambda device_args: self._workspace_tensors(dims, device_args, spaces)
        extents = {k: dims[ev.extent] for k, ev in enumerate(self.graph.extents)}
        plans = [(space.sizes(extents, ()), np.dtype(space.dtype), space.zeroed) for space in spaces]

        def made(device_args) -> list:
            tensors = [(_empty_tensor(shape, dtype, device), zeroed) for shape, dtype, zeroed in plans]
            return [tensor.zero_() if zeroed else tensor for tensor, zeroed in tensors]

        stream = _stream_key(device)
        size = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype, _ in plans)
        zeroed = [k for k, (_, _, z) in enumerate(plans) if z]
        if stream is None or (zeroed and not ZERO_AFTER) or size > REUSED_WORKSPACE_BYTES:
            return made
        reused: dict = {}  # (device, stream) -> the workspaces

        def reuse(device_args) -> list:
            key = stream()
            tensors = reused.get(key)
            if tensors is None:
                tensors = made(device_args)
                if len(reused) < REUSED_STREAMS:
                    reused[key] = tensors
            return tensors

        if zeroed:
            def after(tensors) -> None:  # queued on the stream the call ran on, behind its kernels
                for k in zeroed:
                    tensors[k].zero_()

            reuse.after = after
        return reuse

    def _workspace_tensors(self, dims: dict, args, spaces=None) -> list:
        """Fresh target-memory buffers for the program's workspaces (:mod:`.storage`; ``spaces``: a specialisation's
        instead), sized by this call."""
        spaces = self.workspaces if spaces is None else spaces
        if not spaces:
            return []
        extents = {k: dims[ev.extent] for k, ev in enumerate(self.graph.extents)}
        # made in the target's memory where its tensors are torch's (CUDA): a host tensor moved there is a copy
        # and a stream synchronisation per call (torch's blocking host-to-device copy), which a full sum on the
        # H100 paid before every launch
        device = self.spec.device_tensors

        def made(space):
            tensor = _empty_tensor(space.sizes(extents, args), np.dtype(space.dtype), device)
            # a ticket's and flags' zeros per call (torch's fill: a memset on CUDA); compact strides kept
            return self.spec.to_device(tensor.zero_() if space.zeroed else tensor)

        return [made(space) for space in spaces]

    def specialization_for(self, dims: dict):
        """The specialisation a call with these extents ({extent: size}) runs, or None for the general program.
        A specialisation has no error record: its recogniser matches only graphs whose general program cannot fail
        a check where the specialisation applies (cuda_access.Specialization); its workspaces are made per call."""
        if self.specializations:
            extents = {k: int(dims[ev.extent]) for k, ev in enumerate(self.graph.extents)}
            return next((spec for spec in self.specializations if spec.applies(extents)), None)
        return None

    def _kernel_for(self, dims: dict) -> tuple:
        """(the compiled kernel for a call with these extents, the specialisation or None)."""
        spec = self.specialization_for(dims)
        return (self.kernel, None) if spec is None else (compile_with(spec.program, self.spec), spec)

    def synchronize(self) -> None:
        """Wait for the target's queued work (a no-op on the C target, whose calls return when done)."""
        self.spec.synchronize()

    def __repr__(self) -> str:
        return f"<{self.target} executable {self.graph.name}>"
