"""A/B of the tensor-core matmul's fused epilogue (run on the GPU machine): matmul + bias + ReLU at 4096^3 f16 as
tilelang-cuda writes it, against variants of the same program text and the plain matmul, each checked against
torch and timed beside ``torch.relu(torch.addmm(...))`` in one process. One JSON line per program.

- ``rolled``: the program (cuda_matmul._tile_loop: a rolled loop over the staged tile, 8 columns a thread a pass);
- ``unrolled_rows``: the same loop with its 16 passes written out (the same instructions, 16 times the code: slower
  by about what the fully unrolled epilogue cost if that cost was the instruction fetch);
- ``unpadded``: the staged accumulator tile's rows not padded (8-way bank conflicts on the fragment's stores);
- ``plain``: the matmul without the epilogue (what the epilogue adds to);
- ``shared_helpers``: the program with the shared helpers' max (early returns) and the cast and encode as two
  roundings (before cuda_epilogue_helpers).

    python3 tools/epilogue_ab.py
"""
import concurrent.futures
import json
import multiprocessing
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tools"), str(ROOT)]

from gpu import cuda_time, matmul_f16  # noqa: E402
from matmul_sweep import compile_error  # noqa: E402
from zoo_kernels import matmul_bias_relu_f16  # noqa: E402

from intent_trace.backends.tilelang import cuda_epilogue_helpers as H  # noqa: E402
from intent_trace.backends.tilelang import cuda_matmul as CM  # noqa: E402
from intent_trace.backends.tilelang.cuda_epilogue import renamed  # noqa: E402
from intent_trace.backends.tilelang.target import compile_program  # noqa: E402
from intent_trace.backends.tilelang.targets import CUDA  # noqa: E402

N = 4096


def _unrolled(program: str) -> str:
    """``program`` with its loop over the tile's passes written out pass by pass (nvcc keeps a ``#pragma unroll`` of
    that loop rolled: its body is too large)."""
    lines = program.splitlines()
    head = next(k for k, line in enumerate(lines) if line.strip().startswith("for ir in T.serial("))
    indent = len(lines[head]) - len(lines[head].lstrip())
    end = next(k for k in range(head + 1, len(lines)) if len(lines[k]) - len(lines[k].lstrip()) <= indent)
    passes = int(lines[head].strip()[len("for ir in T.serial("):-2])
    body = [line[4:] for line in lines[head + 1:end]]
    written = [renamed(line, {"ir": str(k)}) for k in range(passes) for line in body]
    return "\n".join([*lines[:head], *written, *lines[end:]]) + "\n"


def _shared_helpers() -> str:
    """The fused program as the shared helpers write it (no epilogue bodies of its own, the cast not taken over)."""
    own = (H.epilogue_target, H.rounded_store)
    H.epilogue_target, H.rounded_store = (lambda target: target), (lambda *args: None)
    try:
        return CM.tensor_core(matmul_bias_relu_f16.trace(), CUDA).program
    finally:
        H.epilogue_target, H.rounded_store = own


def variants(names=None) -> dict:
    """{name: program text} of the variants (all, or those ``names`` lists)."""
    fused = CM.tensor_core(matmul_bias_relu_f16.trace(), CUDA).program
    out = {"rolled": fused, "unrolled_rows": _unrolled(fused),
           "unpadded": fused.replace("C_a = T.alloc_shared((128, 264), 'float32')",
                                     "C_a = T.alloc_shared((128, 256), 'float32')"),
           "shared_helpers": _shared_helpers(), "plain": CM.tensor_core(matmul_f16.trace(), CUDA).program}
    assert len(set(out.values())) == len(out), "a variant's substitution found nothing to replace"
    return {k: v for k, v in out.items() if names is None or k in names}


def main() -> None:
    texts = variants()
    with concurrent.futures.ProcessPoolExecutor(len(texts), mp_context=multiprocessing.get_context("spawn")) as pool:
        errors = dict(zip(texts, pool.map(compile_error, texts.values())))
    measure(texts, errors)


def measure(texts: dict, errors: dict) -> None:
    """Each variant against torch (addmm + relu; torch.matmul for ``plain``): one JSON line each."""
    import torch

    a = torch.randn(N, N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float16)
    c = torch.empty(N, N, device="cuda", dtype=torch.float16)
    fused_ref, plain_ref = torch.relu(torch.addmm(bias, a, b)), torch.matmul(a, b)
    torch_fused = cuda_time(lambda: torch.relu(torch.addmm(bias, a, b)))
    torch_plain = cuda_time(lambda: torch.matmul(a, b, out=plain_ref))
    for name, program in texts.items():
        line = {"n": N, "variant": name}
        if errors[name]:
            print(json.dumps({**line, "error": errors[name]}), flush=True)
            continue
        kern = compile_program(program, "tilelang-cuda")
        args = (a, b, c) if name == "plain" else (a, b, bias.view(torch.uint16), c)  # the bias as its bits
        ref, theirs = (plain_ref, torch_plain) if name == "plain" else (fused_ref, torch_fused)
        kern(*args)
        err = float((c.float() - ref.float()).abs().max() / ref.float().abs().max())
        ms = cuda_time(lambda: kern(*args)) * 1e3
        print(json.dumps({**line, "ms": ms, "torch_ms": theirs * 1e3, "ratio": theirs * 1e3 / ms,
                          "reference": "torch.matmul" if name == "plain" else "torch addmm + relu",
                          "max_rel_err_vs_torch": err}), flush=True)


if __name__ == "__main__":
    main()
