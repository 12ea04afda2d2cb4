"""The row-kernel lab (issue 17): what each piece of the generated row programs' per-element code costs on a GPU.

Run here (no GPU; nvcc on the PATH), then carry ``tools/rowlab/out`` to the GPU machine and run ``run.py`` there::

    python tools/rowlab/make.py          # tools/rowlab/out/{softmax_whole,rms}.VARIANT.cubin
    python3 tools/rowlab/run.py          # on the GPU (torch only): one JSON line a cubin, torch timed beside

It lowers the zoo's whole-tensor softmax (f32) and RMSNorm (f16) for tilelang-cuda without checks, takes TileLang's
CUDA source for sm_90a and compiles hand edits of it (text substitutions on the helper bodies, the launch bound),
plus two hand-written warp-per-row kernels (``hand_*.cu``, N = 1024 only: a measurement, not a program the project
emits) built on the same helper bodies, with element (VEC 1) or 16-byte (VEC 4/8) accesses and with the careful or
the bare (FAST=1) arithmetic. Variants: ``base`` (the generated program), ``nonan`` (the binary ops' and exp's x86-NaN
decision removed: the IEEE op alone), ``nonanall`` (also max as ``fmaxf`` and the f16 conversions without their NaN
cases), ``nanbr`` (the decision behind a branch to a non-inlined function), ``recip`` (division as a reciprocal
multiply: not T3's rounding, a bound on what the division costs), ``fastexp`` (``__expf``: likewise), ``lb2``/``lb3``
(2 or 3 blocks an SM), ``all_fast``. Only ``base`` is a program the project may run; the others bound what a
change could buy. First results (2026-12-07, H100): ``docs/gpu-rowlab-2026-12-07-h100-session9.jsonl``.
"""
import pathlib
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks"), str(ROOT)]


def nan_branch(s):
    pat = re.compile(r"__device__ __forceinline__ float (it_\w+_f32)\(float a, float b\) \{ "
                     r"float r = (it_\w+_ieee)\(a, b\); (uint32_t q = .*?) "
                     r"return r == r \? r : (itb_f32\(q \| 0x00400000u\)); \}")

    def binary(m):
        n, ieee, q, ret = m.groups()
        return (f"static __device__ __noinline__ float {n}_slow(float a, float b) {{ {q} return {ret}; }}\n"
                f"__device__ __forceinline__ float {n}(float a, float b) {{ float r = {ieee}(a, b); "
                f"if (__builtin_expect(r != r, 0)) r = {n}_slow(a, b); return r; }}")
    unary_pat = re.compile(r"__device__ __forceinline__ float (it_\w+_f32)\(float a\) \{ float r = (\w+)\(a\); "
                           r"if \(r != r\) (r = .*?;) return r; \}")

    def unary(m):
        n, f, fix = m.groups()
        return (f"static __device__ __noinline__ float {n}_slow(float a, float r) {{ {fix} return r; }}\n"
                f"__device__ __forceinline__ float {n}(float a) {{ float r = {f}(a); "
                f"if (__builtin_expect(r != r, 0)) r = {n}_slow(a, r); return r; }}")
    return unary_pat.sub(unary, pat.sub(binary, s))


def nonan(s):
    s = re.sub(r"return r == r \? r : itb_f32\(q \| 0x00400000u\); \}", "return r; }", s)
    return re.sub(r"if \(r != r\) r = .*?; return r; \}", "return r; }", s)


def nonan_all(s):
    careful = ("return a != a ? itb_f32((itb_bits32(a) & 0x80000000u) | 0x7fc00000u | (itb_bits32(a) & "
               "0x003fe000u)) : __half2float(__float2half_rn(a));")
    s = nonan(s).replace(careful, "return __half2float(__float2half_rn(a));")
    s = re.sub(r"uint16_t it_encode_f16\(float a\) \{ return .*? : (__half_as_ushort\(__float2half_rn\(a\)\)); \}",
               r"uint16_t it_encode_f16(float a) { return \1; }", s)
    s = re.sub(r"float it_decode_f16\(uint16_t a\) \{ return .*? : (__half2float\(__ushort_as_half\(a\)\)); \}",
               r"float it_decode_f16(uint16_t a) { return \1; }", s)
    return re.sub(r"float it_max_f32\(float a, float b\) \{.*?\}\n",
                  "float it_max_f32(float a, float b) { return fmaxf(a, b); }\n", s)


def recip(s):
    return s.replace("{ return a / b; }", "{ return a * __frcp_rn(b); }")


def fastexp(s):
    return s.replace("float r = expf(a);", "float r = __expf(a);")


def bound(n):
    return lambda s: s.replace("__launch_bounds__(256, 4)", f"__launch_bounds__(256, {n})")


VARIANTS = {"base": [], "nanbr": [nan_branch], "nonan": [nonan], "nonanall": [nonan_all], "recip": [recip],
            "fastexp": [fastexp], "lb2": [bound(2)], "lb3": [bound(3)], "nanbr_lb3": [nan_branch, bound(3)],
            "all_fast": [nonan_all, recip, fastexp]}
#: hand kernels: (file, the generated source whose helper bodies it uses, {variant: -D flags})
HAND = {"softmax_whole": ("hand_softmax.cu", {"hand_v1_f0": "-DVEC=1 -DFAST=0", "hand_v1_f1": "-DVEC=1 -DFAST=1",
                                              "hand_v4_f0": "-DVEC=4 -DFAST=0", "hand_v4_f1": "-DVEC=4 -DFAST=1",
                                              "hand_v4_mk": "-DVEC=4 -DFAST=0 -DMARK=1"}),
        "rms": ("hand_rms.cu", {"hand_v1_f0": "-DVEC=1 -DFAST=0", "hand_v1_f1": "-DVEC=1 -DFAST=1",
                                "hand_v8_f0": "-DVEC=8 -DFAST=0", "hand_v8_f1": "-DVEC=8 -DFAST=1"})}


def generated() -> dict:
    """{name: TileLang's CUDA source of the zoo kernel, sm_90a, no checks}."""
    import zoo_kernels as zoo
    from backends.tilelang_support import cuda_source
    from intent_trace.backends.tilelang.target import generate
    return {name: cuda_source(generate(k.trace(), "tilelang-cuda", checks=False))
            for name, k in (("softmax_whole", zoo.softmax_whole), ("rms", zoo.rms_norm_f16))}


def compile_cubin(source: str, path: pathlib.Path, flags: str = "") -> str:
    from backends.cuda_ptx import nvcc_flags
    path.with_suffix(".cu").write_text(source)
    r = subprocess.run(["nvcc", *nvcc_flags(), *flags.split(), "-cubin", "-Xptxas", "-v", str(path.with_suffix(".cu")),
                        "-o", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return " ".join(re.findall(r"Used \d+ registers|\d+ bytes spill stores", r.stderr))


def main() -> None:
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    for name, src in generated().items():
        for variant, edits in VARIANTS.items():
            s = src
            for edit in edits:
                s = edit(s)
            if variant == "base" or s != src:
                print(name, variant, compile_cubin(s, out / f"{name}.{variant}.cubin"))
        prelude = src[:src.index("#if defined(_MSC_VER)")]  # the generated helper bodies
        file, flags = HAND[name]
        for variant, f in flags.items():
            print(name, variant, compile_cubin(prelude + (HERE / file).read_text(), out / f"{name}.{variant}.cubin", f))


if __name__ == "__main__":
    main()
