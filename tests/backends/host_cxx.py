"""Build C++ text into a shared library on this machine, cached by its text (the host runs of helper bodies:
Metal's, CUDA's atomics and NaN rules, next to tilelang-c's)."""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile

FLAGS = ("-O2", "-ffp-contract=off", "-fno-fast-math", "-fno-strict-aliasing", "-Wno-unknown-pragmas")


def shared_library(source: str, tag: str, flags: tuple = FLAGS) -> ctypes.CDLL:
    """Compile ``source`` with g++ (``$CXX``) into ``<tmp>/intent_trace_<tag>/`` unless built before, and load it."""
    digest = hashlib.sha256((source + " ".join(flags)).encode()).hexdigest()[:16]
    directory = os.path.join(tempfile.gettempdir(), f"intent_trace_{tag}")
    os.makedirs(directory, exist_ok=True)
    lib = os.path.join(directory, f"h{digest}.so")
    if not os.path.exists(lib):
        src = os.path.join(directory, f"h{digest}.cpp")
        with open(src, "w") as f:
            f.write(source)
        tmp = lib + f".{os.getpid()}"
        subprocess.run([os.environ.get("CXX", "g++"), "-std=c++17", "-shared", "-fPIC", *flags, src, "-o", tmp],
                       check=True, capture_output=True, text=True)
        os.replace(tmp, lib)
    return ctypes.CDLL(lib)
