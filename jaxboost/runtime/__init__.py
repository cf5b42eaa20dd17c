"""Runtime: devices and processes, program caches, padding to shape buckets,
precision, the compilation cache and JAX version workarounds.  It imports
nothing else of jaxboost.
"""
