"""The GPU zoo: everyday kernels (benchmarks/zoo_kernels.py, the examples) on tilelang-cuda against PyTorch on the
same GPU, each checked against PyTorch first, then timed side by side (CUDA events, median). ``benchmarks/gpu.py``
runs these after its tiled cases; one JSON line per case as it finishes, so a run cut short keeps what it measured.

``ratio`` times one call a timing (the device idle when the start event is recorded, so the host's launch path
before the kernel starts counts: ours through ``exe.launch`` and TileLang's launcher, torch's through its
dispatcher); ``ratio_stream`` times 20 back-to-back calls a timing, per call, where the host's path overlaps the
device's work as in a loop of calls (``tools/launch_overhead.py`` breaks the difference down).

Each case says which program ran (``program``: a specialisation's name, or the general program's launch line,
``T.Kernel(...)``) and ``serial`` when that is one GPU thread. A serial program can take seconds per call at the
zoo's shapes, so it is timed at ``serial_shape`` (stated in the line: its ratio is at that shape, not comparable
with the targets), one timed call after the warm-up one. A case that fails (a dtype the general program refuses,
a mismatch with PyTorch) reports ``ratio: null`` and the error: never a fake number.
"""
from __future__ import annotations

import json
import math
import re
import traceback

import intent_trace as intent

import zoo_kernels as zoo

_LAUNCH = re.compile(r"with (T\.Kernel\(.*\)) as")
SERIAL = "T.Kernel(1, threads=1"


def cuda_time(fn, repeat: int = 20, inner: int = 1) -> float:
    """Median seconds per call over ``repeat`` timings of ``inner`` back-to-back calls, timed with CUDA events after
    a warm-up. With ``inner`` > 1 the host's launch overhead overlaps the device's work, as in a stream of calls."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / inner)
    times.sort()
    return times[len(times) // 2]


def _program(exe, args) -> tuple:
    """(what runs for these arguments, whether it is the one-thread program)."""
    dims = {}
    for p, a in zip(exe.graph.params, args):
        if p.kind == "view":
            dims.update({e: n for e, n in zip(p.type.shape, a.shape) if not isinstance(e, int)})
    spec = exe.specialization_for(dims)
    if spec is not None:
        return spec.name, False
    launch = _LAUNCH.search(exe.program)
    text = launch.group(1) if launch else "?"
    return text, text.startswith(SERIAL)


class Case:
    """One zoo case: ``make(shape)`` -> (args for ``exe.launch``, outputs to compare, ``torch_fn`` returning the
    expected outputs, optionally the function timed for PyTorch when it differs (an in-place update), and
    optionally ``mass()``: the magnitudes errors are measured against, per output, instead of |expected| (a sum's
    sum of |terms|: T5 bounds a sum's error by it, whatever the order)); ``tol`` is the allowed max
    |ours - expected| / (magnitude + 1) (0: exact)."""

    def __init__(self, name, kernel, shape, serial_shape, make, tol, reference, target_ratio):
        self.name, self.kernel, self.shape, self.serial_shape = name, kernel, shape, serial_shape
        self.make, self.tol, self.reference, self.target_ratio = make, tol, reference, target_ratio

    def run(self) -> dict:
        labels = {"case": self.name, "reference": self.reference, "target_ratio": self.target_ratio}
        try:
            return {**labels, **self._measure()}
        except Exception as exc:  # noqa: BLE001 (the zoo reports every failure and goes on)
            return {**labels, "ratio": None, "error": f"{type(exc).__name__}: {exc}"[:600],
                    "where": traceback.format_exc().strip().splitlines()[-3][:300]}

    def _measure(self) -> dict:
        import torch

        exe = intent.compile(self.kernel, target="tilelang-cuda")
        made = self.make(self.shape)
        program, serial = _program(exe, made[0])
        shape = self.shape
        if serial:
            shape = self.serial_shape
            made = self.make(shape)
        args, outputs, torch_fn = made[:3]
        timed = made[3] if len(made) > 3 else torch_fn
        exe.launch(*args)
        torch.cuda.synchronize()
        want = torch_fn()
        mass = made[4]() if len(made) > 4 else tuple(w.double().abs() for w in want)
        err = max(float(((o.double() - w.double()).abs() / (m + 1)).max()) if o.numel() else 0.0
                  for o, w, m in zip(outputs, want, mass))
        if not err <= self.tol:
            raise AssertionError(f"max error {err:.3g} vs torch exceeds {self.tol:.3g}")
        repeat = 1 if serial else 20
        ours, theirs = cuda_time(lambda: exe.launch(*args), repeat), cuda_time(timed, 20)
        line = {"ratio": theirs / ours, "ours_ms": ours * 1e3, "torch_ms": theirs * 1e3, "max_err_vs_torch": err,
                "program": program, "serial": serial, "shape": list(shape)}
        if not serial:  # a stream of calls: the host's launch path overlaps the device's work (tools/launch_overhead)
            ours_s, theirs_s = (cuda_time(lambda: exe.launch(*args), 10, inner=20),
                                cuda_time(timed, 10, inner=20))
            line.update(ratio_stream=theirs_s / ours_s, ours_stream_ms=ours_s * 1e3, torch_stream_ms=theirs_s * 1e3)
        return line


def _rowwise(fn):
    def make(shape):
        import torch

        x = torch.randn(*shape, device="cuda")
        y = torch.empty_like(x)
        return (x, y), (y,), lambda: (fn(x),)
    return make


def _layer_norm(shape):
    import torch

    x = torch.randn(*shape, device="cuda")
    g, b = torch.randn(shape[1], device="cuda"), torch.randn(shape[1], device="cuda")
    y = torch.empty_like(x)
    return (x, g, b, y), (y,), lambda: (torch.nn.functional.layer_norm(x, (shape[1],), g, b, 1e-5),)


def _rms_norm(shape):
    import torch

    x = torch.randn(*shape, device="cuda", dtype=torch.float16)
    w = torch.randn(shape[1], device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    return (x, w, y), (y,), lambda: (torch.nn.functional.rms_norm(x, (shape[1],), w, 1e-6),)


def _reduction(kernel_out, fn, dtype_out="float32"):
    def make(shape):
        import torch

        x = torch.randn(*shape, device="cuda")
        y = torch.empty(kernel_out(shape), device="cuda", dtype=getattr(torch, dtype_out))
        return (x, y), (y,), lambda: (fn(x),)
    return make


def _cumsum(shape):
    """A running sum of 16M terms: compared with float64's, its error measured against the running sum of |x| (T5's
    bound for any order: a blocked scan and torch's own scan both differ from the serial f32 sum)."""
    import torch

    x = torch.randn(*shape, device="cuda")
    y = torch.empty_like(x)
    return ((x, y), (y,), lambda: (torch.cumsum(x.double(), 0),), lambda: torch.cumsum(x, 0),
            lambda: (torch.cumsum(x.double().abs(), 0),))


def _histogram(shape):
    import torch

    v = torch.randint(0, 256, shape, device="cuda", dtype=torch.uint8)
    counts = torch.empty(256, device="cuda", dtype=torch.int64)
    return (v, counts), (counts,), lambda: (torch.bincount(v, minlength=256),)


def _embedding(shape):
    import torch

    vocab, dim, tokens = shape
    table = torch.randn(vocab, dim, device="cuda", dtype=torch.float16)
    ids = torch.randint(0, vocab, (tokens,), device="cuda", dtype=torch.int64)
    out = torch.empty(tokens, dim, device="cuda", dtype=torch.float16)
    return (table, ids, out), (out,), lambda: (torch.nn.functional.embedding(ids, table),)


def _scatter_add(shape):
    import torch

    n, k = shape
    idx = torch.randint(0, n, (k,), device="cuda", dtype=torch.int64)
    v = torch.randint(-8, 8, (k,), device="cuda").float()  # small integers: every order of the sums is exact
    base = torch.randint(-8, 8, (n,), device="cuda").float()
    dest = base.clone()

    theirs = base.clone()
    # checked: base plus the scattered values once (the first launch); timed: the same update in place
    return (idx, v, dest), (dest,), lambda: (base.clone().index_add_(0, idx, v),), \
        lambda: theirs.index_add_(0, idx, v)


def _mamba(shape):
    import torch

    chunks, features = shape
    state = torch.randn(chunks, features, device="cuda")
    decay = torch.rand(chunks, device="cuda")
    initial = torch.randn(features, device="cuda")
    states, final = torch.empty_like(state), torch.empty_like(initial)

    def theirs():  # what a PyTorch user writes: the chunk loop, one fused update per chunk
        h, out = initial.clone(), torch.empty_like(state)
        for c in range(chunks):
            out[c] = h
            h = torch.addcmul(state[c], h, decay[c])
        return out, h
    return (state, decay, initial, states, final), (states, final), theirs


def _linear_attention(shape):
    """Causal linear attention (examples/causal_linear_attention.py) against PyTorch's chunked form (no TF32: T5):
    per chunk of 64 the transition k^T v, their cumulative sum, each chunk's q @ (the states before it) plus its
    masked q k^T v; the errors against the same form on |q|, |k|, |v| (T5's sum of |terms|)."""
    import torch

    batch, length, d = shape
    q, k, v = (torch.randn(batch, length, d, device="cuda") / 4 for _ in range(3))
    out, final = torch.empty_like(q), torch.empty(batch, d, d, device="cuda")

    def chunked(q, k, v, chunk=64):
        torch.backends.cuda.matmul.allow_tf32 = False
        n = length // chunk
        qc, kc, vc = (x.view(batch, n, chunk, d) for x in (q, k, v))
        transitions = kc.transpose(2, 3) @ vc
        states = torch.cumsum(transitions, 1)
        within = torch.tril(qc @ kc.transpose(2, 3)) @ vc
        return (qc @ (states - transitions) + within).view(batch, length, d), states[:, -1]

    def theirs():
        return chunked(q, k, v)

    return (q, k, v, out, final), (out, final), theirs, theirs, lambda: chunked(q.abs(), k.abs(), v.abs())


def _matmul(dtype, batched=False, bias=False):
    def make(shape):
        import torch

        t = getattr(torch, dtype)
        lead = (shape[0],) if batched else ()
        m, k, n = shape[-3:] if batched else shape
        a = torch.randn(*lead, m, k, device="cuda", dtype=t)
        b = torch.randn(*lead, k, n, device="cuda", dtype=t)
        c = torch.empty(*lead, m, n, device="cuda", dtype=t)
        if bias:
            bvec = torch.randn(n, device="cuda", dtype=t)
            return (a, b, bvec, c), (c,), lambda: (torch.relu(torch.addmm(bvec, a, b)),)
        return (a, b, c), (c,), lambda: (torch.matmul(a, b),)
    return make


def cases() -> list:
    import torch

    from causal_linear_attention import linear_attention_batched
    from mamba_state_passing import state_passing  # the examples' kernels (gpu.py puts examples/ on the path)
    from row_softmax import softmax_rows

    f16 = 2.0 ** -9
    return [
        Case("softmax_rows_parallel_f32_16384x1024", softmax_rows, (16384, 1024), (1024, 1024),
             _rowwise(lambda x: torch.softmax(x, dim=1)), 1e-5, "torch.softmax", 0.8),
        Case("softmax_whole_f32_16384x1024", zoo.softmax_whole, (16384, 1024), (256, 1024),
             _rowwise(lambda x: torch.softmax(x, dim=1)), 1e-5, "torch.softmax", 0.8),
        Case("log_softmax_f32_16384x1024", zoo.log_softmax, (16384, 1024), (256, 1024),
             _rowwise(lambda x: torch.log_softmax(x, dim=1)), 1e-5, "torch.log_softmax", 0.8),
        Case("layer_norm_f32_16384x1024", zoo.layer_norm, (16384, 1024), (256, 1024), _layer_norm, 1e-4,
             "torch layer_norm", 0.8),
        Case("rms_norm_f16_16384x1024", zoo.rms_norm_f16, (16384, 1024), (256, 1024), _rms_norm, f16,
             "torch rms_norm", 0.8),
        Case("row_sum_f32_16384x4096", zoo.row_sum, (16384, 4096), (256, 4096),
             _reduction(lambda s: (s[0],), lambda x: x.sum(dim=1)), 1e-3, "torch.sum(dim=1)", 0.8),
        Case("full_sum_f32_16M", zoo.full_sum, (1 << 24,), (1 << 20,),
             _reduction(lambda s: (1,), lambda x: x.sum().reshape(1)), 1e-3, "torch.sum", 0.8),
        Case("argmax_rows_f32_16384x1024", zoo.argmax_rows, (16384, 1024), (256, 1024),
             _reduction(lambda s: (s[0],), lambda x: x.argmax(dim=1), "int64"), 0.0, "torch.argmax", 0.8),
        Case("cumsum_f32_16M", zoo.cumsum, (1 << 24,), (1 << 20,),
             _cumsum, 1e-5, "torch.cumsum", 0.8),
        Case("gelu_erf_f32_16M", zoo.gelu, (1 << 24,), (1 << 20,),
             _rowwise(lambda x: torch.nn.functional.gelu(x)), 1e-6, "torch gelu", 0.8),
        Case("histogram_u8_16M_256", zoo.histogram256, (1 << 24,), (1 << 20,), _histogram, 0.0, "torch.bincount",
             0.5),
        Case("embedding_f16_32000x4096_8192", zoo.embedding_f16, (32000, 4096, 8192), (32000, 4096, 256),
             _embedding, 0.0, "torch embedding", 0.8),
        Case("scatter_add_f32_1M_16M", zoo.scatter_add, (1 << 20, 1 << 24), (1 << 20, 1 << 20), _scatter_add, 0.0,
             "torch.index_add_", 0.5),
        Case("matmul_f16_4000", zoo.matmul_f16, (4000, 4000, 4000), (64, 64, 64), _matmul("float16"), 1e-2,
             "torch.matmul", 0.8),
        Case("matmul_f16_1000", zoo.matmul_f16, (1000, 1000, 1000), (64, 64, 64), _matmul("float16"), 1e-2,
             "torch.matmul", 0.8),
        Case("batched_matmul_f16_16x1024", zoo.batched_matmul_f16, (16, 1024, 1024, 1024), (2, 64, 64, 64),
             _matmul("float16", batched=True), 1e-2, "torch.matmul (batched)", 0.8),
        Case("matmul_bias_relu_f16_4096", zoo.matmul_bias_relu_f16, (4096, 4096, 4096), (64, 64, 64),
             _matmul("float16", bias=True), 1e-2, "torch addmm + relu", 0.9),
        Case("mamba_state_passing_f32_1024x65536", state_passing, (1024, 65536), (64, 4096), _mamba, 1e-5,
             "torch chunk loop (addcmul per chunk)", None),
        Case("causal_linear_attention_f32_bh32_l4096_d64", linear_attention_batched, (32, 4096, 64), (1, 512, 64),
             _linear_attention, 1e-4, "torch chunked form (bmm, cumsum, tril; no TF32)", None),
    ]


def run(emit=print) -> dict:
    """Every zoo case, one JSON line each through ``emit``; returns {case: line} for the combined line."""
    results = {}
    for case in cases():
        line = case.run()
        emit(json.dumps(line, default=lambda v: None if isinstance(v, float) and math.isnan(v) else str(v)))
        results[case.name] = line
    return results
