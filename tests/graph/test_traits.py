"""The derived op sets, against lists written out by hand from the spec (§4, §7, §8, §10, T4, T10)."""
from intent_trace.graph import ops, traits


def names(ops_set):
    return {op.name for op in ops_set}


def test_pointwise_is_the_elementwise_math_and_constants():
    assert names(traits.POINTWISE) == {
        "add", "sub", "mul", "div", "floordiv", "mod", "pow", "maximum", "minimum", "and_", "or_", "xor", "shl",
        "shr", "eq", "ne", "lt", "le", "gt", "ge", "neg", "invert", "select", "fma", "cast", "bitcast", "constant",
        "exp", "log", "log1p", "lgamma", "sin", "asin", "cos", "floor", "erf", "erfc", "i0", "rsqrt", "sqrt",
        "sigmoid", "abs", "exp2", "tanh", "expm1"}


def test_vendor_math_is_t4s_list_without_the_exact_functions():
    assert names(traits.VENDOR_MATH) == {"exp", "log", "log1p", "lgamma", "sin", "asin", "cos", "erf", "erfc", "i0",
                                         "rsqrt", "sigmoid", "exp2", "tanh", "expm1"}


def test_contractions_reductions_and_loops():
    assert names(traits.CONTRACTIONS) == {"contract", "scaled_contract", "sparse_contract", "quantized_dot"}
    assert names(traits.REDUCTIONS) == {"reduce", "scan"}
    assert names(traits.LOOPING) == {"reduce", "contract", "scaled_contract", "sparse_contract", "quantized_dot"}


def test_elementwise_consumers_and_what_they_evaluate_once():
    assert traits.ELEMENTWISE == traits.POINTWISE - {ops.constant} | {ops.random_bits}
    assert names(traits.ELEMENT_CONSUMERS - traits.ELEMENTWISE) == {
        "broadcast", "reshape", "transpose", "slice", "join", "write", "read", "reduce", "scan", "gather",
        "histogram", "scatter_reduce", "store", "contract", "unique_store",
        "masked_read", "masked_write", "masked_load", "masked_store"}
    assert traits.evaluates_once(ops.add, 1) and traits.evaluates_once(ops.transpose, 0)
    assert traits.evaluates_once(ops.write, 1) and not traits.evaluates_once(ops.write, 2)
    assert traits.evaluates_once(ops.reduce, 1) and not traits.evaluates_once(ops.reduce, 2)
    assert not traits.evaluates_once(ops.broadcast, 0) and not traits.evaluates_once(ops.contract, 0)


def test_an_unknown_trait_is_refused():
    import pytest
    with pytest.raises(RuntimeError, match="unknown traits"):
        ops.define("not_an_op", "unary", 1, traits={"pointwise", "fast"})
    assert "not_an_op" not in ops.REGISTRY
