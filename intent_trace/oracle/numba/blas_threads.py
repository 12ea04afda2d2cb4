"""BLAS inside a ``prange`` body: the BLAS Numba calls, kept to one thread while the parallel build runs (issue 19).

Numba's ``np.dot`` calls the gemm of SciPy's BLAS (``scipy.linalg.cython_blas``). Called from the iterations of a
parallel loop, a multi-threaded OpenBLAS starts its own threads inside every one of them: with two cores, the
batched ``q[b] @ k[b].T`` of B8 L1024 D64 burnt 31 CPU-ms for 16 wall-ms (each core shared by two BLAS threads,
spinning for each other), and OpenBLAS warns that such nesting may hang ("Detect OpenMP Loop"). So contractions
inside a ``prange`` body ran as loop nests (:func:`.contract._loops`, 2.6x slower than BLAS's).

With OpenBLAS's thread count set to one, each iteration's gemm runs on the thread that calls it, the threads
being the parallel loop's: the same product at 9.3 wall-ms and 17 CPU-ms. OpenBLAS's ``..._set_num_threads_local``
cannot do this per thread in its pthreads build (there it sets the process-wide count), so the count is set for
the process around each call of a parallel build that has such a contraction (:func:`one_thread`, counted across
the Python threads that run kernels at once: the count the first one saved comes back when the last one leaves),
and BLAS is used so only where that is known to hold:

- an OpenBLAS built with pthreads (``get_parallel() == 1``): its count is set as above (there, a count no
  larger than the threads it has started is one store to ``blas_cpu_number``, read when a call starts: a call
  already running on another thread keeps the threads and buffers it split its work over; SciPy's 0.3.30, read in
  its machine code);
- an OpenBLAS built sequential (``get_parallel() == 0``): nothing to set;
- an OpenMP OpenBLAS, MKL, Accelerate or anything not found: no BLAS inside a ``prange`` body (an OpenMP
  OpenBLAS's count is OpenMP's own, which Numba's OpenMP threads share).

Any BLAS summation order is within T5's gamma_n bound (the chapter leaves a contraction's order free), as at the top
level, where the kernel has always called BLAS; the serial build (one thread, or a small call) runs the same code
with BLAS's own count. A Python thread that calls SciPy's BLAS while a parallel build runs gets one thread too
(a slower call, the same values); a count changed by the user meanwhile is overwritten when the last call leaves.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading

# The capability's name goes into the cpu target's cache key (the generated source depends on it).
PTHREADS, SEQUENTIAL, NONE = "openblas-pthreads", "openblas-sequential", "none"
_PREFIXES = ("scipy_openblas_", "openblas_")  # SciPy's wheels rename OpenBLAS's symbols; other builds do not
_SUFFIXES = ("", "64_")  # an ILP64 build's symbol suffix


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _gemm_library() -> str | None:
    """The path of the shared library holding the ``sgemm`` Numba's ``np.dot`` calls (SciPy's Cython BLAS table
    holds its address: SciPy's ``cython_blas`` module, which links the BLAS; ``dlsym`` on it searches the libraries
    it needs too), or None."""
    try:
        from scipy.linalg import cython_blas
        capsule = cython_blas.__pyx_capi__["sgemm"]
        # prototypes of our own: ctypes.pythonapi's function objects are shared with every other user of them
        name_of = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
        pointer_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", ctypes.pythonapi))
        address = pointer_of(capsule, name_of(capsule))
        libc = ctypes.CDLL(None)  # the process's own symbols, dladdr among them (no ldconfig search by name)
        info = _DlInfo()
        libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        if not address or not libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
            return None
        return info.dli_fname.decode()
    except (ImportError, KeyError, AttributeError, OSError, TypeError, ValueError):  # (no dladdr, no CDLL(None): Windows)
        return None


def _function(lib, name: str, restype, argtypes):
    for prefix in _PREFIXES:
        for suffix in _SUFFIXES:
            f = getattr(lib, f"{prefix}{name}{suffix}", None)
            if f is not None:
                f.restype, f.argtypes = restype, argtypes
                return f
    return None


@functools.cache
def _openblas():
    """(capability, get_num_threads, set_num_threads) of the BLAS Numba calls."""
    path = _gemm_library()
    if path is None:
        return NONE, None, None
    try:
        lib = ctypes.CDLL(path)  # already loaded by SciPy: the same handle, nothing runs
    except OSError:
        return NONE, None, None
    parallel = _function(lib, "get_parallel", ctypes.c_int, [])
    get = _function(lib, "get_num_threads", ctypes.c_int, [])
    put = _function(lib, "set_num_threads", None, [ctypes.c_int])
    if parallel is None or get is None or put is None:
        return NONE, None, None
    kind = {0: SEQUENTIAL, 1: PTHREADS}.get(parallel(), NONE)
    return kind, get, put


def capability() -> str:
    """Whether (and how) a contraction inside a ``prange`` body may call BLAS here: :data:`PTHREADS`,
    :data:`SEQUENTIAL` or :data:`NONE`."""
    return _openblas()[0]


def available() -> bool:
    return capability() != NONE


_lock = threading.Lock()
_users = 0
_saved = None


def _after_fork_in_child() -> None:
    """A child forked while another thread held the lock would wait on it forever: it starts with a fresh one and
    no users (a parallel call in flight in the parent is not the child's; the count it inherits stays)."""
    global _lock, _users, _saved
    _lock, _users, _saved = threading.Lock(), 0, None


os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def one_thread():
    """The BLAS Numba calls on one thread while the block runs (a pthreads OpenBLAS; otherwise nothing to do)."""
    global _users, _saved
    kind, get, put = _openblas()
    if kind != PTHREADS:
        yield
        return
    with _lock:
        if _users == 0:
            _saved = get()
            if _saved != 1:
                put(1)
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved != 1:
                put(_saved)


def threads() -> int | None:
    """The BLAS's thread count now (None where it cannot be read): for tests and reports."""
    get = _openblas()[1]
    return get() if get is not None else None
