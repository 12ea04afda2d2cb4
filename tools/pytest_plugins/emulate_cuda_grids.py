"""pytest plugin: the suite's tilelang-c runs use tilelang-cuda's grid mappings (cuda_rows.RowPlan,
cuda_kernels.FlatNest and ParallelGrid, cuda_reduce.ReducePlan and cuda_scan.ScanPlan, cuda_indexed's histogram,
scatter and row-gather plans, cuda_region_carry's lane loops, cuda_region_scan's segmented scans, emulated: a block's threads one after another, one phase
between barriers at a time; the tiled matmul's fused epilogue over its grid of output tiles, cuda_matmul.emulated, and
the segmented fold's tile program, cuda_region.emulated) and host workspaces, so
every kernel's grid program is checked on the CPU against the tests' own references. A few tests assert the C target's own program shape
(heap buffers, one serial program) and fail by design.

    PYTHONPATH=tools/pytest_plugins .venv/bin/python -m pytest -p emulate_cuda_grids tests -k "tilelang-c or backends"
"""
import attrs

from intent_trace.backends.tilelang import (cuda_indexed, cuda_kernels, cuda_region_carry, cuda_region_scan, cuda_rows,
                                           targets)

# the C target as a changed value (targets.TARGETS is what every build looks its target up in)
targets.TARGETS["tilelang-c"] = attrs.evolve(
    targets.C, row_group=lambda g: cuda_rows.row_plan(g, emulated=True),
    flat_nest=lambda g: cuda_kernels.flat_nest(g, emulated=True),
    parallel_grid=lambda g: cuda_kernels.parallel_grid(g, emulated=True),
    multi_block=lambda g: cuda_region_scan.multi_block(g, emulated=True),
    indexed_grid=lambda g: cuda_indexed.indexed_plan(g, emulated=True),
    carried_lanes=lambda g: cuda_region_carry.lane_plan(g, emulated=True), host_workspaces=True,
    specializations=cuda_kernels.emulated_specializations)
