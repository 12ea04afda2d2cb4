"""tilelang-cuda's program text, checked on any machine (no GPU needed): which graphs get a parallel
mapping or a tiled specialisation, and that the flags forbid contraction and fast math; and the batched f16
attention example on the CPU targets, against NumPy (the numerics its tiled program must share)."""
from __future__ import annotations

import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.backends.tilelang import cuda, cuda_kernels, targets
from intent_trace.backends.tilelang.target import generate


@intent.kernel
def chain4(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    a = x[d]
    out[d] = I.maximum(a * 1.5 + y[d], a) - 0.25


@intent.kernel
def matmul_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


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


def test_flat_nest_takes_a_reduction_in_the_element_code_one_element_per_thread():
    nest = cuda_kernels.flat_nest(rowsum.trace())
    assert nest.shape == ("d0",) and nest.vector == 1 and not nest.unroll
    assert cuda_kernels.flat_nest(chain4.trace()).vector == cuda_kernels.VECTOR


def test_flat_nest_leaves_other_graphs_to_the_general_program():
    for k in (in_place, partial):
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


def test_while_loops_are_assembled_at_ptxas_o1_and_nothing_else_is():
    # ptxas -O2+ miscompiled this while loop on an H200 (sm_90a): from start = 5 the kernel stored 0
    @intent.kernel
    def countdown(y: I.Out[I.i32, (1,)], start: I.i32):
        y[0] = I.while_(lambda c: c < 0, lambda c: c - 1, start)

    flags = cuda.pass_configs(generate(countdown.trace(), "tilelang-cuda"))["tl.device_compile_flags"]
    assert flags[-2:] == ["-Xptxas", "-O1"] and "--fmad=false" in flags
    assert cuda.pass_configs(generate(chain4.trace(), "tilelang-cuda")) is cuda.PASS_CONFIGS


def test_whole_view_slices_count_as_full_domains():
    @intent.kernel
    def mm(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)

    @intent.kernel
    def mm32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)

    @intent.kernel
    def scale_all(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
        y[:, :] = x[:, :] * 2.0

    @intent.kernel
    def first_row(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("N",)]):
        y[:] = x[0, :]  # a point entry: not a whole axis

    assert [s.name for s in cuda_kernels.specializations(mm.trace(), targets.CUDA)] == ["matmul"]
    assert all("T.gemm" not in s.program for s in cuda_kernels.specializations(mm32.trace(), targets.CUDA))  # never TF32
    assert cuda_kernels.flat_nest(scale_all.trace()).shape == ("d0", "d1")
    assert "T.get_thread_binding()" in generate(scale_all.trace(), "tilelang-cuda")
    assert cuda_kernels.flat_nest(first_row.trace()) is None


def test_a_planned_nest_the_program_does_not_have_keeps_the_serial_program(monkeypatch):
    # the launch would be a grid whose every thread runs the whole nest: the pre-pass keeps the serial launch
    monkeypatch.setitem(targets.TARGETS, "tilelang-cuda",
                        attrs.evolve(targets.CUDA, flat_nest=lambda g: cuda_kernels.FlatNest(("d9",))))
    program = generate(chain4.trace(), "tilelang-cuda")
    assert "T.get_thread_binding()" not in program and "threads=1" in program


def test_matmul_tensor_cores_only_for_half_precision_operands():
    @intent.kernel
    def mm16(a: I.In[I.bf16, ("M", "K")], b: I.In[I.bf16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
        c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)

    (spec32,) = cuda_kernels.specializations(matmul_f32.trace(), targets.CUDA)  # f32 operands on tensor cores would be TF32
    assert "T.gemm" not in spec32.program
    (spec,) = cuda_kernels.specializations(mm16.trace(), targets.CUDA)
    assert "T.gemm(A_s, B_s, C_f," in spec.program and "'bfloat16'" in spec.program
    # any M; N and K in whole 16-byte rows (the tile copies mask the tails)
    assert spec.applies({0: 256, 1: 128, 2: 512}) and spec.applies({0: 100, 1: 136, 2: 520})
    assert not spec.applies({0: 256, 1: 130, 2: 512}) and not spec.applies({0: 256, 1: 128, 2: 4})
    assert not spec.applies({0: 0, 1: 128, 2: 512})
    # an f32 tile (128 KiB) does not fit in shared memory beside three stages of operands: it leaves from registers
    assert "C_s" not in spec.program and "T.copy(C_f, C[" in spec.program


def test_batched_half_matmul_gets_the_tensor_core_program_over_a_grid_of_batch_entries():
    @intent.kernel
    def bmm(a: I.In[I.f16, ("B", "M", "K")], b: I.In[I.f16, ("B", "K", "N")], c: I.Out[I.f16, ("B", "M", "N")]):
        c[:, :, :] = I.cast(I.contract(a[:, :, :], b[:, :, :], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.f32),
                            I.f16)

    @intent.kernel
    def bmm32(a: I.In[I.f32, ("B", "M", "K")], b: I.In[I.f32, ("B", "K", "N")], c: I.Out[I.f32, ("B", "M", "N")]):
        c[:, :, :] = I.contract(a[:, :, :], b[:, :, :], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.f32)

    @intent.kernel
    def bmm_t(a: I.In[I.f16, ("B", "K", "M")], b: I.In[I.f16, ("B", "K", "N")], c: I.Out[I.f16, ("B", "M", "N")]):
        c[:, :, :] = I.cast(I.contract(a[:, :, :], b[:, :, :], reduce=((1, 1),), batch=((0, 0),), acc_dtype=I.f32),
                            I.f16)  # A transposed: not this program (yet)

    (spec,) = cuda_kernels.specializations(bmm.trace(), targets.CUDA)
    assert spec.name == "batched_matmul" and "as (bx, by, bz)" in spec.program
    assert "T.copy(A[bz, by * 128, ko * 64], A_s)" in spec.program and "C[bz, by * 128, bx * 256]" in spec.program
    extents = {0: 3, 1: 100, 2: 72, 3: 264}  # B, M, K, N
    assert spec.applies(extents) and not spec.applies({**extents, 0: 0}) and not spec.applies({**extents, 2: 70})
    assert not spec.applies({0: 2**12, 1: 2**10, 2: 2**10, 3: 8})  # 2**32 elements of A: int32 tile indices
    assert cuda_kernels.specializations(bmm32.trace(), targets.CUDA) == []  # no TF32, and the f32 program is not batched
    assert cuda_kernels.specializations(bmm_t.trace(), targets.CUDA) == []


def test_f32_matmul_gets_the_cuda_core_program_and_keeps_its_nan_check():
    from backends.tilelang_support import cuda_source

    (spec,) = cuda_kernels.specializations(matmul_f32.trace(), targets.CUDA)
    # any extents: the tile loads read zeros past M, N and K, only elements inside C are stored
    assert "T.gemm" not in spec.program and spec.applies({0: 256, 1: 16, 2: 128}) and spec.applies(
        {0: 255, 1: 12, 2: 129}) and not spec.applies({0: 256, 1: 0, 2: 128})
    source = cuda_source(spec.program)
    assert "itc_is_nan(acc[" in source and "it_add_f32(s[0], it_mul_f32(" in source  # not simplified away
    assert "fmaf(a[" in source  # one fused multiply-add a product (T10)
    assert "wgmma" not in source and "mma" not in source.replace("#pragma", "")


def test_matmul_specialisation_stages_a_half_precision_tile_in_shared_memory():
    from backends.tilelang_support import cuda_source

    @intent.kernel
    def mm(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
        m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
        c[m, n] = I.cast(I.matmul(a[m, k], b[k, n], acc_dtype=I.f32), I.f16)

    (spec,) = cuda_kernels.specializations(mm.trace(), targets.CUDA)
    assert "C_s = T.alloc_shared((128, 256), 'float16')" in spec.program
    assert "T.copy(C_f, C_s)" in spec.program and "policy=T.GemmWarpPolicy.FullRow" in spec.program
    source = cuda_source(spec.program)
    assert "tma_store" in source and "wgmma" in source  # the tile leaves in whole rows; warpgroup MMAs


# --- flash attention (examples/flash_attention.py) -------------------------------------------------------------

def _example(name: str):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_cuda_lowering_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FA = _example("flash_attention")


def _batched_attention(summarize, combine):
    """``attention_f16`` with another summarize or combine."""
    @intent.kernel
    def attention_variant(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")],
                          v: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f16, ("B", "L", "D")], scale: I.f32):
        for b in I.parallel(I.domain(0, q.shape[0])):
            queries = q[b, :, :]
            L, D = queries.shape
            identity = (I.full((L,), FA.NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
            m, l, acc = I.region_fold(source=(k[b, :, :], v[b, :, :]), axis=0, summarize=summarize, combine=combine,
                                      identity=identity, operands=(queries, scale))
            out[b, :, :] = I.cast(acc / FA.rows(l, acc), I.f16)

    return attention_variant


@intent.fn
def summarize_pv_in_f32(k, v, q, scale):
    """P stays f32 in the PV contract (on tensor cores that would be TF32)."""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale
    m = I.reduce.max(s, axis=1)
    p = I.exp(s - FA.rows(m, s))
    return m, I.reduce.sum(p, axis=1), I.matmul(p, I.cast(v, I.f32), acc_dtype=I.f32)


@intent.fn
def combine_unguarded(a, b):
    """No select for an empty summary: exp(-inf - -inf) is NaN."""
    ma, la, acc_a = a
    mb, lb, acc_b = b
    m = I.maximum(ma, mb)
    alpha, beta = I.exp(ma - m), I.exp(mb - m)
    return m, la * alpha + lb * beta, acc_a * FA.rows(alpha, acc_a) + acc_b * FA.rows(beta, acc_b)


@intent.kernel
def attention_f32_batched(q: I.In[I.f32, ("B", "L", "D")], k: I.In[I.f32, ("B", "S", "D")],
                          v: I.In[I.f32, ("B", "S", "D")], out: I.Out[I.f32, ("B", "L", "D")], scale: I.f32):
    for b in I.parallel(I.domain(0, q.shape[0])):
        queries = q[b, :, :]
        L, D = queries.shape
        identity = (I.full((L,), FA.NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
        m, l, acc = I.region_fold(source=(k[b, :, :], v[b, :, :]), axis=0, summarize=FA.summarize, combine=FA.combine,
                                  identity=identity, operands=(queries, scale))
        out[b, :, :] = acc / FA.rows(l, acc)


def _template(graph) -> list:
    """The flash-attention template's specialisations of ``graph`` (cuda_attention; the segmented fold, cuda_region,
    comes before them: test_tilelang_cuda_region.py)."""
    return [s for s in cuda_kernels.specializations(graph, targets.CUDA) if s.name.startswith("attention_")]


def _attention_specs(kernel) -> dict:
    return {s.name: s for s in _template(kernel.trace())}


def _extents(kernel, **sizes) -> dict:
    return {k: sizes[ev.extent.name] for k, ev in enumerate(kernel.trace().extents)}


def test_attention_f16_gets_tiled_flash_attention_programs():
    from intent_trace.backends.tilelang import cuda_attention

    specs = _attention_specs(FA.attention_f16)
    assert set(specs) == {f"attention_d{c[0]}" for c in cuda_attention.CONFIGS}
    d, bm, bn, stages, threads = cuda_attention.CONFIGS[0]
    program = specs[f"attention_d{d}"].program
    for text in (f"T.Kernel(T.ceildiv(d1, {bm}), d0, threads={threads})", f"T.alloc_shared(({bm}, {d}), 'float16')",
                 f"T.Pipelined(T.ceildiv(d3, {bn}), num_stages={stages})",
                 "T.gemm(Q_s, K_s, S_f, transpose_B=True", "S_f[i, j] * scale", "T.reduce_max(S_f, mb_f",
                 "T.exp(S_f[i, j] - mb_f[i])", "T.reduce_sum(S_f, lb_f", "T.copy(S_f, P_f)", "T.gemm(P_f, V_s, PV_f",
                 "T.if_then_else(m_f[i] == -T.infinity('float32'), T.float32(0)", "acc_f[i, j] / l_f[i]"):
        assert text in program, text
    assert "exp2" not in program and "fast" not in program


def test_flash_attention_spelling_gets_the_tiled_program_with_exp2_and_the_folded_scale():
    specs = _attention_specs(FA.attention_f16_fast)
    assert set(specs) == {"attention_d128", "attention_d64"}
    program = specs["attention_d128"].program
    factor = repr(float(np.float32(FA.LOG2E)))  # the literal as the graph holds it: one f32 multiplication
    for text in (f"scale_s[0] = scale * T.float32({factor})", "S_f[i, j] * scale_s[0]",
                 "T.exp2(S_f[i, j] - mb_f[i])", "T.float32(0), T.exp2(m_f[i] - m_new)"):
        assert text in program, text
    assert "T.exp(" not in program


def test_attention_specialisation_applies_to_divisible_extents_of_its_head_dim():
    specs = _attention_specs(FA.attention_f16)
    d128, d64 = specs["attention_d128"], specs["attention_d64"]
    assert d128.applies(_extents(FA.attention_f16, B=2, L=256, S=512, D=128))
    assert not d64.applies(_extents(FA.attention_f16, B=2, L=256, S=512, D=128))
    assert d64.applies(_extents(FA.attention_f16, B=32, L=4096, S=4096, D=64))
    for sizes in (dict(B=2, L=100, S=256, D=128), dict(B=2, L=256, S=100, D=128), dict(B=2, L=256, S=256, D=96),
                  dict(B=0, L=256, S=256, D=128), dict(B=2**16, L=2**16, S=256, D=128)):  # the last: 2**31 elements
        assert not any(s.applies(_extents(FA.attention_f16, **sizes)) for s in specs.values()), sizes


@pytest.mark.parametrize("kernel", [
    pytest.param(FA.attention, id="unbatched-f32-example"),
    pytest.param(attention_f32_batched, id="f32-operands"),
    pytest.param(_batched_attention(summarize_pv_in_f32, FA.combine), id="pv-without-f16-cast"),
    pytest.param(_batched_attention(FA.summarize_f16, combine_unguarded), id="combine-without-empty-guard"),
    pytest.param(_batched_attention(FA.summarize_fast, FA.combine), id="exp2-summary-with-exp-combine"),
    pytest.param(_batched_attention(FA.summarize_f16, FA.combine_fast), id="exp-summary-with-exp2-combine"),
    pytest.param(FA.attention_f16_causal, id="causal-mask (the segmented fold's, not the template's)"),
])
def test_attention_near_misses_get_no_specialisation(kernel):
    assert _template(kernel.trace()) == []


def test_attention_variant_spelled_as_the_example_is_recognised():
    # the factory above builds the near misses: with the example's own helpers it gives the recognised graph
    same = _batched_attention(FA.summarize_f16, FA.combine)
    assert set(_attention_specs(same)) == set(_attention_specs(FA.attention_f16)) == {"attention_d128", "attention_d64"}


def test_attention_specialisation_lowers_to_cuda_with_accurate_exp_and_tensor_cores():
    pytest.importorskip("tilelang")
    from backends.tilelang_support import cuda_source

    source = cuda_source(_attention_specs(FA.attention_f16)["attention_d128"].program)
    assert "expf(" in source and "__expf" not in source and "exp2" not in source
    assert "wgmma" in source  # both contracts on Hopper tensor cores
    assert "__float22half2_rn" in source  # P rounded to nearest f16


@pytest.mark.parametrize("name", ["attention_f16", "attention_f16_fast"])
def test_attention_f16_matches_numpy_with_p_rounded_to_f16(run, name):
    # Reference: one slice (the global row max), P rounded to f16 before PV, l the sum of the unrounded P. A target
    # may segment the keys anyhow, rounding each p = exp(s - m_slice) to f16 relative to its slice's max: each term of
    # PV then differs from the reference's by at most 2^-11 + 2^-11 relative (both roundings), so the quotient by at
    # most 2^-10 max|v|; rounding the output to f16 adds 2^-11 |out| <= 2^-11 max|v|. The f32 contracts, sums and
    # exp (<= 2 ulp) add ~1e-5 relative. Bound: 2^-9 max|v|.
    import math

    import numpy as np

    rng = np.random.default_rng(7)
    B, L, S, D = 2, 16, 40, 8
    q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((B, L, D), (B, S, D), (B, S, D)))
    scale = 1.0 / math.sqrt(D)
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    p = np.exp(s - s.max(axis=2, keepdims=True))
    want = np.einsum("bls,bsd->bld", p.astype(np.float16).astype(np.float64), v.astype(np.float64))
    want /= p.sum(axis=2, keepdims=True)
    out = np.zeros((B, L, D), np.float16)
    run(getattr(FA, name), q, k, v, out, scale)
    assert np.abs(out.astype(np.float64) - want).max() <= 2.0**-9 * np.abs(v).max()


# --- the recognisers' decisions on near misses (graph/patterns.py expresses them) -----------------------------

def _swapped(graph, swap_ops):
    """(op, graph with that one node's two operands swapped) for every node of ``swap_ops``, built by a rewrite."""
    import attrs

    from intent_trace.graph.patterns import Pat, rewrite

    for target in list(graph.walk()):
        if target.op in swap_ops and len(target.inputs) == 2:
            rule = (Pat(where=lambda n, t=target: n is t), lambda c, t=target: attrs.evolve(t, inputs=t.inputs[::-1]))
            yield target.op, rewrite(graph, [rule])


def test_attention_is_recognised_up_to_the_order_of_commutative_operands_only():
    from intent_trace.graph import ops

    graph = FA.attention_f16.trace()
    names = {"attention_d128", "attention_d64"}
    commutative = list(_swapped(graph, {ops.add, ops.mul, ops.maximum}))
    assert len(commutative) == 10  # the scores' scale, both reduce combines, the combine's maximum and its 6
    for op, swapped in commutative:
        assert {s.name for s in _template(swapped)} == names, op
    ordered = list(_swapped(graph, {ops.sub, ops.div, ops.eq, ops.contract}))
    assert {op for op, _ in ordered} == {ops.sub, ops.div, ops.eq, ops.contract}
    for op, swapped in ordered:
        assert _template(swapped) == [], op


def test_attention_with_another_literal_or_an_approximate_division_is_not_recognised():
    import math

    import attrs

    from intent_trace.graph import ops
    from intent_trace.graph.patterns import any_, lit, pat, rewrite

    graph = FA.attention_f16.trace()
    approximate = rewrite(graph, [(pat(ops.div, attrs={"approximate": None}, name="d"), lambda c: attrs.evolve(
        c["d"], attrs=c["d"].attrs + (("approximate", True),)))])
    assert approximate is not graph and _template(approximate) == []
    neg_inf = pat(ops.eq, any_("x"), lit(-math.inf, name="inf"), name="e")  # the empty summary's guard
    zero_guard = rewrite(graph, [(neg_inf, lambda c: attrs.evolve(
        c["e"], inputs=(c["x"], attrs.evolve(c["inf"], value=type(c["inf"].value)(0.0)))))])
    assert zero_guard is not graph and _template(zero_guard) == []


@intent.kernel
def matmul_two_writes(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")],
                      d: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)
    d[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


@intent.kernel
def matmul_plus_one(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32) + 1.0


@intent.kernel
def matmul_dead_cast(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    t = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)
    I.cast(t, I.f16)  # computed, never written: not the matmul the program is for
    c[m, n] = t


@intent.kernel
def matmul_transposed(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("N", "K")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[0])
    c[m, n] = I.matmul(a[m, k], b[n, k], transpose_rhs=True, acc_dtype=I.f32)


@intent.kernel
def matmul_partial_rows(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(1, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


@intent.kernel
def matmul_in_place(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.InOut[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


def test_a_pointwise_consumer_of_the_matmul_is_its_fused_epilogue():
    (spec,) = cuda_kernels.specializations(matmul_plus_one.trace(), targets.CUDA)  # cuda_epilogue: applied before the store
    assert spec.name == "matmul_epilogue" and "T.Parallel(128, 256)" in spec.program


@pytest.mark.parametrize("kernel", [matmul_two_writes, matmul_dead_cast, matmul_transposed,
                                    matmul_partial_rows, matmul_in_place], ids=lambda k: k.name)
def test_matmul_near_misses_get_no_specialisation(kernel):
    assert cuda_kernels.specializations(kernel.trace(), targets.CUDA) == []

