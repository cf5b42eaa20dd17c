"""Front ends: what users call, over the engine.

``Booster`` (fit, predict, save), the scikit-learn estimators, model files,
re-fitting leaves with optax, inspection and plots, the monitor of evaluation
sets and callbacks, and the checks at the boundary.  Everything here is Python
orchestration; the programs it runs come from `jaxboost.engine`.
Imports flow one way: front ends -> engine -> kernels -> runtime.
"""
