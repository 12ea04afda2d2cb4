"""The scan recogniser (schedule/scan.py): scans along the only axis, written whole, and why near misses are
refused. No GPU: the recogniser is target-neutral."""
from intent_trace.schedule import scan as S
from intent_trace.schedule.rows import Rejected
from schedule.scan_kernels import (cummax_f32, cumsum_f32, cumsum_f64_scaled, exclusive_cumsum_i64, forward_fill,
                                   reverse_cumsum, row_cumsum, scaled_after)


def test_scans_along_the_only_axis():
    g = cumsum_f32.trace()
    found = S.recognise(g)
    assert isinstance(found, S.AxisScan) and found.axis == 0 and found.inclusive and found.combine == "cumsum"
    assert found.write is g.body.nodes[-1] and found.part(g).mapping == "multi_block_scan"
    assert S.recognise(cumsum_f64_scaled.trace()).fused == ("add", "mul")
    assert not S.recognise(exclusive_cumsum_i64.trace()).inclusive
    assert S.recognise(cummax_f32.trace()).combine == "cummax"
    assert S.recognise(forward_fill.trace()).combine == "_latest"


def test_near_misses_say_why():
    for kernel, why in ((reverse_cumsum, "reverse"), (row_cumsum, "rank-1"), (scaled_after, "one write")):
        found = S.recognise(kernel.trace())
        assert isinstance(found, Rejected) and why in found.reason, (kernel.name, found)
