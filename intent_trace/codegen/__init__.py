"""What the code generators share, below both the cpu oracle (:mod:`intent_trace.oracle.numba`) and the
TileLang backends (:mod:`intent_trace.backends.tilelang`): the value classes (:mod:`.values`), the source writer
(:mod:`.writer`), the graph analyses that decide what is fused and what is materialised (:mod:`.analysis`), the
run-time checks as data (:mod:`.checks`), and the structural rules written once (:mod:`.structural`: shapes,
aggregates, domains; :mod:`.access`: view reads and writes; :mod:`.control`: loops and branches; :mod:`.folds`:
scan, general folds, region ops) against the emitter (:mod:`.protocol`) and its spelling (:mod:`.dialect`).
Nothing here imports either generator."""
