"""Requirement (issue 20, item 4): ``intent.bench`` reports the steady-state median apart from the cold compile
time and the first call; CUDA executables are timed with CUDA events. No timed assertions: fields are checked
for presence and sign, and the kernel's results against NumPy (the timed calls really ran it)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I, compiler, display
from intent_trace.bench import BenchResult, compile_times
from test_display import parse


@intent.kernel
def twice_plus(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], b: I.f32):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] * 2.0 + b


def _args():
    x = np.linspace(-1, 1, 9, dtype=np.float32)
    return x, np.zeros_like(x), 0.5


def test_bench_reports_compile_first_call_and_steady_state(target):
    exe = intent.compile(twice_plus, target=target)
    x, y, b = _args()
    result = intent.bench(exe, x, y, b, warmup=1, repeat=4)
    assert isinstance(result, BenchResult)
    np.testing.assert_array_equal(y, x * np.float32(2.0) + np.float32(0.5))  # every call computed the kernel
    assert (result.kernel, result.target, result.timer) == ("twice_plus", target, "perf_counter")
    assert result.compile_s is not None and result.compile_s > 0
    assert result.cache_hit in (True, False)
    assert result.first_call_s > 0 and result.median_s > 0
    assert len(result.times) == 4 and all(t > 0 for t in result.times)
    assert min(result.times) <= result.median_s <= max(result.times)
    assert (result.warmup, result.repeat) == (1, 4)
    record = result.to_json()
    assert set(record) == {"kernel", "target", "timer", "compile_s", "cache_hit", "first_call_s", "median_s",
                           "min_s", "max_s", "warmup", "repeat"}
    assert all(math.isfinite(record[k]) and record[k] > 0 for k in ("compile_s", "first_call_s", "median_s"))
    rows = dict(parse(result._repr_html_()).tables["table0"])
    assert rows["kernel"] == "twice_plus" and rows["steady state (median)"].endswith("over 4 calls (perf_counter)")
    assert str(result).startswith(f"bench twice_plus on {target}: compile (cold) ")


def test_bench_reports_the_in_process_cache_hit():
    @intent.kernel
    def fresh(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] - 1.0

    x = np.ones(3, np.float32)
    first = intent.bench(intent.compile(fresh, target="cpu"), x, np.zeros_like(x), repeat=1)
    again = intent.bench(intent.compile(fresh, target="cpu"), x, np.zeros_like(x), repeat=1)
    assert first.cache_hit is False and again.cache_hit is True
    assert again.compile_s == first.compile_s  # the cold build's time, kept


def test_bench_of_an_executable_built_without_compile_has_no_compile_time():
    exe = compiler.builder_for("generic")(twice_plus.trace())
    result = intent.bench(exe, *_args(), warmup=0, repeat=1)
    assert result.compile_s is None and result.cache_hit is None and result.median_s > 0
    assert dict(parse(result._repr_html_()).tables["table0"])["compile (cold)"] == "not recorded"


@pytest.mark.parametrize("options, error", [({"repeat": 0}, ValueError), ({"warmup": -1}, ValueError),
                                            ({"repeat": 2.0}, TypeError), ({"warmup": True}, TypeError)])
def test_bench_rejects_bad_counts_before_calling(options, error):
    calls = []
    exe = intent.compile(twice_plus, target="generic")
    exe_calls = type("Counting", (), {"graph": exe.graph, "target": "generic",
                                      "__call__": lambda self, *a: calls.append(a)})()
    with pytest.raises(error, match="repeat|warmup"):
        intent.bench(exe_calls, *_args(), **options)
    assert not calls


def test_bench_takes_an_executable_not_a_kernel():
    with pytest.raises(TypeError, match="compile twice_plus first"):
        intent.bench(twice_plus, *_args())
    with pytest.raises(TypeError, match="executable"):
        intent.bench(print, 1)


def test_cuda_executables_are_timed_with_cuda_events(monkeypatch):
    """A stand-in for torch.cuda's events (no GPU here): bench must time a tilelang-cuda executable's steady
    state with them, and a cpu one with the host clock."""
    import torch

    events = []

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            events.append(self)

        def record(self):
            self.at = len(events)

        def elapsed_time(self, end):  # milliseconds, as torch's
            return 2.0

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    calls = []
    graph = twice_plus.trace()
    fake = type("FakeCuda", (), {"graph": graph, "target": "tilelang-cuda", "synchronize": lambda self: None,
                                 "__call__": lambda self, *a: calls.append(a)})()
    result = intent.bench(fake, 1, warmup=2, repeat=3)
    assert result.timer == "cuda-events" and len(events) == 6 and result.times == (2e-3,) * 3
    assert len(calls) == 1 + 2 + 3
    events.clear()
    host = intent.bench(intent.compile(twice_plus, target="cpu"), *_args(), warmup=0, repeat=2)
    assert host.timer == "perf_counter" and not events


def test_compile_times_records_cold_and_cached_compiles_and_first_calls():
    @intent.kernel
    def fresh(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * 3.0

    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    exe, record = compile_times(fresh, "cpu", lambda e: e(x, y))
    np.testing.assert_array_equal(y, x * 3)
    assert exe is intent.compile(fresh, target="cpu")
    assert set(record) == {"compile_s", "first_call_s", "cached_compile_s", "cached_first_call_s", "cache_hit"}
    assert record["cache_hit"] is True
    assert all(record[k] > 0 for k in ("compile_s", "first_call_s", "cached_compile_s", "cached_first_call_s"))
    assert record["compile_s"] == display.compile_record(exe).cold_s


def test_compile_times_keeps_the_cold_build_when_a_check_compiled_first():
    """A benchmark that compiles to inspect the executable (its specialisations) before compile_times still
    reports the cold build's time, not the cache hit's."""
    @intent.kernel
    def fresh(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * 4.0

    checked = intent.compile(fresh, target="cpu")
    cold = display.compile_record(checked).cold_s
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    exe, record = compile_times(fresh, "cpu", lambda e: e(x, y))
    assert exe is checked and record["compile_s"] == cold and record["cache_hit"] is True


# --- benchmarks/plot.py ----------------------------------------------------------------------------------------

def _plot_module():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parent.parent / "benchmarks" / "plot.py"
    spec = importlib.util.spec_from_file_location("benchmarks_plot", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIXED_LINE = {"benchmark": "gpu", "device": "NVIDIA H200",
              "matmul_f16_f32acc_4096": {"ours_ms": 0.2, "torch_ms": 0.19, "ratio": 0.95, "target_ratio": 0.9,
                                         "reference": "torch.matmul"},
              "pointwise_chain4_f32": {"ratio": None, "reason": "no parallel program", "target_ratio": 0.8,
                                       "reference": "copy bandwidth"},
              "chain4_1M_f32": {"numpy_ms": 1.0, "cpu_ms": 0.4, "speedup_vs_numpy": 2.5, "target_speedup": 2.0},
              "softmax": {"speed_vs_numpy": 0.7, "target_speed_vs_numpy": None},
              "compile": {"chain4": {"compile_s": 0.1}}, "cold_compile_20_op_s": 0.5}


def test_plot_cases_read_every_scripts_ratio_fields():
    plot = _plot_module()
    assert plot.cases(FIXED_LINE) == [
        plot.Case("matmul_f16_f32acc_4096", 0.95, 0.9, "torch.matmul"),
        plot.Case("pointwise_chain4_f32", None, 0.8, "copy bandwidth"),
        plot.Case("chain4_1M_f32", 2.5, 2.0, "NumPy"),
        plot.Case("softmax", 0.7, None, "NumPy")]
    with pytest.raises(ValueError, match="no case"):
        plot.plot({"benchmark": "x", "compile": {}}, "unused.png")


def test_plot_writes_a_png_that_decodes(tmp_path):
    import matplotlib.image

    plot = _plot_module()
    path = tmp_path / "fixed.png"
    assert plot.plot(FIXED_LINE, str(path), "fixed <input>") == str(path)
    image = matplotlib.image.imread(str(path))
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert image.std() > 0  # not a blank canvas
    # the command line draws a saved line the same way
    saved = tmp_path / "line.json"
    saved.write_text(json.dumps(FIXED_LINE) + "\n")
    assert plot.main([str(saved), str(tmp_path / "cli.png")]) == 0
    assert matplotlib.image.imread(str(tmp_path / "cli.png")).shape[2] in (3, 4)


def test_finish_prints_the_line_unchanged_and_draws_only_on_request(tmp_path, capsys):
    import argparse

    plot = _plot_module()
    parser = plot.add_plot_argument(argparse.ArgumentParser())
    plot.finish(FIXED_LINE, parser.parse_args([]))
    assert json.loads(capsys.readouterr().out) == FIXED_LINE and not list(tmp_path.iterdir())
    path = tmp_path / "drawn.png"
    plot.finish(FIXED_LINE, parser.parse_args(["--plot", str(path)]))
    assert json.loads(capsys.readouterr().out) == FIXED_LINE
    import matplotlib.image

    assert matplotlib.image.imread(str(path)).ndim == 3
    assert plot.default_title(FIXED_LINE).startswith("gpu on NVIDIA H200, ")
