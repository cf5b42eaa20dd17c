"""Kernels: the loops over rows, each as a plain XLA reference and, on CPU,
a native C++ kernel called through XLA's FFI that must equal it.

`jaxboost.kernels.registry` chooses them per platform; the engine asks it
rather than testing platforms itself.  Kernels import only the runtime.
"""
