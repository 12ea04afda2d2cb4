"""tilelang-cuda's program text, checked on any machine (no GPU needed): which graphs get a parallel
mapping or a tiled specialisation, and that the flags forbid contraction and fast math."""
from __future__ import annotations

import intent_trace as intent
from intent_trace import I
from intent_trace.backends.tilelang import cuda, cuda_kernels
from intent_trace.backends.tilelang.target import generate


@intent.kernel
def chain4(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    a = x[d]
    out[d] = I.maximum(a * 1.5 + y[d], a) - 0.25


@intent.kernel
def scale2d(x: I.In[I.f16, ("M", "N")], out: I.Out[I.f32, ("M", "N")], s: I.f32):
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    out[m, n] = I.cast(x[m, n], I.f32) * s


@intent.kernel
def rowsum(x: I.In[I.f32, ("M", "N")], out: I.Out[I.f32, ("M",)]):
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    out[m] = I.reduce.sum(x[m, n], axis=1)


@intent.kernel
def in_place(x: I.InOut[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    x[d] = x[d] * 2.0


@intent.kernel
def partial(x: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(1, x.shape[0])
    out[d] = x[d]


def test_flat_nest_maps_a_pointwise_write_onto_a_grid():
    assert cuda_kernels.flat_nest(chain4.trace()) == cuda_kernels.FlatNest(("d0",))
    assert cuda_kernels.flat_nest(scale2d.trace()).shape == ("d0", "d1")
    program = generate(chain4.trace(), "tilelang-cuda")
    assert "T.max(T.ceildiv(d0, 1024), 1), threads=128" in program and "T.get_thread_binding()" in program
    assert "T.serial(d0)" not in program


def test_flat_nest_leaves_other_graphs_to_the_general_program():
    for k in (rowsum, in_place, partial):
        assert cuda_kernels.flat_nest(k.trace()) is None, k.name
        assert "T.Kernel(1, threads=1" in generate(k.trace(), "tilelang-cuda")


def test_unsigned_64_bit_scalars_travel_as_signed_words_on_cuda():
    # TVM's CUDA launcher packs no uint64 scalar argument (seen on an H200): the bits travel as int64
    assert cuda.scalar_storage(I.u64) == "int64" and cuda.scalar_storage(I.u32) == "int32"
    assert cuda.scalar_storage(I.i64) is None


def test_tilelang_c_keeps_its_serial_program():
    assert "with T.Kernel(1" in generate(chain4.trace(), "tilelang-c")


def test_cuda_flags_forbid_contraction_and_fast_math():
    flags = cuda.PASS_CONFIGS["tl.device_compile_flags"]
    assert "--fmad=false" in flags and cuda.PASS_CONFIGS["tl.enable_fast_math"] is False
    assert not any("fast" in f for f in flags)


def test_matmul_specialisation_only_for_half_precision_operands():
    @intent.kernel
    def mm32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
        c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)

    @intent.kernel
    def mm16(a: I.In[I.bf16, ("M", "K")], b: I.In[I.bf16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
        c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)

    assert cuda_kernels.specializations(mm32.trace()) == []  # f32 operands on tensor cores would be TF32
    (spec,) = cuda_kernels.specializations(mm16.trace())
    assert "T.gemm(A_s, B_s, C_f)" in spec.program and "'bfloat16'" in spec.program
    assert spec.applies({0: 256, 1: 128, 2: 512}) and not spec.applies({0: 100, 1: 128, 2: 512})
