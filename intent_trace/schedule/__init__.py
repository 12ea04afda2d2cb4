"""The schedule pass: which parallel mapping each part of a graph gets, decided from its structure (traits and
patterns, never op names), target-neutral (no TileLang here; the CUDA target reads these plans, Metal will).

- :mod:`.plan`: the record of a decision, :class:`~.plan.Schedule` (a tuple of :class:`~.plan.Part`), each part
  saying which nodes it covers, its mapping, its parameters, the ops fused into it and why it got that mapping.
- :mod:`.access`: the whole-axis reads, writes and unit domains every recogniser is built from.
- :mod:`.rows`: the row-group recogniser (reductions along the last axis with their pointwise producers and
  consumers: softmax in either spelling, norms, logsumexp, row sums and argmaxes).
- :mod:`.region`: segmented folds (a ``region_fold`` whose summary rows are independent: flash attention), and
  :mod:`.region_laws`, when their tile max may ignore NaN operands and zero signs.
- :mod:`.carry`: carried lanes (an ordered loop whose carry is a vector of independent chains: a Mamba scan).
"""
