"""The registry defines each op's spellings and printing: surface.py's tables, the proxy dunders and the printer
are views of the OpDefs, written out here by hand from the spec (§4 operators, the I namespace)."""
import intent_trace as intent
from intent_trace import I
from intent_trace.graph import ops, surface
from intent_trace.graph.printer import generic_body
from intent_trace.proxies.values import ValueProxy


def test_ops_carry_their_dunders_and_shorthands():
    assert ops.add.dunders == (("__add__", False), ("__radd__", True))
    assert ops.shr.dunders == (("__rshift__", False), ("__rrshift__", True))  # not a reflected __r...__
    assert ops.lt.dunders == (("__lt__", False),) and ops.invert.dunders == (("__invert__", False),)
    assert set(ops.reduce.shorthands) == {"reduce", "reduce.sum", "reduce.max", "reduce.any", "reduce.all",
                                          "arg_reduce.max"}
    assert ops.erfc.shorthands == ("erfc",) and ops.select.shorthands == ("select", "where")


def test_surface_tables_are_views_of_the_registry():
    assert surface.BINARY_DUNDERS == {d: (op.name, r) for op in ops.REGISTRY.values() if op.arity == 2
                                      for d, r in op.dunders}
    assert surface.UNARY_DUNDERS == {"__neg__": "neg", "__invert__": "invert", "__abs__": "abs"}
    assert all(surface.SHORTHANDS[n] == op.name for op in ops.REGISTRY.values() for n in op.shorthands)


def test_proxy_dunders_are_generated_from_the_registry():
    for op in ops.REGISTRY.values():
        for dunder, _ in op.dunders:
            assert getattr(ValueProxy, dunder).__name__ == op.name


def test_printer_hooks_replace_op_branches():
    assert ops.read.printer is ops.write.printer is ops.load.printer is ops.indexed_access
    assert ops.add.printer is None and ops.if_.region_names == ("then", "else")

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] + 1.0

    graph = k.trace()
    read = next(n for n in graph.walk() if n.op is ops.read)
    add = next(n for n in graph.walk() if n.op is ops.add)
    assert ops.indexed_access(read, ["x", "%1"]) == "read x[%1]"
    assert generic_body(add, ["%2", "1.0:f32"]) == "add %2, 1.0:f32"
    assert "write y[%0] = %2" in str(graph) and "read x[%0]" in str(graph)
