"""A/B of the row program's NaN fast path (:mod:`intent_trace.backends.tilelang.cuda_rows_nan`) on one GPU, in one
process: each zoo row case built twice, with the fast path (``fast``) and without it (``careful``: the careful
program alone, main's program), both checked against PyTorch and against each other bit for bit (the fast path must
change no bit, NaN payloads included), then timed alternately (CUDA events, median; ``*_us`` one call a timing,
``*_stream_us`` 20 back-to-back calls a timing, per call). Then the recompute's cost: softmax and RMSNorm f16 with
NaNs planted in a few rows (and softmax with a NaN in every row, the worst case), checked against torch's NaN-ness.
One JSON line per case. ``python benchmarks/ab_rows_nan.py [--only NAMES]``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import intent_trace as intent
from intent_trace.backends.tilelang import cuda_rows_nan
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.precompile import precompile
from intent_trace.cli import quiet_third_party_logs

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import gpu_zoo  # noqa: E402
from gpu_zoo import cuda_time  # noqa: E402

ROWS = ("softmax_rows_parallel_f32_16384x1024", "softmax_whole_f32_16384x1024", "log_softmax_f32_16384x1024",
        "layer_norm_f32_16384x1024", "rms_norm_f16_16384x1024", "row_sum_f32_16384x4096",
        "argmax_rows_f32_16384x1024")


def build(kernel, fast: bool):
    cuda_rows_nan.NAN_FAST_PATH = fast
    tl_target._EXECUTABLES.clear()
    exe = intent.compile(kernel, target="tilelang-cuda")
    program = exe.program  # the plan is taken now, under the flag
    assert ("itr_is_nan" in program) == fast, f"{kernel.name}: fast={fast} but the program says otherwise"
    return exe


def _bits(t):
    import torch
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32 if t.element_size() == 4 else torch.int64)


def _same_bits(a, b) -> bool:
    import torch
    return bool(torch.equal(_bits(a), _bits(b)))


def _time(exes: dict, args) -> dict:
    out = {}
    for _ in range(2):  # alternated, the second round kept: both warm, neither first
        for name, exe in exes.items():
            out[f"{name}_us"] = cuda_time(lambda: exe.launch(*args), 20) * 1e6
            out[f"{name}_stream_us"] = cuda_time(lambda: exe.launch(*args), 10, inner=20) * 1e6
    return out


def row_case(case, exes: dict) -> dict:
    import torch
    made = case.make(case.shape)
    args, outputs, torch_fn = made[:3]
    got = {}
    for name, exe in exes.items():
        for o in outputs:
            o.fill_(0)
        exe.launch(*args)
        torch.cuda.synchronize()
        got[name] = [o.clone() for o in outputs]
    want = torch_fn()
    err = max(float(((o.double() - w.double()).abs() / (w.double().abs() + 1)).max())
              for o, w in zip(got["fast"], want))
    line = {"case": case.name, "max_err_vs_torch": err, "tol": case.tol,
            "fast_equals_careful_bitwise": all(_same_bits(a, b) for a, b in zip(got["fast"], got["careful"]))}
    line.update(_time(exes, args))
    line["torch_us"] = cuda_time(made[3] if len(made) > 3 else torch_fn, 20) * 1e6
    line["speedup_fast_vs_careful"] = line["careful_us"] / line["fast_us"]
    line["speedup_stream"] = line["careful_stream_us"] / line["fast_stream_us"]
    return line


def nan_case(name, kernel, dtype, exes: dict, rows_with_nan: int) -> dict:
    """``rows_with_nan`` rows of 16384x1024 given NaNs (quiet and signalling payloads, both signs) and an inf and a
    -inf (inf - inf in the sums) at varied positions."""
    import torch
    m, n = 16384, 1024
    g = torch.Generator(device="cuda").manual_seed(17)
    x = torch.randn(m, n, device="cuda", generator=g).to(dtype)
    rows = torch.linspace(0, m - 1, rows_with_nan, device="cuda").long()
    payloads = [0x7FC00001, 0xFFC12345, 0x7F800001, 0xFFA00000] if dtype == torch.float32 else \
        [0x7E01, 0xFE55, 0x7C01, 0xFD00]
    bits = _bits(x)
    for k, r in enumerate(rows.tolist()):
        col = [0, n - 1, n // 2, 777][k % 4]
        p = payloads[k % 4]
        width = 32 if dtype == torch.float32 else 16
        bits[r, col] = p - (1 << width) if p >= 1 << (width - 1) else p  # the signed integer of the same bits
        if k % 3 == 0:
            x[r, (col + 5) % n], x[r, (col + 9) % n] = float("inf"), float("-inf")
    y = torch.empty_like(x)
    if kernel.name == "rms_norm_f16":
        w = torch.randn(n, device="cuda", generator=g).to(dtype)
        args, want = (x, w, y), torch.nn.functional.rms_norm(x.float(), (n,), w.float(), 1e-6)
    else:
        args, want = (x, y), torch.softmax(x, dim=1)
    got = {}
    for variant, exe in exes.items():
        y.fill_(0)
        exe.launch(*args)
        torch.cuda.synchronize()
        got[variant] = y.clone()
    fast = got["fast"].float()
    nan_ok = bool(torch.equal(torch.isnan(fast), torch.isnan(want)))
    ok = ~torch.isnan(want)
    # a NaN in every row leaves no other element: no error to measure there
    err = float(((fast[ok].double() - want[ok].double()).abs() / (want[ok].double().abs() + 1)).max()) \
        if bool(ok.any()) else None
    line = {"case": name, "rows_with_nan": rows_with_nan, "nan_rows_fast": int(torch.isnan(fast).any(dim=1).sum()),
            "nan_pattern_equals_torch": nan_ok, "max_err_vs_torch_non_nan": err,
            "fast_equals_careful_bitwise": _same_bits(got["fast"], got["careful"])}
    line.update(_time(exes, args))
    line["speedup_fast_vs_careful"] = line["careful_us"] / line["fast_us"]
    return line


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated row case names (default: all)")
    args = parser.parse_args(argv)
    import torch
    names = args.only.split(",") if args.only else ROWS
    cases = {c.name: c for c in gpu_zoo.cases()}
    chosen = [cases[n] for n in names]
    built = {c.name: {"fast": build(c.kernel, True), "careful": build(c.kernel, False)} for c in chosen}
    print(json.dumps({"device": torch.cuda.get_device_name(),
                      "precompiled": precompile([e for pair in built.values() for e in pair.values()])}), flush=True)
    for c in chosen:
        try:
            print(json.dumps(row_case(c, built[c.name])), flush=True)
        except Exception as exc:  # noqa: BLE001 (every case reports)
            print(json.dumps({"case": c.name, "error": f"{type(exc).__name__}: {exc}"[:600]}), flush=True)
    for name, case, dtype, count in (("softmax_whole_nan16", "softmax_whole_f32_16384x1024", torch.float32, 16),
                                     ("softmax_whole_nan_every_row", "softmax_whole_f32_16384x1024", torch.float32,
                                      16384),
                                     ("rms_norm_f16_nan16", "rms_norm_f16_16384x1024", torch.float16, 16)):
        if case not in built:
            continue
        try:
            print(json.dumps(nan_case(name, cases[case].kernel, dtype, built[case], count)), flush=True)
        except Exception as exc:  # noqa: BLE001
            print(json.dumps({"case": name, "error": f"{type(exc).__name__}: {exc}"[:600]}), flush=True)
    return 0


if __name__ == "__main__":
    with quiet_third_party_logs():
        sys.exit(main())
