"""Instruction counts of a tilelang-cuda program's SASS, here, without a GPU: TileLang's CUDA source for sm_90a,
compiled by the local nvcc (``tools/rowlab/make.py``'s flags), disassembled by ``nvdisasm`` (the CUDA toolkit's, or
the ``nvidia-cuda-nvdisasm`` wheel's: ``pip download nvidia-cuda-nvdisasm`` and unzip it; ``NVDISASM`` names the
binary). It answers "how many instructions does this change take out" before any GPU time is spent (tenth session:
the flushing ``ex2.approx`` took 200 a 128-key block out of the fma attention, 4736 -> 4336 in the whole kernel,
and the GPU then measured no change: a count says what an edit removes, not what bounds the kernel).

    python tools/sass_count.py attention fma:128,128,128,1,256 causal_fast:128,128,128,1,256/pingpong
    python tools/sass_count.py zoo softmax_whole rms_norm_f16

Prints one JSON line a program: registers, spill stores, total instructions and the float opcodes' counts."""
import collections
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tools" / "rowlab"), str(ROOT / "tests"), str(ROOT / "benchmarks"),
                str(ROOT)]

OPCODES = ("MUFU", "FFMA", "FMUL", "FADD", "FMNMX", "FSETP", "FSEL", "F2FP", "HGMMA", "SHFL", "BRA")


def program(kind: str, name: str) -> str:
    if kind == "attention":
        import attention_sweep
        return attention_sweep._program(name)[0]
    import zoo_kernels
    from intent_trace.backends.tilelang.target import generate
    return generate(getattr(zoo_kernels, name).trace(), "tilelang-cuda", checks=False)


def counts(text: str) -> dict:
    from backends.tilelang_support import cuda_source
    from make import compile_cubin
    nvdisasm = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if nvdisasm is None:
        raise SystemExit("no nvdisasm: set NVDISASM (see the module docstring)")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = pathlib.Path(tmp) / "k.cubin"
        info = compile_cubin(cuda_source(text), cubin)
        sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass, re.M)
    c = collections.Counter(ops)
    registers = re.search(r"Used (\d+) registers", info)
    spills = re.search(r"(\d+) bytes spill stores", info)
    return {"registers": int(registers.group(1)) if registers else None,
            "spill_stores": int(spills.group(1)) if spills else None,
            "instructions": len(ops), **{k: c[k] for k in OPCODES}}


def main() -> None:
    kind, *names = sys.argv[1:]
    assert kind in ("attention", "zoo"), "first argument: attention or zoo"
    for name in names:
        print(json.dumps({"program": f"{kind}:{name}", **counts(program(kind, name))}), flush=True)


if __name__ == "__main__":
    main()
