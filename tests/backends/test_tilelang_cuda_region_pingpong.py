"""FlashAttention-3's ping-pong in the overlapped loop (cuda_region_overlap.PINGPONG): the two consumer warpgroups
issue their products in turn, through two named barriers (cuda_region_tiles.TURN).

What is checked without a GPU: where the program waits for its turn and gives it (before the first product; after
the second is issued and before any wait for the products), the helpers' barrier protocol against a model of PTX's
``bar.sync``/``bar.arrive`` (every wait released, no arrive left over, the warpgroups' products in alternation, for
every block count), and that neither a 128-thread tiling nor the C emulation (whose threads run in turn) gets the
turns. The numbers are the overlapped loop's (test_tilelang_cuda_region_overlap.py: the emulation writes no turn).
"""
import re

import pytest

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_region import _specs  # noqa: E402
from backends.cuda_ptx import assemble
from backends.tilelang_support import cuda_source  # noqa: E402
from intent_trace.backends.tilelang import cuda_region, cuda_region_overlap, cuda_region_tiles, targets  # noqa: E402
from schedule.region_kernels import FA  # noqa: E402


@pytest.fixture
def pingpong(monkeypatch):
    monkeypatch.setattr(cuda_region_overlap, "PINGPONG", True)


def _program(kernel, tiling=cuda_region.Tiling(128), spelling=cuda_region.Spelling):
    graph = kernel.trace()
    plan = cuda_region.schedule_region.recognise(graph)
    return cuda_region.specialization(graph, targets.CUDA, plan, tiling, spelling)


@pytest.mark.parametrize("kernel", [FA.attention_f16_causal], ids=lambda k: k.name)
def test_the_turns_bracket_the_issue_of_the_products(pingpong, kernel):
    spec = _specs(kernel)["segmented_fold_d128"]
    program = spec.program
    loop = re.search(r"for kb in T\.Pipelined\((.*) \+ 1, num_stages=2\):", program)
    body, count = program[loop.end():], loop.group(1)
    turn = "T.evaluate(T.call_extern('int32', 'itp_turn', T.Cast('int32', kb > 0)))"
    give = f"T.evaluate(T.call_extern('int32', 'itp_pass_turn', T.Cast('int32', kb < {count})))"
    at = 0
    for step in (turn, "T.wgmma_gemm(", "if kb > 0:", "T.wgmma_gemm(", give, "T.wait_wgmma(1)", "else:", give,
                 "T.wait_wgmma(0)"):
        at = body.index(step, at) + 1  # in this order
    assert body.count("itp_turn") == 1 and body.count("itp_pass_turn") == 2
    assert body.index("T.wait_wgmma(") > body.index(give)  # no wait for a product before the turn is given
    assert "ping-pong" in spec.part.param("pipelined") and "overlapped" in spec.part.param("pipelined")
    assert all(h.format(fn=cuda_region.Spelling.dialect.function) in program for h in cuda_region_tiles.TURN)


def test_without_the_flag_the_overlapped_loop_takes_no_turns(monkeypatch):
    monkeypatch.setattr(cuda_region_overlap, "PINGPONG", False)
    spec = _specs(FA.attention_f16_causal)["segmented_fold_d128"]
    assert "itp_turn" not in spec.program and "ping-pong" not in spec.part.param("pipelined")
    assert "overlapped" in spec.part.param("pipelined")


def test_one_warpgroup_and_the_emulation_take_no_turns(pingpong):
    one = _program(FA.attention_f16_causal, cuda_region.Tiling(128, block_M=64, threads=128))
    assert "T.wgmma_gemm(" in one.program and "itp_turn" not in one.program
    emulated = _program(FA.attention_f16_causal, spelling=cuda_region.Emulated)
    assert "itp_turn" not in emulated.program and "ping-pong" not in emulated.part.param("pipelined")


def _protocol():
    """The helpers' (condition clause, barrier of warpgroup w, instruction) read from their text."""
    out = []
    for text in cuda_region_tiles.TURN:
        flag, w_is, op, base, sign = re.search(r"if \((\w+) \|\| w == (\d)\) asm volatile\(\"(bar\.\w+) %0, 256;\" "
                                               r":: \"r\"\((\d+) ([+-]) w\)", text).groups()
        out.append((int(w_is), lambda w, b=int(base), s=sign: b + w if s == "+" else b - w, op))
    return out


@pytest.mark.parametrize("blocks", [1, 2, 3, 7])
def test_the_turns_alternate_and_leave_no_arrive(blocks):
    # a model of the two warpgroups running the loop (iterations 0..blocks, the last one's element work skipped),
    # each step as far as its barriers let it: bar.sync waits until the barrier has its 256 threads (128 of its own
    # and the other warpgroup's arrive), bar.arrive adds 128 and goes on
    (wait_w, wait_bar, wait_op), (give_w, give_bar, give_op) = _protocol()
    assert (wait_op, give_op) == ("bar.sync", "bar.arrive")
    arrived = {}
    pc = {0: 0, 1: 0}  # the iteration each warpgroup is at
    stage = {0: "turn", 1: "turn"}
    issued = []
    for _ in range(100 * (blocks + 1)):
        moved = False
        for w in (0, 1):
            kb = pc[w]
            if kb > blocks:
                continue
            if stage[w] == "turn":
                if kb > 0 or w == wait_w:
                    bar = wait_bar(w)
                    if arrived.get(bar, 0) < 1:
                        continue  # waits for the other warpgroup's arrive
                    arrived[bar] -= 1
                issued.append(w)
                stage[w], moved = "give", True
            else:
                if kb < blocks or w == give_w:
                    bar = give_bar(w)
                    arrived[bar] = arrived.get(bar, 0) + 1
                pc[w], stage[w], moved = kb + 1, "turn", True
        if not moved:
            break
    assert pc == {0: blocks + 1, 1: blocks + 1}, "a warpgroup waits forever"
    assert all(v == 0 for v in arrived.values()), "an arrive is left over at the end"
    assert wait_bar(0) != wait_bar(1) and {give_bar(0), give_bar(1)} == {wait_bar(0), wait_bar(1)}
    assert give_bar(0) == wait_bar(1)  # each gives the other its turn
    first = 1 - wait_w
    assert issued == [first, 1 - first] * (blocks + 1)  # in alternation, the one that never waits at 0 first


@pytest.mark.parametrize("kernel", [FA.attention_f16_causal, FA.attention_f16_fast], ids=lambda k: k.name)
def test_the_turns_stay_with_the_consumers_in_the_lowered_program(pingpong, monkeypatch, kernel, tmp_path):
    # TileLang's warp specialisation splits the loop into its producer (the first 128 threads: the TMA loads) and
    # the consumers; the turns are the consumers' (a barrier the producer took would deadlock or order nothing), and
    # the program still fits the overlapped loop's registers
    source = cuda_source(_specs(kernel)["segmented_fold_d128"].program)
    producer = source.index("if (((int)threadIdx.x) < 128) {")
    consumer = source.index("tl::warpgroup_reg_alloc<", producer)
    assert "itp_turn(" not in source[producer:consumer] and "itp_pass_turn(" not in source[producer:consumer]
    # TileLang's own barriers keep clear of the turns' (ids 8 and 9)
    theirs = {int(x) for x in re.findall(r"(?:__sync_thread_partial|__named_barrier_arrive)\((\d+)", source)}
    assert theirs and not theirs & set(range(8, 10)), theirs
    body = source[consumer:]
    assert body.count("itp_turn(") == 1 and body.count("itp_pass_turn(") == 2
    assert body.index("itp_turn(") < body.index("tl::wgmma_ss<") < body.index("tl::wgmma_rs<") < \
        body.index("itp_pass_turn(") < body.index("tl::wait_wgmma<1>")
    built = assemble(source, tmp_path, std="c++20", ptx=False)
    if built is not None:  # assembled by the local nvcc too (TileLang's headers, Hopper)
        assert max(stores for stores, _ in built.spills.values()) == 0
        assert max(built.registers.values()) <= 168
