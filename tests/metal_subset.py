"""Which of the kernel tests' emulated-Metal cases run (conftest's ``tilelang-metal-emulated`` target).

Every case Metal can run runs on emulated Metal (issue 18: the whole suite in CI). An emulated case costs its
program's TileLang lowering and a C++ compilation of its own (0.58 s on average on a 2-core VM, 805 kernels for
``tests/kernels``; cached on disk by source text, and compiled ahead on the core the serial suite leaves idle:
conftest's ``run``). ``INTENT_TRACE_METAL_SUBSET=1`` runs a subset instead, for a quick local run: each test
function's first case Metal can run (every op family and mapping the suite tests, on one dtype and shape each, no
hypothesis test).

Metal has no 64-bit float (a LoweringError names f64 and the target; tests/backends/test_tilelang_metal.py checks
it): cases whose id names f64, and the test functions in :data:`LACKS_F64` (their kernels use f64 whatever the
case), never run on it. A new test whose kernel uses f64 fails on emulated Metal with that LoweringError until it
is listed here.
"""
from __future__ import annotations

import re

#: test functions ("file::name") whose kernels use f64 in every case, or in cases whose ids do not say so
LACKS_F64 = frozenset({
    "tests/kernels/test_buffers.py::test_buffer_created_in_a_loop_body_is_fresh_each_iteration",
    "tests/kernels/test_contract.py::test_contract_generic_batch_with_dynamic_extents",
    "tests/kernels/test_contract.py::test_contract_result_may_overwrite_an_operand_view",
    "tests/kernels/test_contract_accumulators.py::test_contract_integer_operands_with_a_float_accumulator",
    "tests/kernels/test_gather.py::test_gather_index_tensors_broadcast_over_size_one_axes",
    "tests/kernels/test_masked_access.py::test_a_masked_store_whose_valid_lanes_collide_is_refused",
    "tests/kernels/test_masked_access.py::test_masked_load_with_a_point_a_tensor_and_a_domain",
    "tests/kernels/test_masked_access.py::test_scatter_reduce_combines_only_valid_lanes",
    "tests/kernels/test_pointwise_properties.py::test_pointwise_chain_matches_model",  # hypothesis draws f64 too
    "tests/kernels/test_pointwise_properties.py::test_size_one_and_scalar_broadcasting",
    "tests/kernels/test_ragged.py::test_ragged_offsets_past_the_members_are_an_index_error",
    "tests/kernels/test_ragged.py::test_ragged_segment_sum_matches_numpy_including_empty_groups",
    "tests/kernels/test_reduce_argreduce.py::test_arg_reduce_max_no_remaining_axes_gives_scalars",
    "tests/kernels/test_reduce_builtins.py::test_reduce_max_signed_zeros",
    "tests/kernels/test_reduce_builtins.py::test_reduce_sum_multiple_and_negative_axes",
    "tests/kernels/test_reduce_builtins.py::test_reduce_sum_random_shapes_axes_dtypes",
    "tests/kernels/test_reduce_generic.py::test_reduce_generic_empty_returns_identity",
    "tests/kernels/test_reduce_generic.py::test_reduce_generic_tuple_accumulator",
    "tests/kernels/test_region.py::test_region_fold_empty_source_returns_the_identity",
    "tests/kernels/test_region.py::test_region_fold_logsumexp_matches_numpy",
    "tests/kernels/test_region.py::test_region_scan_emits_prefix_outputs_and_final_state",
    "tests/kernels/test_scaled_contract.py::test_scaled_matmul_dynamic_extents_and_empty_reduction",
    "tests/kernels/test_scaled_contract.py::test_scaled_matmul_matches_ml_dtypes_reference",
    "tests/kernels/test_scan.py::test_cummax_nan_propagates",
    "tests/kernels/test_scan.py::test_cumsum_float_to_int_acc_casts_first",
    "tests/kernels/test_scan.py::test_cumsum_random_shapes_axes_modes_dtypes",
    "tests/kernels/test_scan.py::test_scan_non_commutative_affine_composition",
    "tests/kernels/test_scan.py::test_scan_non_commutative_reverse_keeps_source_order",
    "tests/kernels/test_scan.py::test_scan_non_commutative_tensor_accumulator",
    "tests/kernels/test_scan.py::test_scan_non_commutative_with_tensor_operand",
    "tests/kernels/test_scatter_reduce.py::test_scatter_reduce_into_a_buffer_with_init",
    "tests/kernels/test_sparse_contract.py::test_sparse_matmul_matches_the_dense_product_of_the_expanded_matrix",
    "tests/backends/test_runtime_scalars.py::test_runtime_scalar_of_every_dtype_keeps_its_value",
    "tests/backends/test_tilelang_cuda_rows.py::test_logsumexp_matches_numpy_within_the_bound",
    "tests/backends/test_tilelang_cuda_scan.py::test_fused_producers",
    "tests/backends/test_zero_extents.py::test_static_zero_extent_rank3",
})
#: tests of executables in general that check the executable is the fixture's target by name: the emulated Metal
#: executable is tilelang-metal's (``.target == "tilelang-metal"``, its repr says "(emulated)")
NAMES_THE_TARGET = frozenset({
    "tests/test_bench.py::test_bench_reports_compile_first_call_and_steady_state",
    "tests/test_display.py::test_executable_display_on_every_target",
})
_F64 = re.compile(r"(?<![A-Za-z0-9])f64(?![0-9])")
_SELECTED: set = set()  # the selected emulated-Metal cases, by _key


def _function(item) -> str:
    return item.nodeid.split("[", 1)[0]


def _key(item, target: str) -> tuple:
    """The case's identity without its target: (its function, its other parameters' ids)."""
    ident = item.callspec.id
    return _function(item), re.sub(rf"(?<![\w.]){re.escape(target)}(?![\w.])", "@", ident, count=1)


def _target(item):
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get("target")


def select(items: list, target: str, full: bool) -> tuple:
    """(items to run, items deselected): every case of other targets; of ``target``, the cases Metal can run --
    all of them when ``full``, else each function's first (no hypothesis test)."""
    keep, drop, seen = [], [], set()
    for item in items:
        if _target(item) != target:
            keep.append(item)
            continue
        function = _function(item)
        hypothesis = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        runs = (function not in LACKS_F64 | NAMES_THE_TARGET and _F64.search(item.name) is None
                and (full or (function not in seen and not hypothesis)))
        if runs:
            seen.add(function)
            _SELECTED.add(_key(item, target))
            keep.append(item)
        else:
            drop.append(item)
    return keep, drop


def selected_sibling(node) -> bool:
    """Whether the case of ``node``'s test with the same parameters on emulated Metal runs."""
    target = _target(node)
    return target is not None and _key(node, target) in _SELECTED
