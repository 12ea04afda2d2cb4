"""TileLang targets: KIR -> TileLang program text -> ``tilelang.compile`` -> a checked, staged executable.

``build(graph, target="tilelang-c")`` lowers the graph to the text of a TileLang program at once (so an
op the target cannot lower raises :class:`~intent_trace.errors.LoweringError` there) and compiles it
with TileLang on first use. ``.source`` is the program text followed by the target source TileLang
generated from it.

Every dynamic extent is a ``T.dynamic`` variable shared by the buffer shapes that name it, so one
compilation serves every shape; TileLang's wrapper reads the extents from the tensors it is given.

Caching: executables are kept per (graph, options) in process; compiled kernels per program text in
process; and TileLang's own disk cache (``~/.tilelang/cache``, keyed by the prim_func's script, the
target and the compiler flags) makes a new process skip the C++ compiler.
"""
from __future__ import annotations

import hashlib
import linecache

import attrs
import ml_dtypes
import numpy as np

from ...arguments import bind_arguments
from ...display import ExecutableDisplay
from ...errors import LoweringError
from ...graph.values import KernelGraph
from ...limits import allocation_limit, check_allocation
from . import c, cuda, metal

TARGETS = {c.NAME: c, cuda.NAME: cuda, metal.NAME: metal}
_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def _target_module(target: str):
    module = TARGETS.get(target)
    if module is None:
        raise ValueError(f"unknown TileLang target {target!r}; available: {', '.join(TARGETS)}")
    return module


def require_runtime(target: str = "tilelang-c") -> None:
    """Raise RuntimeError saying what this machine lacks to run ``target``."""
    _target_module(target).require_runtime()


# --- the program text ------------------------------------------------------------------------------------

def generate(graph: KernelGraph, target: str = "tilelang-c", checks: bool = True) -> str:
    """The TileLang program for ``graph`` (Python source defining ``kernel``, a ``T.prim_func``)."""
    return generate_program(graph, target, checks).text


@attrs.frozen
class Program:
    """A generated TileLang program and what its hidden parameters (after the graph's own) need at each call."""

    text: str
    error_sites: tuple  # ErrorSite per run-time check; the error record ``E`` is the last parameter when any
    workspaces: tuple  # storage.Workspace parameters, which follow the graph's own
    allocation_limit: bool = False  # the hidden int64 LIMIT_PARAM (limits.allocation_limit) follows them


def generate_program(graph: KernelGraph, target: str = "tilelang-c", checks: bool = True) -> Program:
    """The TileLang program for ``graph``, with the error sites of its run-time checks and the workspaces the
    host allocates (:mod:`.storage`)."""
    from .storage import GridFallback

    module = _target_module(target)
    flat, grid = getattr(module, "flat_nest", None), getattr(module, "parallel_grid", None)
    nest = flat(graph) if flat is not None else None  # the one write nest as a grid (cuda_kernels.FlatNest)
    plan = grid(graph) if grid is not None and nest is None else None  # the parallel loop on threads
    if nest is not None or plan is not None:
        try:
            return _generate(graph, module, checks, nest, plan)
        except GridFallback:
            pass
    return _generate(graph, module, checks, None, None)


def _generate(graph: KernelGraph, module, checks: bool, nest, grid) -> Program:
    from .emitter import Scalar, TileLangEmitter, View
    from .rules import REJECTED, RULES
    from .storage import ERROR_PARAM, LIMIT_PARAM, GridFallback

    em = TileLangEmitter(graph, module, RULES, REJECTED, checks)
    em.flat_nest, em.grid = nest, grid
    em.grid_planned = nest is not None or grid is not None
    dims = []
    for k, ev in enumerate(graph.extents):
        name = f"d{k}"
        dims.append(f"{name} = T.dynamic({name!r}, 'int64')")
        em.env[ev] = Scalar(name)
        em.dim_names[ev.extent] = name
    params = []
    for k, p in enumerate(graph.params):
        name, t = f"p{k}", p.type
        if not module.supports(t.dtype):
            raise LoweringError(f"target {module.NAME} cannot lower kernel {graph.name}: {p.kind} {p.name} has dtype "
                                f"{t.dtype}, which this target does not support yet")
        if p.kind == "view":
            storage = module.view_storage(t.dtype)
            shape = em.shape(t)
            params.append(f"{name}: T.Tensor(({', '.join(shape or ('1',))},), {storage or em.tir(t.dtype)!r})")
            em.env[p.var] = View(name, shape, t.dtype, p.name, rank0=not shape, storage=storage)
        else:
            storage = module.scalar_storage(t.dtype)
            params.append(f"{name}: T.{storage or em.tir(t.dtype)}")
            em.env[p.var] = Scalar(f"T.Cast({em.tir(t.dtype)!r}, {name})" if storage else name)
    em.depth = 2
    em.run_region(graph.body)
    em.release(em.depth)
    if nest is not None and em.flat_nest is not None:  # the launch is a grid but no loop became its threads
        raise GridFallback("the planned pointwise nest was not the one the emitter wrote")
    params += [space.param() for space in em.workspaces]
    if em.uses_limit:  # heap allocations compare their size with the call's allocation limit (.storage)
        params.append(f"{LIMIT_PARAM}: T.int64")
    dims += [line for space in em.workspaces for line in space.dynamic_lines()]
    if em.error_sites:  # the hidden error record, last (the executable passes it)
        params.append(f"{ERROR_PARAM}: T.Tensor((4,), 'int64')")
    body = ["        " + line for line in em.constant_lines] + em.lines
    prelude = module.prelude(list(em.helpers.values())) if em.helpers else None
    lines = [
        f"# Generated by intent_trace (target {module.NAME}) from a KIR graph. Do not edit: regenerated from the KIR.",
        f"import {module.LANGUAGE} as T",
        "",
    ]
    if prelude is not None:
        text = f"'''{prelude}'''" if "'''" not in prelude and "\\" not in prelude else repr(prelude)
        lines += [f"PRELUDE = {text}", ""]
    plan = nest or grid
    launch = module.launch("PRELUDE" if prelude is not None else None, *((plan,) if plan is not None else ()))
    lines += [*dims, "", "", "@T.prim_func", f"def kernel({', '.join(params)}):", "    " + launch,
              *(body or ["        pass"]), ""]
    return Program("\n".join(lines), tuple(em.error_sites), tuple(em.workspaces), em.uses_limit)


# --- compilation -------------------------------------------------------------------------------------------

_KERNELS: dict = {}  # (target, program text) -> compiled TileLang kernel


def _compile_flags(module) -> list:
    flags = getattr(module, "compile_flags", None)
    return list(flags() if flags is not None else module.COMPILE_FLAGS)


def _pass_configs(module, program: str) -> dict:
    configs = getattr(module, "pass_configs", None)
    return dict(configs(program) if configs is not None else getattr(module, "PASS_CONFIGS", {}))


def compile_program(program: str, target: str = "tilelang-c"):
    """Run the program text to get its prim_func and compile it with TileLang (cached per text)."""
    module = _target_module(target)
    key = (module.NAME, program)
    kernel = _KERNELS.get(key)
    if kernel is not None:
        return kernel
    module.require_runtime()
    import tilelang

    digest = hashlib.sha256(program.encode()).hexdigest()[:16]
    # TileLang's frontend reads the function's source through inspect: register the text under its file name.
    filename = f"<intent_trace {module.NAME} {digest}>"
    linecache.cache[filename] = (len(program), None, program.splitlines(True), filename)
    namespace: dict = {"__name__": f"intent_trace_tilelang_{digest}"}
    exec(compile(program, filename, "exec"), namespace)  # noqa: S102  (our own generated text)
    try:
        kernel = tilelang.compile(namespace["kernel"], target=module.TILELANG_TARGET,
                                  execution_backend=module.EXECUTION_BACKEND, compile_flags=_compile_flags(module),
                                  pass_configs=_pass_configs(module, program) or None)
    except Exception as e:
        raise LoweringError(f"target {module.NAME}: TileLang failed to compile the generated program: {e}") from e
    _KERNELS[key] = kernel
    return kernel


# --- the executable --------------------------------------------------------------------------------------

_NP_STORAGE = {"uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32, "uint16": np.uint16,
               "int64": np.int64}


def _torch_dtype(np_dtype):
    import torch

    if np.dtype(np_dtype) == _BFLOAT16:  # NumPy has no bfloat16: torch cannot take ml_dtypes' from NumPy
        return torch.bfloat16
    return torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype


def _program_tensor(tensor, p, storage: str | None, special: bool):
    """A view argument of ``launch`` in the dtype the chosen program declares (the same memory): the general
    program's storage dtype (``view_storage``), a specialisation's value dtype. Either may be given."""
    if storage is None or not hasattr(tensor, "view"):
        return tensor
    value, stored = _torch_dtype(p.type.dtype.np), _torch_dtype(np.dtype(storage))
    want, other = (value, stored) if special else (stored, value)
    return tensor.view(want) if tensor.dtype == other else tensor


def _empty_tensor(shape: tuple, np_dtype):
    """A torch tensor with no elements, strided as TVM strides a compact buffer (each stride the product of the
    later extents, so 0 before a zero extent): TileLang's wrapper checks static strides, and ``torch.empty``
    strides (3, 0) as (1, 1) where a buffer of static shape (M, 0) has strides (0, 1)."""
    import torch

    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return torch.empty_strided(tuple(shape), tuple(reversed(strides)), dtype=_torch_dtype(np_dtype))


def _host_tensor(work: np.ndarray):
    """A torch tensor sharing ``work``'s memory (an empty one strided as TileLang expects)."""
    import torch

    return torch.from_numpy(work) if work.size else _empty_tensor(work.shape, work.dtype)


def _host_array(name: str, value):
    """A NumPy view of a torch tensor (sharing its memory); anything else unchanged."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach") and hasattr(value, "device"):
        if value.device.type != "cpu":
            raise TypeError(f"view {name}: target tilelang-c runs on the CPU; got a tensor on {value.device}")
        try:
            import torch

            t = value.detach().resolve_conj().resolve_neg()
            if t.dtype == torch.bfloat16:  # NumPy has no bfloat16: view the bits, then as ml_dtypes' bfloat16
                import ml_dtypes

                return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
            return t.numpy()
        except TypeError as e:
            raise TypeError(f"view {name}: {e}") from e
    return value


class TileLangExecutable(ExecutableDisplay):
    """``build(graph, target="tilelang-c")``: the graph lowered to TileLang, compiled on first use."""

    def __init__(self, graph: KernelGraph, target: str = "tilelang-c", checks: bool = True):
        self._module = _target_module(target)
        self.graph = graph
        self.target = self._module.NAME
        self.checks = checks
        program = generate_program(graph, target, checks)
        self.program, self.error_sites, self.workspaces = program.text, program.error_sites, program.workspaces
        self.allocation_limit = program.allocation_limit
        # tiled programs for recognised graphs, chosen per call by its extents (JIT specialisations)
        self.specializations = tuple(getattr(self._module, "specializations", lambda g: ())(graph))
        self._kernel = None

    @property
    def kernel(self):
        """The compiled TileLang kernel (a ``tilelang.JITKernel``)."""
        if self._kernel is None:
            self._kernel = compile_program(self.program, self.target)
        return self._kernel

    @property
    def source(self) -> str:
        """The TileLang program, then the target source TileLang generated from it."""
        lower = getattr(self._module, "kernel_source", None)  # tilelang-metal: lowered to source, not compiled
        parts = [self.program, lower(self.program) if lower is not None else self.kernel.get_kernel_source()]
        for spec in self.specializations:
            parts += [spec.program, compile_program(spec.program, self.target).get_kernel_source()]
        return "\n".join(parts)

    def __call__(self, *args) -> None:
        params = self.graph.params
        host = [(_host_array(p.name, a) if p.kind == "view" else a) for p, a in zip(params, args)] \
            if len(args) == len(params) else list(args)
        values, dims = bind_arguments(self.graph, tuple(host))
        kernel, special = self._kernel_for(dims)
        import torch

        staged, call_args = [], []
        for p, v in zip(params, values):
            if p.kind != "view":
                storage = self._module.scalar_storage(p.type.dtype)
                if storage:  # the same width: the bits (u32 as int32); narrower: the value widened (Metal)
                    v, store = np.asarray(v), np.dtype(_NP_STORAGE[storage])
                    v = v.view(store) if v.dtype.itemsize == store.itemsize else v.astype(store)
                call_args.append(v.item())
                continue
            if p.type.access != "In" or not v.flags.c_contiguous:
                check_allocation(f"the staging copy of view {p.name} of shape {v.shape}", v.shape, v.itemsize)
            host_work = np.array(v, copy=True, order="C") if p.type.access != "In" else np.ascontiguousarray(v)
            work = host_work
            storage = self._module.view_storage(p.type.dtype)
            if storage:
                work = work.view(_NP_STORAGE[storage])
            if not p.type.shape:
                work = work.reshape(1)
            tensor = _host_tensor(work)
            tensor = self._module.to_device(tensor)
            if special and storage:  # a specialisation declares its buffers in the value dtype
                tensor = tensor.view(_torch_dtype(p.type.dtype.np))
            if p.type.access != "In":
                # Outputs run on copies that are committed only after the kernel returned (and never alias inputs).
                staged.append((v, host_work, work, tensor))
            call_args.append(tensor)
        if not special:
            call_args += self._workspace_tensors(dims, values)
            if self.allocation_limit:
                call_args.append(allocation_limit())
        err = None
        if self.error_sites and not special:  # the hidden error record (.storage): code, then three values
            err = self._module.to_device(torch.zeros(4, dtype=torch.int64))
            call_args.append(err)
        kernel(*call_args)
        self.synchronize()
        if err is not None:
            code, *recorded = (int(v) for v in err.cpu())
            if code:  # nothing is committed: the caller's arrays stay as they were
                raise self.error_sites[code - 1].error(recorded)
        for caller, host_work, work, tensor in staged:
            if tensor.device.type != "cpu" and work.size:  # device outputs come back into the staged host copy
                work[...] = tensor.cpu().numpy().view(work.dtype).reshape(work.shape)
            np.copyto(caller, host_work)

    def launch(self, *device_args) -> None:
        """Run on arguments already in the target's memory (e.g. CUDA torch tensors), in their value dtypes or
        their storage dtypes (``view_storage``: f16 as uint16, ...), with no checks and no staging: for benchmarks
        and pipelines that keep their data on the device. The extents come from the tensors' shapes; a
        specialisation is used when its tiles divide them."""
        dims = {}
        for p, a in zip(self.graph.params, device_args):
            if p.kind == "view":
                for e, n in zip(p.type.shape, tuple(a.shape)):
                    if not isinstance(e, int):
                        dims[e] = n
        kernel, special = self._kernel_for(dims)
        device_args = tuple(_program_tensor(a, p, self._module.view_storage(p.type.dtype), special)
                            if p.kind == "view" else a for p, a in zip(self.graph.params, device_args))
        if not special:
            device_args = (*device_args, *self._workspace_tensors(dims, device_args))
            if self.allocation_limit:
                device_args = (*device_args, allocation_limit())
            if self.error_sites:
                import torch

                device_args = (*device_args, self._module.to_device(torch.zeros(4, dtype=torch.int64)))
        kernel(*device_args)

    def _workspace_tensors(self, dims: dict, args) -> list:
        """Fresh target-memory buffers for the program's workspaces (:mod:`.storage`), sized by this call."""
        if not self.workspaces:
            return []
        extents = {k: dims[ev.extent] for k, ev in enumerate(self.graph.extents)}
        return [self._module.to_device(_empty_tensor(space.sizes(extents, args), np.dtype(space.dtype)))
                for space in self.workspaces]

    def specialization_for(self, dims: dict):
        """The specialisation a call with these extents ({extent: size}) runs, or None for the general program.
        A specialisation has no error record or workspaces: its recogniser matches only graphs whose general
        program cannot fail a check where the specialisation applies (cuda_kernels.Specialization)."""
        if self.specializations:
            extents = {k: int(dims[ev.extent]) for k, ev in enumerate(self.graph.extents)}
            return next((spec for spec in self.specializations if spec.applies(extents)), None)
        return None

    def _kernel_for(self, dims: dict) -> tuple:
        """(the compiled kernel for a call with these extents, whether it is a specialisation)."""
        spec = self.specialization_for(dims)
        return (self.kernel, False) if spec is None else (compile_program(spec.program, self.target), True)

    def synchronize(self) -> None:
        """Wait for the target's queued work (a no-op on the C target, whose calls return when done)."""
        self._module.synchronize()

    def __repr__(self) -> str:
        return f"<{self.target} executable {self.graph.name}>"


_EXECUTABLES: dict = {}


def build(graph: KernelGraph, target: str = "tilelang-c", checks: bool = True,
          emulate: bool = False) -> TileLangExecutable:
    """Lower ``graph`` for a TileLang target. With ``checks`` (the default) the kernel checks at run time what
    cpu checks (coordinates, extents, unique stores, histogram bins, ...) and the executable raises the same
    exceptions, leaving every output unchanged; ``checks=False`` drops the checks, as on cpu (T9).
    ``emulate=True`` runs the target's program in its host emulator (tilelang-metal: metal_emulation)."""
    key = (graph, target, bool(checks), bool(emulate))
    exe = _EXECUTABLES.get(key)
    if exe is None:
        emulated = getattr(_target_module(target), "emulated_executable", None)
        if emulate and emulated is None:
            raise ValueError(f"target {target} has no emulator: emulate=True is for tilelang-metal")
        exe = emulated(graph, bool(checks)) if emulate else TileLangExecutable(graph, target, bool(checks))
        _EXECUTABLES[key] = exe
    return exe


build.require_runtime = require_runtime
