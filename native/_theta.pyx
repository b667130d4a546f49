# distutils: language = c
# distutils: sources = native/sketch/theta.c native/sketch/murmur3.c native/sketch/concurrent.c
"""streamcell._theta: Θ sketches (DataSketches-compatible) and the concurrent Θ sketch.

Thin wrapper over native/sketch/theta.h and native/sketch/concurrent.h: inputs are collected
with the GIL, one native call runs under ``with nogil:``, and its status goes through
``check_status``. The public names are re-exported by ``streamcell.sketches``.
"""

from collections import namedtuple

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcpy

include "common/status.pxi"

include "sketch/concurrent.pxi"

cdef extern from "sketch/theta.h" nogil:
    ctypedef struct sc_theta:
        pass
    ctypedef struct sc_theta_compact:
        uint64_t theta
        uint64_t *entries
        uint32_t n
        uint16_t seed_hash
        bint empty
        bint ordered
    uint64_t SC_THETA_MAX
    int sc_theta_create(sc_theta **out, uint8_t lg_k, uint64_t seed)
    void sc_theta_destroy(sc_theta *s)
    void sc_theta_reset(sc_theta *s)
    int sc_theta_copy(sc_theta **out, const sc_theta *s)
    int sc_theta_update_i64(sc_theta *s, int64_t v)
    int sc_theta_update_f64(sc_theta *s, double v)
    int sc_theta_update_bytes(sc_theta *s, const void *data, size_t len)
    int sc_theta_update_i64_array(sc_theta *s, const int64_t *v, size_t n, const uint8_t *validity, int64_t off)
    int sc_theta_update_f64_array(sc_theta *s, const double *v, size_t n, const uint8_t *validity, int64_t off)
    int sc_theta_update_str32_array(sc_theta *s, const int32_t *o, const uint8_t *d, size_t n, const uint8_t *validity, int64_t off)
    int sc_theta_update_str64_array(sc_theta *s, const int64_t *o, const uint8_t *d, size_t n, const uint8_t *validity, int64_t off)
    int sc_theta_trim(sc_theta *s)
    uint32_t sc_theta_num_retained(const sc_theta *s)
    uint64_t sc_theta_theta64(const sc_theta *s)
    bint sc_theta_is_empty(const sc_theta *s)
    uint8_t sc_theta_lg_k(const sc_theta *s)
    uint64_t sc_theta_seed(const sc_theta *s)
    int sc_theta_compact_of(sc_theta_compact **out, const sc_theta *s, bint ordered)
    double sc_theta_estimate_of(uint32_t n, uint64_t theta, bint empty)
    double sc_theta_lower_bound_of(uint32_t n, uint64_t theta, bint empty, int z)
    double sc_theta_upper_bound_of(uint32_t n, uint64_t theta, bint empty, int z)
    void sc_theta_compact_destroy(sc_theta_compact *c)
    size_t sc_theta_compact_serialized_size(const sc_theta_compact *c)
    int sc_theta_compact_serialize(const sc_theta_compact *c, uint8_t *buf, size_t cap)
    int sc_theta_compact_deserialize(sc_theta_compact **out, const uint8_t *buf, size_t len, uint64_t seed)
    int sc_theta_union(sc_theta_compact **out, const sc_theta_compact *const *inp, size_t n, uint8_t lg_k, uint64_t seed, bint ordered)
    int sc_theta_intersection(sc_theta_compact **out, const sc_theta_compact *const *inp, size_t n, uint64_t seed, bint ordered)
    int sc_theta_a_not_b(sc_theta_compact **out, const sc_theta_compact *a, const sc_theta_compact *b, uint64_t seed, bint ordered)
    int sc_theta_jaccard(double *out, const sc_theta_compact *a, const sc_theta_compact *b, uint64_t seed)
    int sc_theta_conc_create(sc_concurrent **out, uint8_t lg_k, uint64_t seed, uint32_t writers, uint32_t buffer, uint64_t eager_limit)
    int sc_theta_conc_update_i64_array(sc_concurrent *c, uint32_t w, const int64_t *v, size_t n, const uint8_t *validity, int64_t off)
    int sc_theta_conc_update_f64_array(sc_concurrent *c, uint32_t w, const double *v, size_t n, const uint8_t *validity, int64_t off)
    int sc_theta_conc_update_str32_array(sc_concurrent *c, uint32_t w, const int32_t *o, const uint8_t *d, size_t n, const uint8_t *validity, int64_t off)
    int sc_theta_conc_update_str64_array(sc_concurrent *c, uint32_t w, const int64_t *o, const uint8_t *d, size_t n, const uint8_t *validity, int64_t off)
    int sc_theta_conc_snapshot(sc_concurrent *c, sc_theta_compact **out)

DEFAULT_SEED = 9001
_MAX = float(0x7fffffffffffffff)

# ---------------------------------------------------------------- columns -> raw chunks

cdef enum:
    KIND_I64 = 0
    KIND_F64 = 1
    KIND_STR32 = 2
    KIND_STR64 = 3


def _arrow_chunks(column):
    """Normalise a column to ``[(kind, values, data, validity, valid_off, n, keepalive)]``.

    Accepts NumPy arrays, pyarrow Array / ChunkedArray, Polars Series, anything exposing
    ``__arrow_c_array__`` / ``__arrow_c_stream__``, and Python sequences. Integers and bools
    become int64, floats float64 (as DataSketches hashes Python ints and floats); strings and
    binaries keep their bytes. The addresses stay valid while ``keepalive`` lives.
    Shared by the other sketch modules (``streamcell._hll``).
    """
    import numpy as np

    if isinstance(column, np.ndarray) and column.ndim == 1 and column.dtype.kind in "iubf":
        arr = column.astype(np.float64 if column.dtype.kind == "f" else np.int64, copy=False)
        arr = np.ascontiguousarray(arr)
        kind = KIND_F64 if column.dtype.kind == "f" else KIND_I64
        return [(kind, arr.__array_interface__["data"][0], 0, 0, 0, arr.shape[0], arr)]
    import pyarrow as pa

    if hasattr(column, "to_arrow") and not isinstance(column, (pa.Array, pa.ChunkedArray)):
        column = column.to_arrow()  # Polars Series
    if isinstance(column, pa.ChunkedArray):
        chunks = column.chunks
    elif isinstance(column, pa.Array):
        chunks = [column]
    elif hasattr(column, "__arrow_c_stream__"):
        chunks = pa.chunked_array(column).chunks
    else:
        chunks = [pa.array(column)]  # __arrow_c_array__, NumPy strings/objects, sequences
    return [c for chunk in chunks for c in _chunk_parts(pa, chunk)]


def _chunk_parts(pa, arr):
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_null(t) or len(arr) == 0:
        return []
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        if t != pa.int64():
            arr = arr.cast(pa.int64(), safe=False)
        kind, width = KIND_I64, 8
    elif pa.types.is_floating(t):
        if t != pa.float64():
            arr = arr.cast(pa.float64())
        kind, width = KIND_F64, 8
    elif pa.types.is_string(t) or pa.types.is_binary(t):
        kind, width = KIND_STR32, 4
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        kind, width = KIND_STR64, 8
    elif str(t) in ("string_view", "binary_view"):
        arr = arr.cast(pa.large_binary())
        kind, width = KIND_STR64, 8
    else:
        raise TypeError(f"cannot sketch a column of type {t}")
    bufs = arr.buffers()
    validity = bufs[0].address if (bufs[0] is not None and arr.null_count) else 0
    values = bufs[1].address + width * arr.offset
    data = 0
    if kind >= KIND_STR32 and bufs[2] is not None:
        data = bufs[2].address
    return [(kind, values, data, validity, arr.offset, len(arr), arr)]


cdef struct chunk_t:
    int kind
    const void *values
    const uint8_t *data
    const uint8_t *validity
    int64_t off
    size_t n


cdef chunk_t *_chunk_array(list parts) except NULL:
    cdef chunk_t *cs = <chunk_t *>PyMem_Malloc(sizeof(chunk_t) * (len(parts) + 1))
    if cs == NULL:
        raise MemoryError()
    for i, (kind, values, data, validity, off, n, _keep) in enumerate(parts):
        cs[i].kind = kind
        cs[i].values = <const void *><uintptr_t>values
        cs[i].data = <const uint8_t *><uintptr_t>data
        cs[i].validity = <const uint8_t *><uintptr_t>validity
        cs[i].off = off
        cs[i].n = n
    return cs


cdef int _ingest(sc_theta *s, const chunk_t *cs, size_t m) noexcept nogil:
    cdef int rc = 0
    cdef size_t i
    for i in range(m):
        if cs[i].kind == KIND_I64:
            rc = sc_theta_update_i64_array(s, <const int64_t *>cs[i].values, cs[i].n, cs[i].validity, cs[i].off)
        elif cs[i].kind == KIND_F64:
            rc = sc_theta_update_f64_array(s, <const double *>cs[i].values, cs[i].n, cs[i].validity, cs[i].off)
        elif cs[i].kind == KIND_STR32:
            rc = sc_theta_update_str32_array(s, <const int32_t *>cs[i].values, cs[i].data, cs[i].n, cs[i].validity, cs[i].off)
        else:
            rc = sc_theta_update_str64_array(s, <const int64_t *>cs[i].values, cs[i].data, cs[i].n, cs[i].validity, cs[i].off)
        if rc < 0:
            return rc
    return rc


cdef int _ingest_conc(sc_concurrent *c, uint32_t w, const chunk_t *cs, size_t m) noexcept nogil:
    cdef int rc = 0
    cdef size_t i
    for i in range(m):
        if cs[i].kind == KIND_I64:
            rc = sc_theta_conc_update_i64_array(c, w, <const int64_t *>cs[i].values, cs[i].n, cs[i].validity, cs[i].off)
        elif cs[i].kind == KIND_F64:
            rc = sc_theta_conc_update_f64_array(c, w, <const double *>cs[i].values, cs[i].n, cs[i].validity, cs[i].off)
        elif cs[i].kind == KIND_STR32:
            rc = sc_theta_conc_update_str32_array(c, w, <const int32_t *>cs[i].values, cs[i].data, cs[i].n, cs[i].validity, cs[i].off)
        else:
            rc = sc_theta_conc_update_str64_array(c, w, <const int64_t *>cs[i].values, cs[i].data, cs[i].n, cs[i].validity, cs[i].off)
        if rc < 0:
            return rc
    return rc


cdef int _check_std(int num_std) except -1:
    if num_std not in (1, 2, 3):
        raise ValueError("num_std must be 1, 2 or 3")
    return 0


# ---------------------------------------------------------------- compact sketch

cdef class CompactThetaSketch:
    """A read-only Θ sketch: a set-operation result, a snapshot, or deserialized bytes.

    Serializes to the Apache DataSketches compact Θ format (serial version 3), so
    ``datasketches.compact_theta_sketch.deserialize(s.to_bytes())`` loads it.
    """
    cdef sc_theta_compact *c
    cdef readonly uint64_t seed

    def __cinit__(self):
        self.c = NULL
        self.seed = DEFAULT_SEED

    def __dealloc__(self):
        sc_theta_compact_destroy(self.c)

    @staticmethod
    cdef CompactThetaSketch wrap(sc_theta_compact *c, uint64_t seed):
        cdef CompactThetaSketch out = CompactThetaSketch.__new__(CompactThetaSketch)
        out.c = c
        out.seed = seed
        return out

    @staticmethod
    def from_bytes(data, *, uint64_t seed=DEFAULT_SEED):
        """Load a DataSketches compact Θ image (serial version 3)."""
        cdef const uint8_t[::1] buf = memoryview(data).cast("B")
        cdef sc_theta_compact *c = NULL
        cdef int rc
        with nogil:
            rc = sc_theta_compact_deserialize(&c, &buf[0] if buf.shape[0] else NULL, buf.shape[0], seed)
        check_status(rc, "CompactThetaSketch.from_bytes")
        return CompactThetaSketch.wrap(c, seed)

    def to_bytes(self):
        """The DataSketches compact Θ image (serial version 3)."""
        cdef size_t n = sc_theta_compact_serialized_size(self.c)
        out = bytearray(n)
        cdef uint8_t[::1] buf = out
        cdef int rc
        with nogil:
            rc = sc_theta_compact_serialize(self.c, &buf[0], n)
        check_status(rc, "CompactThetaSketch.to_bytes")
        return bytes(out)

    def __reduce__(self):
        return (_compact_from_bytes, (self.to_bytes(), self.seed))

    def estimate(self):
        """Estimated number of distinct items."""
        return sc_theta_estimate_of(self.c.n, self.c.theta, self.c.empty)

    def lower_bound(self, int num_std=2):
        """Lower bound on the distinct count at ``num_std`` (1, 2 or 3) standard deviations."""
        _check_std(num_std)
        return sc_theta_lower_bound_of(self.c.n, self.c.theta, self.c.empty, num_std)

    def upper_bound(self, int num_std=2):
        """Upper bound on the distinct count at ``num_std`` (1, 2 or 3) standard deviations."""
        _check_std(num_std)
        return sc_theta_upper_bound_of(self.c.n, self.c.theta, self.c.empty, num_std)

    @property
    def theta(self):
        return self.c.theta / _MAX

    @property
    def theta64(self):
        return self.c.theta

    @property
    def num_retained(self):
        return self.c.n

    @property
    def is_empty(self):
        return bool(self.c.empty)

    @property
    def is_ordered(self):
        return bool(self.c.ordered)

    @property
    def is_estimation_mode(self):
        return self.c.theta < SC_THETA_MAX and not self.c.empty

    @property
    def seed_hash(self):
        return self.c.seed_hash

    def hashes(self):
        """The retained 63-bit hashes (a list of ints)."""
        return [self.c.entries[i] for i in range(self.c.n)]

    def __repr__(self):
        return (f"CompactThetaSketch(estimate={self.estimate():.6g}, retained={self.c.n}, "
                f"theta={self.theta:.6g}, empty={self.is_empty})")


def _compact_from_bytes(data, seed):
    return CompactThetaSketch.from_bytes(data, seed=seed)


# ---------------------------------------------------------------- update sketch

cdef class ThetaSketch:
    """Θ update sketch: distinct counting with lg_k (k = 2**lg_k nominal entries).

    Exact up to ~1.875·k distinct items, then relative standard error ≤ 1/sqrt(k - 1).
    Same hashing and QuickSelect rebuilds as DataSketches' ``update_theta_sketch(lg_k)``,
    so the same items in the same order give the same estimate and the same bytes.
    Not thread-safe: use ``ConcurrentThetaSketch`` for several writer threads.

    Examples
    --------
    >>> s = ThetaSketch(lg_k=12)
    >>> s.update_batch(np.arange(1000))
    >>> s.estimate()
    1000.0
    """
    cdef sc_theta *s

    def __cinit__(self, int lg_k=12, *, uint64_t seed=DEFAULT_SEED):
        self.s = NULL
        if lg_k < 5 or lg_k > 26:
            raise ValueError("lg_k must be in 5..26")
        check_status(sc_theta_create(&self.s, lg_k, seed), "ThetaSketch")

    def __dealloc__(self):
        sc_theta_destroy(self.s)

    def update(self, item):
        """Add one item: int (as int64), float (as double), str (UTF-8) or bytes."""
        cdef int rc
        cdef const uint8_t[::1] buf
        if isinstance(item, int):
            rc = sc_theta_update_i64(self.s, item)
        elif isinstance(item, float):
            rc = sc_theta_update_f64(self.s, item)
        else:
            if isinstance(item, str):
                item = (<str>item).encode("utf-8")
            buf = memoryview(item).cast("B")
            rc = sc_theta_update_bytes(self.s, &buf[0] if buf.shape[0] else NULL, buf.shape[0])
        check_status(rc, "ThetaSketch.update")

    def update_batch(self, column):
        """Add every item of a column in one native call that releases the GIL.

        ``column``: NumPy array, pyarrow Array/ChunkedArray, Polars Series, an object with
        ``__arrow_c_array__``/``__arrow_c_stream__``, or a sequence. Nulls are skipped.
        """
        parts = _arrow_chunks(column)
        cdef size_t m = len(parts)
        cdef chunk_t *cs = _chunk_array(parts)
        cdef int rc
        try:
            with nogil:
                rc = _ingest(self.s, cs, m)
        finally:
            PyMem_Free(cs)
        check_status(rc, "ThetaSketch.update_batch")

    def estimate(self):
        """Estimated number of distinct items (exact below ~1.875·k)."""
        return sc_theta_estimate_of(sc_theta_num_retained(self.s), sc_theta_theta64(self.s), sc_theta_is_empty(self.s))

    def lower_bound(self, int num_std=2):
        """Lower bound at ``num_std`` (1, 2 or 3) standard deviations."""
        _check_std(num_std)
        return sc_theta_lower_bound_of(sc_theta_num_retained(self.s), sc_theta_theta64(self.s), sc_theta_is_empty(self.s), num_std)

    def upper_bound(self, int num_std=2):
        """Upper bound at ``num_std`` (1, 2 or 3) standard deviations."""
        _check_std(num_std)
        return sc_theta_upper_bound_of(sc_theta_num_retained(self.s), sc_theta_theta64(self.s), sc_theta_is_empty(self.s), num_std)

    def trim(self):
        """Keep only the k smallest hashes (as DataSketches' ``trim()``)."""
        check_status(sc_theta_trim(self.s), "ThetaSketch.trim")

    def reset(self):
        sc_theta_reset(self.s)

    def copy(self):
        cdef ThetaSketch out = ThetaSketch.__new__(ThetaSketch, sc_theta_lg_k(self.s), seed=sc_theta_seed(self.s))
        sc_theta_destroy(out.s)
        out.s = NULL
        check_status(sc_theta_copy(&out.s, self.s), "ThetaSketch.copy")
        return out

    def compact(self, bint ordered=True):
        """A read-only ``CompactThetaSketch`` of the current state."""
        cdef sc_theta_compact *c = NULL
        with nogil:
            rc = sc_theta_compact_of(&c, self.s, ordered)
        check_status(rc, "ThetaSketch.compact")
        return CompactThetaSketch.wrap(c, sc_theta_seed(self.s))

    def to_bytes(self, bint ordered=True):
        """DataSketches compact Θ bytes (serial version 3)."""
        return self.compact(ordered).to_bytes()

    @staticmethod
    def from_bytes(data, *, uint64_t seed=DEFAULT_SEED):
        """Load DataSketches compact Θ bytes as a ``CompactThetaSketch``."""
        return CompactThetaSketch.from_bytes(data, seed=seed)

    def merge(self, *others, int lg_k=-1):
        """Union of this sketch and ``others`` (a ``CompactThetaSketch``)."""
        return theta_union([self, *others], lg_k=self.lg_k if lg_k < 0 else lg_k, seed=self.seed)

    @property
    def lg_k(self):
        return sc_theta_lg_k(self.s)

    @property
    def seed(self):
        return sc_theta_seed(self.s)

    @property
    def theta(self):
        return sc_theta_theta64(self.s) / _MAX

    @property
    def theta64(self):
        return sc_theta_theta64(self.s)

    @property
    def num_retained(self):
        return sc_theta_num_retained(self.s)

    @property
    def is_empty(self):
        return bool(sc_theta_is_empty(self.s))

    @property
    def is_estimation_mode(self):
        return sc_theta_theta64(self.s) < SC_THETA_MAX and not sc_theta_is_empty(self.s)

    def __repr__(self):
        return (f"ThetaSketch(lg_k={self.lg_k}, estimate={self.estimate():.6g}, "
                f"retained={self.num_retained}, theta={self.theta:.6g})")


cdef CompactThetaSketch _as_compact(x):
    if isinstance(x, CompactThetaSketch):
        return x
    if isinstance(x, ThetaSketch):
        return x.compact(True)
    if isinstance(x, (bytes, bytearray, memoryview)):
        return CompactThetaSketch.from_bytes(x)
    raise TypeError(f"expected a Θ sketch, got {type(x).__name__}")


cdef list _compacts(sketches):
    return [_as_compact(x) for x in sketches]


def theta_union(sketches, *, int lg_k=12, uint64_t seed=DEFAULT_SEED, bint ordered=True):
    """Union of Θ sketches: at most k = 2**lg_k hashes, as DataSketches' ``theta_union``."""
    cs = _compacts(sketches)
    cdef size_t n = len(cs), i
    cdef const sc_theta_compact **arr = <const sc_theta_compact **>PyMem_Malloc(sizeof(void *) * (n + 1))
    cdef sc_theta_compact *out = NULL
    cdef int rc
    if arr == NULL:
        raise MemoryError()
    for i in range(n):
        arr[i] = (<CompactThetaSketch>cs[i]).c
    try:
        with nogil:
            rc = sc_theta_union(&out, arr, n, lg_k, seed, ordered)
    finally:
        PyMem_Free(arr)
    check_status(rc, "theta_union")
    return CompactThetaSketch.wrap(out, seed)


def theta_intersection(sketches, *, uint64_t seed=DEFAULT_SEED, bint ordered=True):
    """Intersection of one or more Θ sketches, as DataSketches' ``theta_intersection``."""
    cs = _compacts(sketches)
    cdef size_t n = len(cs), i
    if n == 0:
        raise ValueError("theta_intersection needs at least one sketch")
    cdef const sc_theta_compact **arr = <const sc_theta_compact **>PyMem_Malloc(sizeof(void *) * n)
    cdef sc_theta_compact *out = NULL
    cdef int rc
    if arr == NULL:
        raise MemoryError()
    for i in range(n):
        arr[i] = (<CompactThetaSketch>cs[i]).c
    try:
        with nogil:
            rc = sc_theta_intersection(&out, arr, n, seed, ordered)
    finally:
        PyMem_Free(arr)
    check_status(rc, "theta_intersection")
    return CompactThetaSketch.wrap(out, seed)


def theta_a_not_b(a, b, *, uint64_t seed=DEFAULT_SEED, bint ordered=True):
    """Items of ``a`` not in ``b``, as DataSketches' ``theta_a_not_b``."""
    cdef CompactThetaSketch ca = _as_compact(a), cb = _as_compact(b)
    cdef sc_theta_compact *out = NULL
    cdef int rc
    with nogil:
        rc = sc_theta_a_not_b(&out, ca.c, cb.c, seed, ordered)
    check_status(rc, "theta_a_not_b")
    return CompactThetaSketch.wrap(out, seed)


def theta_jaccard(a, b, *, uint64_t seed=DEFAULT_SEED):
    """Jaccard similarity |A∩B|/|A∪B| as ``(lower, estimate, upper)`` (bounds at 2 std devs)."""
    cdef CompactThetaSketch ca = _as_compact(a), cb = _as_compact(b)
    cdef double out[3]
    cdef int rc
    with nogil:
        rc = sc_theta_jaccard(out, ca.c, cb.c, seed)
    check_status(rc, "theta_jaccard")
    return (out[0], out[1], out[2])


# ---------------------------------------------------------------- concurrent sketch

ConcurrentThetaEstimate = namedtuple(
    "ConcurrentThetaEstimate",
    ["estimate", "lower_bounds", "upper_bounds", "relaxed_upper_bounds", "relaxation",
     "exact", "eager", "propagations"],
)
ConcurrentThetaEstimate.__doc__ = """A live Θ estimate read without blocking the writers.

``lower_bounds``/``upper_bounds``: the sketch bounds at 1, 2, 3 standard deviations of what
the global sketch has absorbed; ``relaxation`` r = 2·N·b: the query may miss at most r
accepted updates that precede it, and ``relaxed_upper_bounds`` bound the distinct count of
everything that preceded the query (the retained count plus r). ``exact``: no sampling yet.
"""


cdef class ConcurrentThetaSketch:
    """A Θ sketch several threads update at once while any thread queries it (Rinberg et al.).

    Each of ``writers`` writer ids owns a double-buffered local buffer of ``buffer`` hashes;
    a native propagator thread merges full buffers into the global sketch and hands back
    theta to pre-filter updates. Small streams are propagated eagerly (exact answers);
    a query misses at most r = 2·writers·buffer preceding updates.

    Examples
    --------
    >>> cs = ConcurrentThetaSketch(lg_k=12, writers=2, buffer=64)
    >>> cs.update_batch(0, np.arange(10**6))       # from thread A
    >>> cs.update_batch(1, np.arange(10**6, 2 * 10**6))  # from thread B, concurrently
    >>> cs.estimate().estimate                      # from any thread, any time
    >>> cs.flush(); cs.snapshot().to_bytes()
    """
    cdef sc_concurrent *c
    cdef readonly int lg_k
    cdef readonly uint64_t seed
    cdef readonly uint32_t writers
    cdef readonly uint32_t buffer

    def __cinit__(self, int lg_k=12, *, int writers=1, int buffer=64, uint64_t seed=DEFAULT_SEED,
                  eager_limit=None):
        self.c = NULL
        if lg_k < 5 or lg_k > 26:
            raise ValueError("lg_k must be in 5..26")
        if writers < 1 or writers > 256 or buffer < 1:
            raise ValueError("writers must be in 1..256 and buffer >= 1")
        self.lg_k, self.seed, self.writers, self.buffer = lg_k, seed, writers, buffer
        cdef uint64_t limit = 0 if eager_limit is None else max(1, int(eager_limit))
        check_status(sc_theta_conc_create(&self.c, lg_k, seed, writers, buffer, limit),
                     "ConcurrentThetaSketch")

    def __dealloc__(self):
        if self.c != NULL:
            with nogil:
                sc_conc_destroy(self.c)

    def update_batch(self, int writer_id, column):
        """Writer ``writer_id`` adds a column (GIL released; nulls skipped).

        One thread at a time per writer id; different ids run in parallel.
        """
        if writer_id < 0 or writer_id >= <int>self.writers:
            raise ValueError(f"writer_id must be in 0..{self.writers - 1}")
        parts = _arrow_chunks(column)
        cdef size_t m = len(parts)
        cdef chunk_t *cs = _chunk_array(parts)
        cdef int rc
        try:
            with nogil:
                rc = _ingest_conc(self.c, writer_id, cs, m)
        finally:
            PyMem_Free(cs)
        if rc == SC_EFULL:
            raise RuntimeError(f"writer {writer_id} is in use by another thread")
        if rc == SC_ECLOSED:
            raise RuntimeError("ConcurrentThetaSketch is closed")
        check_status(rc, "ConcurrentThetaSketch.update_batch")

    def estimate(self):
        """The live estimate with its bounds and the relaxation r; never blocks writers."""
        cdef uint64_t w[8]
        cdef sc_conc_stats st
        sc_conc_summary(self.c, w, &st)
        cdef uint32_t n = <uint32_t>w[0]
        cdef uint64_t theta = w[1]
        cdef bint empty = w[2] != 0
        cdef uint64_t r = sc_conc_relaxation(self.c)
        cdef uint32_t nr = <uint32_t>min(n + r, 0xffffffff)
        return ConcurrentThetaEstimate(
            sc_theta_estimate_of(n, theta, empty),
            tuple([sc_theta_lower_bound_of(n, theta, empty, z) for z in (1, 2, 3)]),
            tuple([sc_theta_upper_bound_of(n, theta, empty, z) for z in (1, 2, 3)]),
            tuple([sc_theta_upper_bound_of(nr, theta, False, z) for z in (1, 2, 3)]),
            r, theta >= SC_THETA_MAX, bool(st.eager), st.propagations)

    def snapshot(self):
        """A ``CompactThetaSketch`` copy of the global sketch (waits for at most one merge)."""
        cdef sc_theta_compact *out = NULL
        cdef int rc
        with nogil:
            rc = sc_theta_conc_snapshot(self.c, &out)
        check_status(rc, "ConcurrentThetaSketch.snapshot")
        return CompactThetaSketch.wrap(out, self.seed)

    def flush(self):
        """Merge every writer's buffered updates (waits for in-flight batches of each writer).

        Afterwards the sketch equals a sequential ``ThetaSketch`` on the same items
        (trimmed to k in estimation mode, as a DataSketches union result is).
        """
        _conc_flush(self.c, "ConcurrentThetaSketch.flush")

    def close(self):
        """Flush and stop the propagator thread; later updates raise. Idempotent."""
        _conc_close(self.c, "ConcurrentThetaSketch.close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def relaxation(self):
        """r = 2·writers·buffer."""
        return sc_conc_relaxation(self.c)

    def __repr__(self):
        e = self.estimate()
        return (f"ConcurrentThetaSketch(lg_k={self.lg_k}, writers={self.writers}, "
                f"buffer={self.buffer}, estimate={e.estimate:.6g}, r={e.relaxation})")
