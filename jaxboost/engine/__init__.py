"""The engine: the boosting algorithm as jitted programs on row shards.

Binning, per-row derivatives, tree growth (histograms, split search,
routing), leaf values (Newton, line search), the initial score, sampling,
quantisation, prediction and metrics.  Every function that touches rows is
pure and shape-static, runs inside ``jit`` on one shard, and sums across
shards with ``psum``.  It imports kernels and runtime, never a front end.
"""
