"""What the code generators share, below both the cpu oracle (:mod:`intent_trace.oracle.numba`) and the
TileLang backends (:mod:`intent_trace.backends.tilelang`): the source writer and the graph analyses that decide
what is fused and what is materialised. Nothing here imports either generator."""
