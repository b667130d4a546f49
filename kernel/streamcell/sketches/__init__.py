"""Sketches: standalone, mergeable, DataSketches-compatible, and concurrent (seed 004).

Each sketch lives in a native module; this package is its public face.
"""

# -- theta / hll / concurrent framework (native/_theta.pyx, native/_hll.pyx) --
# (names re-exported here once those modules build)

# -- kll / frequent items (native/_kll.pyx, native/_frequent.pyx) --
# (names re-exported here once those modules build)
