"""The row-kernel lab's timings on the GPU (``tools/rowlab/make.py`` says what and how): each cubin in ``out/``
launched through the driver API (ctypes), 20 back-to-back launches a timing, median of 30, torch's kernel timed
beside it in the same process (benchmarks/gpu_zoo.py's CUDA-event timing); the largest difference from torch's
result. Needs torch with CUDA and the checkout on the path (run from its root)."""
import ctypes
import glob
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "benchmarks")]

from gpu_zoo import cuda_time  # noqa: E402
M, N = 16384, 1024
DRIVER = ctypes.CDLL("libcuda.so.1")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what}: CUDA error {status}")


def load(path: str) -> ctypes.c_void_p:
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    _check(DRIVER.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(open(path, "rb").read())), "load " + path)
    _check(DRIVER.cuModuleGetFunction(ctypes.byref(function), module, b"kernel_kernel"), "function")
    return function


def launcher(function, blocks: int, args: list):
    values = [ctypes.c_void_p(a.data_ptr()) if isinstance(a, torch.Tensor) else ctypes.c_int64(a) for a in args]
    pointers = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def launch():
        _check(DRIVER.cuLaunchKernel(function, blocks, 1, 1, 256, 1, 1, 16384, stream, pointers, None), "launch")
    launch.keep = (values, pointers)
    return launch


def median_us(fn) -> float:
    """Microseconds a launch: the median of 30 timings of 20 back-to-back launches."""
    return cuda_time(fn, repeat=30, inner=20) * 1e6


def main() -> None:
    torch.zeros(1, device="cuda")
    torch.manual_seed(0)
    x = torch.randn(M, N, device="cuda")
    xh, wh = torch.randn(M, N, device="cuda").half(), torch.randn(N, device="cuda").half()
    cases = {  # name: (its arguments given the output, a new output, torch's kernel)
        "softmax_whole": (lambda y: [x, y, M, N], lambda: torch.empty(M, N, device="cuda"),
                          lambda: torch.softmax(x, 1)),
        "rms": (lambda y: [xh.view(torch.int16), wh.view(torch.int16), y.view(torch.int16), M, N],
                lambda: torch.empty(M, N, device="cuda", dtype=torch.half),
                lambda: torch.nn.functional.rms_norm(xh, (N,), wh, 1e-6)),
    }
    print(json.dumps({"device": torch.cuda.get_device_name(), "shape": [M, N]}), flush=True)
    for name, (args, output, reference) in cases.items():
        want, torch_us = reference(), median_us(reference)
        for path in sorted(glob.glob(os.path.join(HERE, "out", f"{name}.*.cubin"))):
            y = output()
            launch = launcher(load(path), (M + 7) // 8, args(y))
            launch()
            torch.cuda.synchronize()
            us = median_us(launch)
            print(json.dumps({"kernel": name, "variant": os.path.basename(path).split(".")[1], "us": round(us, 2),
                              "torch_us": round(torch_us, 2), "ratio": round(torch_us / us, 3),
                              "max_err": (y.float() - want.float()).abs().max().item()}), flush=True)
        print(json.dumps({"kernel": name, "torch_again_us": round(median_us(reference), 2)}), flush=True)
    for tool in ("cuobjdump", "nvdisasm", "ncu"):
        print(json.dumps({"tool": tool, "path": shutil.which(tool)}))


if __name__ == "__main__":
    main()
