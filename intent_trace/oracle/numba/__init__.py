"""The CPU oracle ("cpu-compiled"): KIR -> Python source -> numba.njit."""
from .target import CpuExecutable, build, generate  # noqa: F401
