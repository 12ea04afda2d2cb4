"""``intent.bench``: steady-state time of an executable, with its compile time and first call kept apart.

A kernel's first call pays for what the target compiles lazily (cpu: Numba; TileLang: its JIT), and a steady
state is what a loop of calls sees; one number mixing them misleads both ways. So the result carries three:
``compile_s``, what ``intent.compile`` measured when it built the executable (``display.record_compile``),
``first_call_s``, the first call made here, and ``median_s``, the median of ``repeat`` calls after ``warmup``.

On CUDA the steady-state calls are timed with CUDA events (``torch.cuda.Event``), which measure the device's
queue rather than the host's clock; everywhere else with ``time.perf_counter``. The first call is timed on the
host clock, since what it waits for (compilation) happens on the host.
"""
from __future__ import annotations

import statistics
import time

import attrs

from .display import RichDisplay, compile_record, esc, fields

CUDA_TARGETS = frozenset({"tilelang-cuda"})


@attrs.frozen(slots=True)
class BenchResult(RichDisplay):
    kernel: str
    target: str
    timer: str  # "cuda-events" or "perf_counter"
    compile_s: float | None  # intent.compile's cold build of this executable; None: built without intent.compile
    cache_hit: bool | None  # whether the latest intent.compile of it was an in-process cache hit
    first_call_s: float  # the first call made by bench (includes lazy compilation if none ran before)
    median_s: float
    times: tuple  # every steady-state timing, seconds, in call order
    warmup: int
    repeat: int

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "target": self.target, "timer": self.timer, "compile_s": self.compile_s,
                "cache_hit": self.cache_hit, "first_call_s": self.first_call_s, "median_s": self.median_s,
                "min_s": min(self.times), "max_s": max(self.times), "warmup": self.warmup, "repeat": self.repeat}

    def _rows(self) -> list:
        compile_text = "not recorded" if self.compile_s is None else f"{self.compile_s * 1e3:.3f} ms"
        return [("kernel", self.kernel), ("target", self.target), ("compile (cold)", compile_text),
                ("cache hit", {None: "unknown", True: "yes", False: "no"}[self.cache_hit]),
                ("first call", f"{self.first_call_s * 1e3:.3f} ms"),
                ("steady state (median)", f"{self.median_s * 1e3:.3f} ms over {self.repeat} calls ({self.timer})")]

    def __str__(self) -> str:
        return f"bench {self.kernel} on {self.target}: " + ", ".join(f"{k} {v}" for k, v in self._rows()[2:])

    def _pretty_lines(self) -> list:
        return [str(self)]

    def _repr_html_(self) -> str:
        return f"<div class='intent-bench'><strong>bench</strong> {esc(self.kernel)}{fields(self._rows())}</div>"


def _count(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < least:
        raise ValueError(f"{name} must be at least {least}, got {value}")
    return value


def _synchronize(exe) -> None:
    sync = getattr(exe, "synchronize", None)
    if sync is not None:
        sync()


def _host_times(exe, args, repeat: int) -> list:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        exe(*args)
        _synchronize(exe)
        times.append(time.perf_counter() - start)
    return times


def _cuda_times(exe, args, repeat: int) -> list:
    import torch

    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        exe(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def bench(exe, *args, warmup: int = 3, repeat: int = 10) -> BenchResult:
    """Time ``exe(*args)``: its first call, then ``warmup`` untimed calls, then the median of ``repeat`` timed ones.

    ``exe`` is what ``intent.compile`` returned (its compile time comes from that call). The arguments are
    passed to every call as given: outputs are overwritten each time.
    """
    from .kernel import Kernel

    if isinstance(exe, Kernel):
        raise TypeError(f"intent.bench takes a compiled executable; compile {exe.name} first "
                        f"(intent.compile({exe.name}, target=...))")
    if not callable(exe) or not hasattr(exe, "graph") or not hasattr(exe, "target"):
        raise TypeError(f"intent.bench takes an executable from intent.compile, got {type(exe).__name__}")
    warmup, repeat = _count("warmup", warmup, 0), _count("repeat", repeat, 1)
    start = time.perf_counter()
    exe(*args)
    _synchronize(exe)
    first = time.perf_counter() - start
    for _ in range(warmup):
        exe(*args)
    _synchronize(exe)
    cuda = exe.target in CUDA_TARGETS
    times = (_cuda_times if cuda else _host_times)(exe, args, repeat)
    record = compile_record(exe)
    return BenchResult(exe.graph.name, exe.target, "cuda-events" if cuda else "perf_counter",
                       None if record is None else record.cold_s, None if record is None else record.cache_hit,
                       first, statistics.median(times), tuple(times), warmup, repeat)


def compile_times(kernel, target: str, call, **options) -> tuple:
    """(executable, record) for a benchmark: ``intent.compile`` then ``call(exe)`` once (cold in this process;
    a disk cache may still hold the machine code), then ``intent.compile`` again (the in-process cache) and
    ``call`` once more. Every benchmark reports these per kernel, apart from its steady-state timings.

    ``compile_s`` is the executable's first build in this process (``display.compile_record``), also when a
    check of the script compiled it before (that check does not call it, so ``first_call_s`` stays cold)."""
    from .compiler import compile as compile_kernel

    def timed(fn):
        start = time.perf_counter()
        value = fn()
        return value, time.perf_counter() - start

    exe, cold = timed(lambda: compile_kernel(kernel, target=target, **options))
    _, first = timed(lambda: (call(exe), _synchronize(exe)))
    again, cached = timed(lambda: compile_kernel(kernel, target=target, **options))
    _, cached_first = timed(lambda: (call(again), _synchronize(again)))
    record = compile_record(again)
    return again, {"compile_s": cold if record is None else record.cold_s, "first_call_s": first,
                   "cached_compile_s": cached, "cached_first_call_s": cached_first,
                   "cache_hit": None if record is None else record.cache_hit}
