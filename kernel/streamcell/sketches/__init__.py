"""Sketches: standalone, mergeable, DataSketches-compatible, and concurrent (Rinberg et al.).

Each sketch lives in a native module; this package is its public face.

- Θ (distinct count): :class:`ThetaSketch`, :class:`CompactThetaSketch`, set operations
  :func:`theta_union` / :func:`theta_intersection` / :func:`theta_a_not_b` /
  :func:`theta_jaccard`, and :class:`ConcurrentThetaSketch` (N writers, queries while
  ingesting, relaxation r = 2·N·b reported with every estimate).
- HyperLogLog: :class:`HllSketch`, :func:`hll_union`, :class:`ConcurrentHllSketch`.
- Quantiles: :class:`KllDoublesSketch`, :class:`KllFloatsSketch`, and
  :class:`ConcurrentKllDoublesSketch` (N writers over the same framework as Θ).
- Heavy hitters: :class:`FrequentItemsSketch` (int64), :class:`FrequentStringsSketch`, and
  :class:`ConcurrentFrequentItemsSketch` (N writers, int64 items).

Serialized bytes follow the Apache DataSketches formats (see each module's header).
"""

from streamcell._frequent import (
    ConcurrentFrequentItemsSketch,
    FrequentItemsSketch,
    FrequentStringsSketch,
)
from streamcell._hll import ConcurrentHllSketch, HllSketch, hll_union
from streamcell._kll import ConcurrentKllDoublesSketch, KllDoublesSketch, KllFloatsSketch
from streamcell._theta import (
    CompactThetaSketch,
    ConcurrentThetaEstimate,
    ConcurrentThetaSketch,
    ThetaSketch,
    theta_a_not_b,
    theta_intersection,
    theta_jaccard,
    theta_union,
)

__all__ = [
    "CompactThetaSketch",
    "ConcurrentFrequentItemsSketch",
    "ConcurrentHllSketch",
    "ConcurrentKllDoublesSketch",
    "ConcurrentThetaEstimate",
    "ConcurrentThetaSketch",
    "FrequentItemsSketch",
    "FrequentStringsSketch",
    "HllSketch",
    "KllDoublesSketch",
    "KllFloatsSketch",
    "ThetaSketch",
    "hll_union",
    "theta_a_not_b",
    "theta_intersection",
    "theta_jaccard",
    "theta_union",
]
