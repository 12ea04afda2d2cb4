"""A TileLang target is a value (:class:`~intent_trace.backends.tilelang.spec.TileLangTarget`): ``C``, ``CUDA`` and
``METAL`` are frozen instances whose fields are every capability the emitter and the executable use; nothing
probes a module for an attribute; every target launches through one signature; the launch plan is decided by a
pre-pass and given to the emitter's constructor.

These tests generate program text only (no compilation).
"""
from __future__ import annotations

import ast
import inspect
import pathlib

import attrs
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.backends.tilelang import cuda_kernels, emitter, metal_grid, targets
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.spec import TileLangTarget

from backends.tilelang_support import affine, row_prefix_max

TILELANG = pathlib.Path(tl_target.__file__).parent



@intent.kernel
def checked_gather(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, ("K",)]):
    y[:] = I.gather(x[:], idx[:])


def test_the_three_targets_are_frozen_values_named_as_registered():
    assert set(targets.TARGETS) == {"tilelang-c", "tilelang-cuda", "tilelang-metal"}
    for name, t in targets.TARGETS.items():
        assert isinstance(t, TileLangTarget) and t.name == name
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            t.host_workspaces = not t.host_workspaces
    assert (targets.C.tilelang_target, targets.CUDA.tilelang_target, targets.METAL.tilelang_target) == \
        ("c", "cuda", "metal")
    # capabilities are fields: what a target lacks is its default, not a missing module attribute
    assert targets.C.flat_nest is None and targets.C.lanes is None  # tilelang-c plans no grids of its own
    assert targets.METAL.parallel_grid is metal_grid.parallel_grid and targets.METAL.lanes is metal_grid.LANES
    assert targets.CUDA.flat_nest is cuda_kernels.flat_nest and targets.CUDA.specializations is \
        cuda_kernels.specializations
    assert targets.METAL.emulated_executable is not None and targets.C.emulated_executable is None
    assert not targets.C.host_workspaces and targets.CUDA.host_workspaces and targets.METAL.host_workspaces


def test_every_target_launches_through_one_signature():
    for t in targets.TARGETS.values():
        for prelude in (None, "PRELUDE"):
            line = t.launch(prelude, None)
            assert line.startswith("with T.Kernel(") and line.endswith(" as _:")
            assert (prelude is None and t.name == "tilelang-c") or "prelude=" in line
    nest = cuda_kernels.FlatNest(("d0",))
    assert targets.CUDA.launch("PRELUDE", nest) == nest.launch("PRELUDE")


def test_a_changed_copy_of_a_target_changes_the_program_without_touching_a_module():
    graph = checked_gather.trace()
    checked = tl_target.generate_program(graph, "tilelang-c")
    assert checked.error_sites  # the gather's coordinates are checked
    unchecked_c = attrs.evolve(targets.C, name="tilelang-c-unchecked", early_exit=None)
    em = emitter.TileLangEmitter(graph, unchecked_c, {}, {})
    assert not em.checks  # no early exit: the target cannot check (T9)


def test_no_module_attribute_is_probed():
    for name in ("target.py", "storage.py", "extern.py", "emitter.py", "philox.py", "targets.py", "spec.py"):
        tree = ast.parse((TILELANG / name).read_text(encoding="utf-8"))
        # getattr with a default, or hasattr, on a target (a module or the value): a capability looked up by name
        probes = [ast.unparse(n) for n in ast.walk(tree)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and
                  ((n.func.id == "getattr" and len(n.args) == 3) or
                   (n.func.id == "hasattr" and any(w in ast.unparse(n.args[0]) for w in ("target", "module", "spec"))))]
        assert probes == [], name


def test_cuda_does_not_import_its_planners():
    tree = ast.parse((TILELANG / "cuda.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names} | \
        {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {"cuda_kernels", "cuda_matmul", "cuda_region"} & imported


def test_the_launch_plan_is_decided_before_emission_and_given_to_the_emitter():
    params = inspect.signature(emitter.TileLangEmitter.__init__).parameters
    assert {"nest", "grid"} <= set(params)
    emulated = attrs.evolve(targets.C, flat_nest=lambda g: cuda_kernels.flat_nest(g, emulated=True),
                            parallel_grid=lambda g: cuda_kernels.parallel_grid(g, emulated=True),
                            host_workspaces=True)
    nest, grid = tl_target.plan_launch(affine.trace(), emulated)
    assert nest == cuda_kernels.FlatNest(("d0", "d1"), emulated=True) and grid is None
    # planned by flat_nest, but its element needs a workspace: the pre-pass keeps the serial launch
    assert cuda_kernels.flat_nest(row_prefix_max.trace()) is not None
    assert tl_target.plan_launch(row_prefix_max.trace(), emulated) == (None, None)
    assert tl_target.plan_launch(affine.trace(), targets.C) == (None, None)  # no planners
    assert not hasattr(tl_target, "GridFallback")
    from intent_trace.backends.tilelang import storage

    assert not hasattr(storage, "GridFallback")


def test_cuda_helpers_are_the_c_bodies_rendered_in_the_device_spelling_not_rewritten_c_text():
    from intent_trace import types as T
    from intent_trace.backends.tilelang import c, cuda

    tree = ast.parse((TILELANG / "cuda.py").read_text(encoding="utf-8"))
    rewrites = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call) and
                isinstance(n.func, ast.Attribute) and n.func.attr in ("replace", "sub")]
    assert rewrites == []
    for family, dtypes, ret, args in (("max", (T.i32,), T.i32, (T.i32, T.i32)), ("exp", (T.f64,), T.f64, (T.f64,)),
                                      ("cast", (T.f64, T.u8), T.u8, (T.f64,)), ("lt", (T.u64,), T.bool_, (T.u64,) * 2)):
        name = "it_" + "_".join((family, *(d.name for d in dtypes)))
        device = cuda.helper_source(name, family, dtypes, ret, args)
        assert device == c.helper_source(name, family, dtypes, ret, args, cuda.DEVICE)
        assert device.startswith("__device__ __forceinline__ ") and "extern" not in device
        assert device[len(cuda.DEVICE.function):] == c.helper_source(name, family, dtypes, ret, args)[
            len(c.C_SPELLING.function):]  # one body, two spellings
    # x86's NaN decisions wrap the C body, defined under its own name (not renamed in C's text)
    add = cuda.helper_source("it_add_f32", "add", (T.f32,), T.f32, (T.f32, T.f32))
    assert add.startswith(c.helper_source("it_add_f32_ieee", "add", (T.f32,), T.f32, (T.f32, T.f32), cuda.DEVICE))
    # the internal helpers: one template each, rendered per target (a count-leading-zeros builtin, qualifiers)
    (clz,) = [n for n, text in c.BASE.items() if "$clz" in text]
    assert "__clzll(" in cuda.DEVICE.render(c.BASE[clz]) and "__builtin_clzll(" in c.C_SPELLING.render(c.BASE[clz])
    prelude = cuda.prelude([cuda.helper_source("it_mx_e2m1_f32", "mx_e2m1", (T.f32,), T.f32, (T.u8, T.u8, T.u8))])
    assert "static __device__ const double itb_mx_e2m1[" in prelude and "static inline" not in prelude
