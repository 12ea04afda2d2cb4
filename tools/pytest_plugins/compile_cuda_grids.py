"""pytest plugin: every kernel the suite runs on tilelang-c whose tilelang-cuda program is a grid of threads is
also lowered by TileLang for sm_90a and compiled with this machine's nvcc (no GPU needed), and so is each of its
tiled specialisations (matmuls, segmented folds: against TileLang's own headers); one JSON line per program in
$CUDA_CHECK_LOG (default /tmp/cuda_grid_check.jsonl), "rc" 0 when it compiled.

    PYTHONPATH=tools/pytest_plugins .venv/bin/python -m pytest -p compile_cuda_grids tests/kernels -k tilelang-c
"""
import hashlib
import json
import os
import re
import subprocess
import tempfile

import sys

import intent_trace as intent

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))

_SEEN: set = set()
_COMPILE = intent.compile
_LOG = os.environ.get("CUDA_CHECK_LOG", os.path.join(tempfile.gettempdir(), "cuda_grid_check.jsonl"))
_TYPES = "typedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint;\n"


def _check(kernel, constexprs: dict) -> None:
    from intent_trace.backends.tilelang import cuda_kernels, targets
    from intent_trace.backends.tilelang.target import generate

    try:
        graph = kernel.trace(**constexprs)
        program = generate(graph, "tilelang-cuda")
        tiled = [s.program for s in cuda_kernels.specializations(graph, targets.CUDA)]
    except Exception:  # noqa: BLE001  (the run itself reports it)
        return
    if "T.get_thread_binding()" in program:
        _nvcc(kernel, program, tiled=False)
    for text in tiled:
        _nvcc(kernel, text, tiled=True)


def _nvcc(kernel, program: str, tiled: bool) -> None:
    """Lower ``program`` for sm_90a and assemble it; a tiled program against TileLang's headers (its tile copies,
    ``wgmma``), a grid program without them."""
    if program in _SEEN:
        return
    _SEEN.add(program)
    from backends.tilelang_support import cuda_source  # tests/ is on sys.path (below)

    digest = hashlib.sha256(program.encode()).hexdigest()[:12]
    try:
        source = cuda_source(program)
        flags = []
        if tiled:
            import tilelang

            root = tilelang.__path__[0]
            flags = ["-w", f"-I{root}/src", f"-I{root}/3rdparty/cutlass/include"]
        else:
            source = _TYPES + re.sub(r"#include <tl_templates[^\n]*\n", "", source)
        path = os.path.join(tempfile.gettempdir(), f"cuda_grid_{digest}.cu")
        with open(path, "w") as f:
            f.write(source)
        r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90a", "-cubin", "--fmad=false", *flags, path, "-o",
                            path + ".cubin"], capture_output=True, text=True)
        record = {"kernel": repr(kernel), "program": digest, "rc": r.returncode, "err": r.stderr[-1500:]}
    except Exception as e:  # noqa: BLE001
        record = {"kernel": repr(kernel), "program": digest, "rc": "lower", "err": f"{type(e).__name__}: {e}"[-1500:]}
    with open(_LOG, "a") as f:
        f.write(json.dumps(record) + "\n")


def _compile(kernel, target=None, **options):
    if target == "tilelang-c":
        _check(kernel, {k: v for k, v in options.items() if k != "checks"})
    return _COMPILE(kernel, target=target, **options)


intent.compile = _compile
