"""Compile a translated Metal kernel with the host C++ compiler (cached by source hash) and run it.

:class:`EmulatedKernel` is the emulator's whole interface: built from Metal source, called with buffers (NumPy
arrays or CPU torch tensors, by parameter name), the argument struct's fields (by name), a grid and a threadgroup
size. A call whose dispatch reported anything (a data race, an out-of-bounds access, a barrier not reached by every
thread) raises :class:`EmulationError` with the reports; an out-of-bounds access is never performed.

Compilation: ``g++ -std=c++17 -O1`` with contraction off and no fast math (the host's IEEE arithmetic stands in for
a Metal build with ``MTLMathModeSafe``). The emulation header is precompiled once per header text, compiler and
flags; each kernel is one shared object named by the hash of its C++ text, under the intent_trace cache root
(:mod:`~intent_trace.caches`: ``$INTENT_TRACE_CACHE_DIR`` or ``~/.cache/intent_trace``, a verification's own root
while one runs), so a kernel is compiled once per machine.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np

from ....caches import cache_root
from .translate import FLOAT_TYPES, translate

HERE = os.path.dirname(os.path.abspath(__file__))
# itm_metal.h includes the others
HEADERS = ("itm_metal.h", "itm_memory.h", "itm_library.h", "itm_matrix.h", "itm_dispatch.h")
FLAGS = ("-std=c++17", "-O1", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-fno-strict-aliasing",
         "-fstack-clash-protection", "-Wno-unknown-pragmas", "-Wno-attributes")
_REPORT_SIZE = 1 << 16
MAX_THREADS = 1024  # threads per threadgroup on Apple GPUs
COMPILE_SECONDS: list = []  # wall time of each kernel compiled in this process (the suite plugin reports them)


class EmulationError(RuntimeError):
    """What the emulated dispatch found wrong (data races, out-of-bounds accesses, divergent barriers)."""

    def __init__(self, kernel: str, reports: str):
        self.reports = tuple(r for r in reports.split("\n") if r)
        super().__init__(f"emulated Metal kernel {kernel}: " + "; ".join(self.reports))


def compiler() -> str | None:
    """The host C++ compiler (``$CXX``, else g++, clang++ or c++ on PATH), or None."""
    cxx = os.environ.get("CXX")
    if cxx:
        return cxx
    return next((c for c in ("g++", "clang++", "c++") if shutil.which(c)), None)


def _header_dir(cxx: str) -> str:
    """The header directory under the cache root in use now (a verification redirects it: caches.cache_root)."""
    return _header_dir_under(cxx, cache_root())


@functools.lru_cache(maxsize=None)
def _header_dir_under(cxx: str, root: str) -> str:
    """The directory holding the headers and the precompiled itm_metal.h for these header texts, compiler and flags."""
    texts = {}
    for name in HEADERS:
        with open(os.path.join(HERE, name)) as f:
            texts[name] = f.read()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    key = hashlib.sha256("\0".join([*texts.values(), cxx, version, *FLAGS]).encode()).hexdigest()[:16]
    directory = os.path.join(root, f"metal-emulation-{key}")
    if not os.path.exists(os.path.join(directory, "itm_metal.h")):
        os.makedirs(directory, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=directory)
        for name, text in texts.items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        try:  # a precompiled header only saves time: without it the plain header is parsed
            subprocess.run([cxx, *FLAGS, "-x", "c++-header", os.path.join(tmp, "itm_metal.h"), "-o",
                            os.path.join(tmp, "itm_metal.h.gch")], capture_output=True, check=True, timeout=300)
            os.replace(os.path.join(tmp, "itm_metal.h.gch"), os.path.join(directory, "itm_metal.h.gch"))
        except (subprocess.SubprocessError, OSError):
            pass
        for name in (*HEADERS[1:], HEADERS[0]):  # itm_metal.h last: its presence means the directory is complete
            os.replace(os.path.join(tmp, name), os.path.join(directory, name))
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def build(cpp: str) -> ctypes.CDLL:
    """Compile the translated C++ into a shared object (once per text) and load it."""
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("the Metal emulator needs a C++ compiler (g++, clang++ or c++ on PATH, or $CXX); none found")
    directory = _header_dir(cxx)
    digest = hashlib.sha256(cpp.encode()).hexdigest()[:24]
    lib = os.path.join(directory, f"k{digest}.so")
    if not os.path.exists(lib):
        fd, src = tempfile.mkstemp(dir=directory, suffix=".cpp")
        with os.fdopen(fd, "w") as f:
            f.write(cpp)
        tmp = lib + f".{os.getpid()}.tmp"
        start = time.perf_counter()
        try:
            done = subprocess.run([cxx, *FLAGS, "-shared", f"-I{directory}", src, "-o", tmp], capture_output=True,
                                  text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"the Metal emulator failed to compile the kernel as C++:\n{done.stderr[-4000:]}")
            os.replace(tmp, lib)
            COMPILE_SECONDS.append(time.perf_counter() - start)
        finally:
            os.unlink(src)
            if os.path.exists(tmp):
                os.unlink(tmp)
    library = ctypes.CDLL(lib)
    library.itm_run.restype = ctypes.c_long
    library.itm_run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_long),
                                ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_double),
                                ctypes.POINTER(ctypes.c_uint), ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_long]
    return library


def _memory(value) -> tuple:
    """(address, bytes) of a C-contiguous NumPy array or CPU torch tensor."""
    if type(value).__module__.startswith("torch"):
        if value.device.type != "cpu" or not value.is_contiguous():
            raise ValueError(f"the Metal emulator takes contiguous CPU tensors; got one on {value.device}")
        return value.data_ptr(), value.numel() * value.element_size()
    array = np.asarray(value)
    if not array.flags.c_contiguous:
        raise ValueError("the Metal emulator takes C-contiguous arrays")
    return array.ctypes.data, array.nbytes


def _dims(v) -> tuple:
    v = (v,) if isinstance(v, int) else tuple(v)
    if not 1 <= len(v) <= 3 or any(not isinstance(n, (int, np.integer)) or n < 1 for n in v):
        raise ValueError(f"a Metal grid or threadgroup size is 1 to 3 positive integers; got {v!r}")
    return (*map(int, v), *(1,) * (3 - len(v)))


class EmulatedKernel:
    """A Metal kernel compiled for this machine: ``kernel(buffers, fields, grid=..., threads=...)``."""

    def __init__(self, source: str, kernel: str | None = None):
        self.source = source
        self.translation = translate(source, kernel)
        self.name = self.translation.kernel
        self._library = None

    @property
    def library(self) -> ctypes.CDLL:
        if self._library is None:
            self._library = build(self.translation.cpp)
        return self._library

    def __call__(self, buffers: dict, fields: dict | None = None, grid=(1, 1, 1), threads=(1, 1, 1),
                 seed: int = 0) -> None:
        """Run over ``grid`` threadgroups of ``threads`` threads. ``buffers`` maps each buffer parameter's name to its
        memory (written in place); ``fields`` each argument-struct field's name to its value. ``seed`` picks the
        order of threadgroups and of threads between barriers (0: in index order)."""
        t = self.translation
        missing = [p.name for p in t.buffers if p.name not in buffers]
        if missing:
            raise ValueError(f"emulated Metal kernel {self.name}: no memory for buffer(s) {', '.join(missing)}")
        memory = [_memory(buffers[p.name]) for p in t.buffers]
        n = max(1, len(memory))
        bases = (ctypes.c_void_p * n)(*(m[0] for m in memory))
        sizes = (ctypes.c_long * n)(*(m[1] for m in memory))
        fields = fields or {}
        unknown = [name for _, name, _ in t.fields if name not in fields]
        if unknown:
            raise ValueError(f"emulated Metal kernel {self.name}: no value for argument(s) {', '.join(unknown)}")
        k = max(1, len(t.fields))
        ints = (ctypes.c_long * k)(*(0 if c in FLOAT_TYPES else int(fields[name]) for c, name, _ in t.fields))
        floats = (ctypes.c_double * k)(*(float(fields[name]) if c in FLOAT_TYPES else 0.0 for c, name, _ in t.fields))
        group = _dims(threads)
        size = group[0] * group[1] * group[2]
        limit = min(MAX_THREADS, t.max_threads or MAX_THREADS)
        if size > limit:
            raise ValueError(f"emulated Metal kernel {self.name}: a threadgroup of {size} threads exceeds the "
                             f"{limit} the kernel can run with (max_total_threads_per_threadgroup, Apple GPUs' 1024)")
        launch = (ctypes.c_uint * 6)(*_dims(grid), *group)
        reports = ctypes.create_string_buffer(_REPORT_SIZE)
        found = self.library.itm_run(bases, sizes, ints, floats, launch, ctypes.c_ulonglong(seed), reports,
                                     _REPORT_SIZE)
        if found:
            raise EmulationError(self.name, reports.value.decode(errors="replace"))
