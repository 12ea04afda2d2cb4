"""The local nvcc's view of a tilelang-cuda program (no GPU needed): its PTX per kernel and ptxas' register counts,
for tests that check what the machine code does with a mapping (loads in flight, registers per thread). ``None``
where this machine has no nvcc (the program text is then checked alone)."""
import re
import shutil
import subprocess

import attrs


@attrs.frozen
class Assembled:
    ptx: dict  # kernel name -> its PTX body
    registers: dict  # kernel name -> registers a thread
    spills: dict = attrs.field(factory=dict)  # kernel name -> (bytes of spill stores, of spill loads)


def nvcc_flags(std: str = "c++17") -> list:
    """nvcc's flags for TileLang's CUDA source on sm_90a: the target's numerics (no FMA contraction), TileLang's and
    CUTLASS's headers."""
    import tilelang

    root = tilelang.__path__[0]
    return [f"-std={std}", "-arch=sm_90a", "--fmad=false", "-w", f"-I{root}/src", f"-I{root}/3rdparty/cutlass/include"]


def assemble(source: str, directory, std: str = "c++17", ptx: bool = True) -> Assembled | None:
    """PTX and ptxas' report of CUDA ``source`` (TileLang's, for sm_90a, with the target's numerics flags), in the
    C++ dialect ``std``; without ``ptx`` the report alone (``Assembled.ptx`` empty). One nvcc run either way."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    path = directory / "program.cu"
    path.write_text(source)
    keep = directory / "keep"  # with ``ptx`` the one run keeps its PTX (a second nvcc -ptx run repeated the front end)
    kept = []
    if ptx:
        keep.mkdir(exist_ok=True)
        kept = ["-keep", f"--keep-dir={keep}"]
    command = [nvcc, *nvcc_flags(std), *kept, "-cubin", "-Xptxas", "-v", str(path), "-o", str(path) + ".cubin"]
    r = subprocess.run(command, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    registers = {k: int(v) for k, v in re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", r.stderr,
                                                  re.S)}
    spills = {k: (int(s), int(v)) for k, s, v in re.findall(
        r"Compiling entry function '(\w+)'.*?(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr, re.S)}
    bodies = {}
    if ptx:
        (text,) = [f.read_text() for f in keep.glob("*.ptx")]
        bodies = dict(re.findall(r"\.entry (\w+)\((.*?)\n}\n", text, re.S))
    return Assembled(bodies, registers, spills)


def longest_load_run(ptx: str, load: str = "ld.global") -> int:
    """The most global loads the PTX issues with no branch between them (what a thread has in flight at once)."""
    best = run = 0
    for line in ptx.splitlines():
        if load in line:
            run += 1
            best = max(best, run)
        elif re.search(r"\bbra(\.uni)?\b|^\$L", line.strip()):
            run = 0
    return best
