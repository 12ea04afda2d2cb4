"""The TileLang targets as values (:class:`.spec.TileLangTarget`): ``C``, ``CUDA`` and ``METAL``, built from the
target modules' spelling and the launch planners: CUDA's and, with Metal's spelling, Metal's (:mod:`.metal_grid`);
CUDA's tiled specialisations (:mod:`.cuda_kernels`) and Metal's (:mod:`.metal_matmul`, :mod:`.metal_region`).

This is the one module that puts a target module together with the planners (so :mod:`.cuda` need not import
:mod:`.cuda_kernels`, whose matmul programs import :mod:`.cuda` for its helper bodies).
"""
from __future__ import annotations

from . import (c, cuda, cuda_indexed, cuda_kernels, cuda_region_carry, cuda_region_scan, cuda_rows, metal, metal_grid,
               metal_matmul, metal_region, x86_nans)
from .metal_emulation.executable import build_emulated
from .spec import TileLangTarget

C = TileLangTarget(
    name=c.NAME, tilelang_target=c.TILELANG_TARGET, execution_backend=c.EXECUTION_BACKEND, language=c.LANGUAGE,
    supports=c.supports, view_storage=c.view_storage, scalar_storage=c.scalar_storage,
    helper_source=x86_nans.c_helper_source, prelude=c.prelude, launch=c.launch,
    extern_source=c.extern_source, workspace_source=c.workspace_source, claim_source=c.claim_source,
    early_exit=c.early_exit, host_workspaces=False,
    compile_flags=c.compile_flags,
    to_device=c.to_device, synchronize=c.synchronize, require_runtime=c.require_runtime,
)

CUDA = TileLangTarget(
    name=cuda.NAME, tilelang_target=cuda.TILELANG_TARGET, execution_backend=cuda.EXECUTION_BACKEND,
    language=cuda.LANGUAGE,
    supports=cuda.supports, view_storage=cuda.view_storage, scalar_storage=cuda.scalar_storage,
    helper_source=cuda.helper_source, prelude=cuda.prelude, launch=cuda.launch,
    extern_source=cuda.extern_source, claim_source=cuda.claim_source,
    early_exit=cuda.early_exit, host_workspaces=cuda.host_workspaces,
    compile_flags=cuda.compile_flags, pass_configs=cuda.pass_configs,
    to_device=cuda.to_device, synchronize=cuda.synchronize, require_runtime=cuda.require_runtime,
    device_tensors="cuda",  # torch CUDA tensors are kernel arguments as they are
    row_group=cuda_rows.row_plan, flat_nest=cuda_kernels.flat_nest, parallel_grid=cuda_kernels.parallel_grid,
    specializations=cuda_kernels.specializations, multi_block=cuda_region_scan.multi_block,
    indexed_grid=cuda_indexed.indexed_plan, carried_lanes=cuda_region_carry.lane_plan, lanes=cuda.LANES,
)

def _metal_specializations(graph, target) -> list:
    """tilelang-metal's tiled programs: the simdgroup-matrix matmul, then the segmented fold's."""
    return metal_matmul.specializations(graph, target) + metal_region.specializations(graph, target)


METAL = TileLangTarget(
    name=metal.NAME, tilelang_target=metal.TILELANG_TARGET, execution_backend=metal.EXECUTION_BACKEND,
    language=metal.LANGUAGE,
    supports=metal.supports, view_storage=metal.view_storage, scalar_storage=metal.scalar_storage,
    helper_source=metal.helper_source, prelude=metal.prelude, launch=metal.launch,
    extern_source=metal.extern_source,
    early_exit=metal.early_exit, host_workspaces=metal.host_workspaces,
    compile_flags=metal.compile_flags,
    to_device=metal.to_device, synchronize=metal.synchronize, require_runtime=metal.require_runtime,
    kernel_source=metal.kernel_source, emulated_executable=build_emulated,
    claim_source=metal_grid.claim_source, lanes=metal_grid.LANES, prelude_every_kernel=True,
    row_group=metal_grid.row_group, flat_nest=metal_grid.flat_nest, parallel_grid=metal_grid.parallel_grid,
    multi_block=metal_grid.multi_block, indexed_grid=metal_grid.indexed_grid, carried_lanes=metal_grid.carried_lanes,
    grid_refusal=metal_grid.refusal, specializations=_metal_specializations,
)

TARGETS = {t.name: t for t in (C, CUDA, METAL)}


def target_named(name: str) -> TileLangTarget:
    """The target called ``name``; ValueError listing the targets otherwise."""
    target = TARGETS.get(name)
    if target is None:
        raise ValueError(f"unknown TileLang target {name!r}; available: {', '.join(TARGETS)}")
    return target
