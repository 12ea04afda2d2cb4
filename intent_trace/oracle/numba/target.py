"""The ``cpu`` target: generated source -> a cached Numba function -> a checked, staged executable.

Caching has two levels. In process: executables are keyed by the graph (constexprs, dtypes,
ranks and static extents are all in it) and the options. On disk: the generated module is written
once under a name that hashes the *graph* (its printed KIR, the bits of its constants, the options
and the versions of the code generator and runtime), together with the error sites its checks
report, and Numba's own cache (``cache=True``) keeps the machine code next to it. A new process
that traces the same kernel regenerates the module's source, checks that the file is exactly that
(:func:`load`) and loads the compiled function from Numba's cache without compiling.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
import warnings

import attrs
import numba
import numpy as np
from numba.np.ufunc import parallel as _parallel

from ... import caches
from ...arguments import bind_arguments
from ...compiler import register_target
from ...display import ExecutableDisplay
from ...graph.lowering import ErrorSite
from ...graph.printer import format_graph
from ...graph.values import KernelGraph, Literal
from ...limits import allocation_limit, check_allocation
from ...specialize import respecialize
from . import blas_threads
from .outline import hoist_buffers, outline

# Numba's OpenMP workers spin for a while after each parallel loop; on a small machine they take the cores
# from the BLAS threads that contract calls (and from the next call's work). Wait passively instead, unless
# the user chose a policy (libgomp reads it when Numba first starts its thread pool, after this import).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_SOURCE_VERSION = "2"


def cache_dir() -> str:
    """This target's directory under the one cache root (``intent_trace.caches``: a verification redirects it)."""
    return caches.cache_path(f"numba-{numba.__version__}-v{_SOURCE_VERSION}")


# The disk cache is keyed by the graph, so the code that turns graphs into modules is part of the key:
# a digest of every source file of the package (the generator, the runtime helpers Numba compiles into
# each kernel and does not track, the printer). Any change to them yields new modules.
def _package_sources(root: str) -> list:
    """The package's .py files, in the order ``sorted(os.walk(root))`` visits them (by directory)."""
    found = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]  # bytecode and Numba's cache files, never sources
        found.append((directory, sorted(name for name in files if name.endswith(".py"))))
    found.sort()
    return [os.path.join(directory, name) for directory, names in found for name in names]


def _package_digest(root: str, paths: list) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(os.path.relpath(path, root).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


@functools.cache
def codegen_digest() -> str:
    """The package digest, computed once per process.

    Hashing every source costs milliseconds on each new process, so the digest is remembered in the
    cache directory next to the stamp it was computed for: the path, size and modification time of
    every source (the check Python itself makes before trusting a bytecode file). Any edit changes the
    stamp and the digest is recomputed from the contents.
    """
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = _package_sources(root)
    h = hashlib.sha256()
    for path in paths:
        st = os.stat(path)
        h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    stamp = h.hexdigest()[:32]
    digest = None
    try:  # an unusable cache directory is reported where the module is loaded, as before
        memo = os.path.join(cache_dir(), "codegen-digest")
        with open(memo) as f:
            saved_stamp, saved_digest = f.read().split()
        if saved_stamp == stamp:
            digest = saved_digest
    except (OSError, ValueError):
        pass
    if digest is None:
        digest = _package_digest(root, paths)
        try:
            directory = cache_dir()
            _write_atomically(directory, os.path.join(directory, "codegen-digest"), f"{stamp} {digest}\n")
        except OSError:  # a read-only cache still works, it just hashes every time
            pass
    return digest


def generate(graph: KernelGraph, checks: bool = True):
    """(module source, error sites, whether a call must stage its outputs: some site can fail after a write,
    whether its parallel build calls BLAS inside a ``prange`` body: :func:`.blas_threads.one_thread` around it)."""
    from .emitter import NumbaEmitter
    from .values import Scalar, View

    em = NumbaEmitter(graph, checks)
    args = []
    for k, p in enumerate(graph.params):
        name = f"arg{k}"
        args.append(name)
        t = p.type
        if p.kind == "view":
            em.env[p.var] = View(name, tuple(f"{name}.shape[{a}]" for a in range(t.rank)), t.dtype, p.name)
        else:
            em.env[p.var] = Scalar(name)
    for k, ev in enumerate(graph.extents):
        name = f"ext{k}"
        args.append(name)
        em.env[ev] = Scalar(name)
        em.dim_names[ev.extent] = name
    args += ["limit", "err"]  # the allocation limit (read at each call) and the error record
    em.run_region(graph.body)
    lines = em.lines or ["    pass"]
    flags = "cache=True, error_model='numpy', nogil=True"
    signature = f"({', '.join(args)}):"
    globals_ = {"math", "np", "njit", "prange", "lazy_module", "R",
                *(line.split(" = ", 1)[0] for line in em.constant_lines if " = " in line)}
    # The parallel build's loop bodies as functions it calls per chunk of iterations (outline.py: Numba's parfor
    # passes would otherwise take most of its compile time); the loops as they are where they cannot be.
    outlined = outline("kernel_parallel", args, lines, globals_) if em.uses_prange else None
    parallel = outlined.parallel if outlined else lines
    # An outlined body is called only by the parallel build, through its symbol (outlined_call.py): no CPython or
    # C wrapper of its own to compile (about a tenth of its code). Calling one from Python is not supported.
    body_flags = f"{flags}, no_cpython_wrapper=True, no_cfunc_wrapper=True"
    functions = [line for helper in (outlined.helpers if outlined else ())
                 for line in (f"@njit({body_flags})", *helper.splitlines(), "", "")]
    serial = hoist_buffers("kernel", args, lines, globals_) if em.uses_prange else lines
    functions += [f"@njit({flags})", f"def kernel{signature}", *serial, "    return", ""]
    if em.uses_prange:
        # Compiled with parfors: Numba's parallel pipeline costs compile time, so it is built only when a call
        # is large enough to use both cores.
        functions += ["", f"@njit({flags}, parallel=True)", f"def kernel_parallel{signature}", *parallel,
                      "    return", ""]
    source = "\n".join([
        "# Generated by intent_trace (cpu target). Do not edit: regenerated from the KIR.",
        f"# code generator {codegen_digest()}",
        "import math",
        "import numpy as np",
        "from numba import njit, prange",
        "from intent_trace.oracle.numba.lazy import lazy_module",
        "",
        "# Imported when Numba first compiles (a module loaded from Numba's cache never needs it).",
        "R = lazy_module('intent_trace.oracle.numba.runtime')",
        "",
        *em.constant_lines,
        "",
        "",
        *functions,
    ])
    return source, em.error_sites, em.staging.stages(em), em.blas_in_prange


def graph_key(graph: KernelGraph, checks: bool) -> str:
    """A digest of everything that shapes the generated module."""
    h = hashlib.sha256()
    for part in (format_graph(graph), repr(bool(checks)), codegen_digest(), _SOURCE_VERSION, numba.__version__,
                 blas_threads.capability()):  # (BLAS inside prange bodies or not: a different module)
        h.update(part.encode())
        h.update(b"\0")
    for node in graph.walk():  # constants print in shortest form; their exact bits (NaN payloads) go here
        for x in node.inputs:
            if isinstance(x, Literal):
                h.update(np.asarray(x.value).tobytes())
        value = node.attr("value")
        if value is not None:
            h.update(np.asarray(value).tobytes())
    return h.hexdigest()[:32]


def _sites_source(sites, stages: bool, blas_in_prange: bool) -> str:
    rows = ", ".join(repr((site.exception.__name__, site.message, site.note, site.texts)) for site in sites)
    return (f"ERROR_SITES = [{rows}]\nSTAGES_OUTPUTS = {bool(stages)!r}\n"
            f"BLAS_IN_PRANGE = {bool(blas_in_prange)!r}\n")


def _site(row) -> ErrorSite:
    """An error site read back from a generated module's ``ERROR_SITES`` row."""
    exception, message, note, texts = row
    return ErrorSite(getattr(builtins, exception), message, note, **texts)


def _write_atomically(directory: str, path: str, text: str) -> None:
    """Write ``path`` whole or not at all: concurrent processes never see a half-written file, and a write
    that fails leaves no ``*.tmp`` file behind."""
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load(key: str, build):
    """The generated module for ``key``, executed from the source ``build()`` returns, never from what the
    cache directory holds.

    The module file on disk is only trusted to be what the generator writes: it is the file Numba's
    ``cache=True`` keys its machine code by (path, size and modification time) and the file tracebacks
    point into. A digest recorded next to it would be rewritten by whoever can rewrite the module, so the
    check is the strongest one available without a secret: the source is regenerated in every process
    (milliseconds; the expensive step, Numba's compile, stays cached) and compared with the file. A file
    that differs (edited, truncated, from an older build with the same key) is replaced, with a warning.
    Numba finds its machine code by a stamp of the file (this Numba: the sha256 of its contents; older
    ones: size and modification time, which a replacement changes), so code compiled from a file that
    was not the generator's is never loaded for the regenerated one. The module is executed from the
    regenerated source itself, so a file changed after the comparison is not executed either. (Numba's
    own index and data files are pickles: whoever can write the cache directory can plant code there,
    which no check of the module prevents; the cache directory must be the user's own.)
    """
    name = f"intent_trace_generated_{key}"
    module = sys.modules.get(name)
    if module is not None:  # verified when this process loaded it
        return module
    source = build()
    directory = cache_dir()
    path = os.path.join(directory, f"k_{key}.py")
    try:
        with open(path, encoding="utf-8", newline="") as f:
            on_disk = f.read()
    except FileNotFoundError:
        on_disk = None
    except (OSError, UnicodeDecodeError):
        on_disk = ""
    if on_disk != source:
        if on_disk is not None:
            warnings.warn(f"intent_trace cpu cache: {path} is not the module the code generator writes for this "
                          f"kernel (edited, truncated or corrupted); it was regenerated", RuntimeWarning,
                          stacklevel=3)
        _write_atomically(directory, path, source)
    spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 (the generator's own source)
    sys.modules[name] = module
    return module


# Calls touching at least this many elements run the parallel build (when the kernel has one).
PARALLEL_THRESHOLD = 1 << 16


class _Fork:
    """Whether this process may run a parallel build.

    This Numba's threading layers are ``omp`` and ``workqueue`` (no TBB). ``omp`` is the one safe for
    kernels called from several threads at once (they release the GIL), so it stays; but a process
    forked after its OpenMP pool started (Python's default ``multiprocessing`` on Linux) cannot use
    the pool (GNU OpenMP's threads are not in the child), and Numba then kills the child
    ("fork() called from a process already using GNU OpenMP"). Such a child runs the serial build of
    every kernel instead: the same results, on one core. ``workqueue`` and ``tbb`` survive forks.
    """

    started = False  # this process has run a parallel build (Numba's thread pool is up)
    unsafe = False  # forked from a process whose OpenMP pool was up

    @classmethod
    def after_in_child(cls) -> None:
        if cls.started and not cls.unsafe:
            try:
                cls.unsafe = numba.threading_layer() == "omp"
            except ValueError:  # no layer started after all
                pass


os.register_at_fork(after_in_child=_Fork.after_in_child)


def _threads() -> int:
    """The number of threads a parallel build would run on here: Numba's setting for this thread
    (``numba.set_num_threads``) once its pool is up, else ``NUMBA_NUM_THREADS`` (what the pool will start
    with), read without starting the pool (``numba.get_num_threads`` starts it)."""
    return _parallel.get_num_threads() if _parallel._is_initialized else numba.config.NUMBA_NUM_THREADS

_HOST_VIEW = {"f16": np.uint16, "bf16": np.uint16}
_LAYOUTS = 64  # argument layouts an executable remembers the call plan of (CpuExecutable._plan)


@attrs.frozen(slots=True)
class _CallPlan:
    """What a call with one layout of NumPy arrays (every parameter a view) passes besides the arrays: the extents in
    the graph's order, the indices of the views it writes (checked for aliasing each call: that depends on the
    data, not the layout), the views passed as their storage bits (index, NumPy dtype) and the elements touched
    (for :meth:`CpuExecutable._build_for`)."""

    extents: tuple
    outputs: tuple
    host: tuple
    elements: int


class CpuExecutable(ExecutableDisplay):
    """``intent.compile(k, target="cpu")``: the CPU oracle."""

    target = "cpu"

    def __init__(self, graph: KernelGraph, checks: bool = True):
        self.graph = graph
        self.checks = checks
        self.key = graph_key(graph, checks)
        self._module = None
        self._generated = None
        self._layouts: dict = {}  # array layouts bound before -> their _CallPlan
        self._views_only = all(p.kind == "view" for p in graph.params)

    def _generate(self) -> tuple:
        if self._generated is None:
            source, sites, stages, blas_in_prange = generate(self.graph, self.checks)
            self._generated = (source + "\n" + _sites_source(sites, stages, blas_in_prange), sites)
        return self._generated

    @property
    def module(self):
        if self._module is None:
            self._module = load(self.key, lambda: self._generate()[0])
        return self._module

    @property
    def source(self) -> str:
        """The generated Python module (what Numba compiles)."""
        return self._generate()[0]

    @property
    def error_sites(self) -> list:
        return [_site(row) for row in self.module.ERROR_SITES]

    @property
    def function(self):
        """The serial build (always present)."""
        return self.module.kernel

    def _plan(self, args: tuple):
        """The call's :class:`_CallPlan`, or None where the general binding must run (a parameter that is not a view,
        an argument that is not a NumPy array). The plan depends only on each array's dtype, shape, strides and
        writeability: one bound before comes from a table (a layer norm's call at two threads spent 60-90 us of
        Python around its 0.85 ms kernel, its interpreter state cold after 32 MB of data; a row sum's 13 of 30 us)."""
        if not (self._views_only and all(type(a) is np.ndarray for a in args)):
            return None
        key = tuple((a.dtype, a.shape, a.strides, a.flags.writeable) for a in args)
        plan = self._layouts.get(key)
        if plan is None:
            dims = bind_arguments(self.graph, args)[1]  # raises for a layout that does not bind: never stored
            params = self.graph.params
            plan = _CallPlan(tuple(dims[ev.extent] for ev in self.graph.extents),
                             tuple(i for i, p in enumerate(params) if p.type.access != "In"),
                             tuple((i, _HOST_VIEW[p.type.dtype.name]) for i, p in enumerate(params)
                                   if p.type.dtype.name in _HOST_VIEW),
                             sum(a.size for a in args))
            if len(self._layouts) < _LAYOUTS:
                self._layouts[key] = plan
        return plan

    def _pick(self, values):
        """The build a call with these argument values runs (:meth:`_build_for` their elements)."""
        return self._build_for(_elements(values))

    def _build_for(self, elements: int):
        """The parallel build for a call touching :data:`PARALLEL_THRESHOLD` elements when it may run on more
        than one thread; else the serial build. With one thread the parallel build computes the same values in
        the same order, only with the parfor's scheduling around each loop (row sum 4096x1024: 230 us against
        the serial build's 204 us)."""
        parallel = getattr(self.module, "kernel_parallel", None)
        if parallel is not None and elements >= PARALLEL_THRESHOLD and not _Fork.unsafe and _threads() > 1:
            _Fork.started = True
            return parallel
        return self.module.kernel

    def __call__(self, *args, **constexprs) -> None:
        if constexprs:  # another constexpr value: that specialisation runs the arguments (intent_trace.specialize)
            return respecialize(self, constexprs)(*args)
        plan = self._plan(args)
        # Outputs are staged whenever the kernel can fail after a write (an error site reachable after one: run-time
        # checks, and the allocation checks made whatever ``checks`` says; see :mod:`.staging`) or an input
        # aliases them: the general path below.
        if plan is None or self.module.STAGES_OUTPUTS or any(_aliases(i, args) for i in plan.outputs):
            return self._call_staged(args, plan)
        call_args = list(args)
        for i, host in plan.host:
            call_args[i] = args[i].view(host)
        self._launch(call_args + list(plan.extents), plan.elements)

    def _call_staged(self, args: tuple, plan) -> None:
        """The call with outputs staged where they must be: bound by ``plan`` where there is one, else by the
        general binding."""
        if plan is None:
            values, dims = bind_arguments(self.graph, args)
            extents, elements = [dims[ev.extent] for ev in self.graph.extents], _elements(values)
        else:
            values, extents, elements = list(args), list(plan.extents), plan.elements
        staged, call_args = [], []
        for i, (p, v) in enumerate(zip(self.graph.params, values)):
            if p.kind == "view":
                if p.type.access != "In" and (self.module.STAGES_OUTPUTS or _aliases(i, values)):
                    check_allocation(f"the staging copy of {p.name}", v.shape, v.itemsize)
                    copy = np.array(v, copy=True)
                    staged.append((v, copy))
                    v = copy
                hv = _HOST_VIEW.get(p.type.dtype.name)
                call_args.append(v.view(hv) if hv is not None else v)
            else:
                call_args.append(np.float32(v) if p.type.dtype.name in _HOST_VIEW else v[()])
        self._launch(call_args + extents, elements)
        for caller, copy in staged:
            np.copyto(caller, copy)

    def _launch(self, call_args: list, elements: int) -> None:
        """Run the build :meth:`_build_for` chooses on the bound arguments and extents; raise what its checks
        found."""
        err = np.zeros(4, dtype=np.int64)
        function = self._build_for(elements)
        # a parallel build whose iterations call BLAS: BLAS on their own threads only
        blas = self.module.BLAS_IN_PRANGE and function is not self.module.kernel
        with blas_threads.one_thread() if blas else contextlib.nullcontext():
            function(*call_args, np.int64(allocation_limit()), err)
        if err[0]:
            raise _site(self.module.ERROR_SITES[err[0] - 1]).error(err[1:])

    def __repr__(self) -> str:
        return f"<cpu executable {self.graph.name}>"


def _elements(values) -> int:
    """The array elements a call's argument values touch (what :meth:`CpuExecutable._build_for` decides by)."""
    return sum(v.size for v in values if isinstance(v, np.ndarray))


def _aliases(i: int, values) -> bool:
    """Whether argument ``i`` shares memory with another array argument (then outputs are staged)."""
    v = values[i]
    return any(j != i and isinstance(w, np.ndarray) and np.shares_memory(v, w) for j, w in enumerate(values))


_EXECUTABLES: dict = {}


def build(graph: KernelGraph, checks: bool = True):
    key = (graph, bool(checks), blas_threads.capability())  # (the capability: as in graph_key)
    exe = _EXECUTABLES.get(key)
    if exe is None:
        exe = CpuExecutable(graph, checks=bool(checks))
        _EXECUTABLES[key] = exe
    return exe


register_target("cpu", build)
