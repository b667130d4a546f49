# distutils: language = c
# distutils: sources = native/sketch/hll.c native/sketch/murmur3.c native/sketch/concurrent.c
"""streamcell._hll: HyperLogLog (HLL_8), DataSketches-compatible bytes.

Thin wrapper over native/sketch/hll.h; columns are normalised by ``streamcell._theta``'s
``_arrow_chunks`` (one implementation of the NumPy / Arrow / Polars intake).
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcpy

include "common/status.pxi"

from streamcell._theta import _arrow_chunks

cdef extern from "sketch/hll.h" nogil:
    ctypedef struct sc_hll:
        pass
    int sc_hll_create(sc_hll **out, uint8_t lg_k)
    void sc_hll_destroy(sc_hll *h)
    void sc_hll_reset(sc_hll *h)
    int sc_hll_copy(sc_hll **out, const sc_hll *h)
    int sc_hll_update_i64(sc_hll *h, int64_t v)
    int sc_hll_update_f64(sc_hll *h, double v)
    int sc_hll_update_bytes(sc_hll *h, const void *data, size_t len)
    int sc_hll_update_i64_array(sc_hll *h, const int64_t *v, size_t n, const uint8_t *validity, int64_t off)
    int sc_hll_update_f64_array(sc_hll *h, const double *v, size_t n, const uint8_t *validity, int64_t off)
    int sc_hll_update_str32_array(sc_hll *h, const int32_t *o, const uint8_t *d, size_t n, const uint8_t *validity, int64_t off)
    int sc_hll_update_str64_array(sc_hll *h, const int64_t *o, const uint8_t *d, size_t n, const uint8_t *validity, int64_t off)
    uint8_t sc_hll_lg_k(const sc_hll *h)
    bint sc_hll_is_empty(const sc_hll *h)
    bint sc_hll_is_out_of_order(const sc_hll *h)
    double sc_hll_estimate(const sc_hll *h)
    double sc_hll_lower_bound(const sc_hll *h, int z)
    double sc_hll_upper_bound(const sc_hll *h, int z)
    bint sc_hll_is_coupon_mode(const sc_hll *h)
    void sc_hll_registers(const sc_hll *h, uint8_t *out)
    int sc_hll_merge(sc_hll *dst, const sc_hll *src)
    size_t sc_hll_serialized_size(const sc_hll *h)
    int sc_hll_serialize(const sc_hll *h, uint8_t *buf, size_t cap)
    int sc_hll_deserialize(sc_hll **out, const uint8_t *buf, size_t len)

include "sketch/concurrent.pxi"

cdef extern from "sketch/hll.h" nogil:
    const sc_sketch_vtable sc_hll_vtable

cdef enum:
    KIND_I64 = 0
    KIND_F64 = 1
    KIND_STR32 = 2
    KIND_STR64 = 3


cdef struct chunk_t:
    int kind
    const void *values
    const uint8_t *data
    const uint8_t *validity
    int64_t off
    size_t n


cdef int _ingest(sc_hll *h, const chunk_t *cs, size_t m) noexcept nogil:
    cdef int rc = 0
    cdef size_t i
    for i in range(m):
        if cs[i].kind == KIND_I64:
            rc = sc_hll_update_i64_array(h, <const int64_t *>cs[i].values, cs[i].n, cs[i].validity, cs[i].off)
        elif cs[i].kind == KIND_F64:
            rc = sc_hll_update_f64_array(h, <const double *>cs[i].values, cs[i].n, cs[i].validity, cs[i].off)
        elif cs[i].kind == KIND_STR32:
            rc = sc_hll_update_str32_array(h, <const int32_t *>cs[i].values, cs[i].data, cs[i].n, cs[i].validity, cs[i].off)
        else:
            rc = sc_hll_update_str64_array(h, <const int64_t *>cs[i].values, cs[i].data, cs[i].n, cs[i].validity, cs[i].off)
        if rc < 0:
            return rc
    return rc


cdef int _check_std(int num_std) except -1:
    if num_std not in (1, 2, 3):
        raise ValueError("num_std must be 1, 2 or 3")
    return 0


cdef class HllSketch:
    """HyperLogLog distinct counter (HLL_8: 2**lg_k one-byte registers).

    Relative standard error ≈ 0.83/sqrt(k) while built by updates (HIP estimator),
    ≈ 1.04/sqrt(k) after a union. Bytes load in DataSketches' ``hll_sketch.deserialize``
    with the same estimate; DataSketches images (LIST, SET, HLL_4/6/8) load here.

    Examples
    --------
    >>> h = HllSketch(lg_k=12)
    >>> h.update_batch(pl.Series(["a", "b", "a"]))
    >>> round(h.estimate())
    2
    """
    cdef sc_hll *h

    def __cinit__(self, int lg_k=12, tgt_type="HLL_8"):
        self.h = NULL
        if tgt_type != "HLL_8":
            raise ValueError("only tgt_type='HLL_8' is implemented")
        if lg_k < 4 or lg_k > 21:
            raise ValueError("lg_k must be in 4..21")
        check_status(sc_hll_create(&self.h, lg_k), "HllSketch")

    def __dealloc__(self):
        sc_hll_destroy(self.h)

    def update(self, item):
        """Add one item: int (as int64), float (as double), str (UTF-8) or bytes."""
        cdef const uint8_t[::1] buf
        cdef int rc = 0
        if isinstance(item, int):
            rc = sc_hll_update_i64(self.h, item)
        elif isinstance(item, float):
            rc = sc_hll_update_f64(self.h, item)
        else:
            if isinstance(item, str):
                item = (<str>item).encode("utf-8")
            buf = memoryview(item).cast("B")
            if buf.shape[0]:
                rc = sc_hll_update_bytes(self.h, &buf[0], buf.shape[0])
        check_status(rc, "HllSketch.update")

    def update_batch(self, column):
        """Add a NumPy / Arrow / Polars column in one native call with the GIL released."""
        parts = _arrow_chunks(column)
        cdef size_t m = len(parts)
        cdef chunk_t *cs = <chunk_t *>PyMem_Malloc(sizeof(chunk_t) * (m + 1))
        cdef int rc
        if cs == NULL:
            raise MemoryError()
        try:
            for i, (kind, values, data, validity, off, n, _keep) in enumerate(parts):
                cs[i].kind = kind
                cs[i].values = <const void *><uintptr_t>values
                cs[i].data = <const uint8_t *><uintptr_t>data
                cs[i].validity = <const uint8_t *><uintptr_t>validity
                cs[i].off = off
                cs[i].n = n
            with nogil:
                rc = _ingest(self.h, cs, m)
        finally:
            PyMem_Free(cs)
        check_status(rc, "HllSketch.update_batch")

    def estimate(self):
        return sc_hll_estimate(self.h)

    def lower_bound(self, int num_std=2):
        _check_std(num_std)
        return sc_hll_lower_bound(self.h, num_std)

    def upper_bound(self, int num_std=2):
        _check_std(num_std)
        return sc_hll_upper_bound(self.h, num_std)

    def reset(self):
        sc_hll_reset(self.h)

    def copy(self):
        cdef HllSketch out = HllSketch.__new__(HllSketch, sc_hll_lg_k(self.h))
        sc_hll_destroy(out.h)
        out.h = NULL
        check_status(sc_hll_copy(&out.h, self.h), "HllSketch.copy")
        return out

    def merge(self, *others, lg_k=None):
        """Union of this sketch and ``others`` as a new sketch (lg_k: the smallest given)."""
        return hll_union([self, *others], lg_k=lg_k)

    def to_bytes(self):
        """DataSketches HLL image: a compact LIST or SET in coupon mode, else HLL mode (HLL_8)."""
        cdef size_t n = sc_hll_serialized_size(self.h)
        out = bytearray(n)
        cdef uint8_t[::1] buf = out
        check_status(sc_hll_serialize(self.h, &buf[0], n), "HllSketch.to_bytes")
        return bytes(out)

    @staticmethod
    def from_bytes(data):
        """Load a DataSketches HLL image (LIST, SET, or HLL mode of HLL_4 / HLL_6 / HLL_8)."""
        cdef const uint8_t[::1] buf = memoryview(data).cast("B")
        cdef sc_hll *h = NULL
        cdef int rc
        with nogil:
            rc = sc_hll_deserialize(&h, &buf[0] if buf.shape[0] else NULL, buf.shape[0])
        check_status(rc, "HllSketch.from_bytes")
        cdef HllSketch out = HllSketch.__new__(HllSketch, 4)
        sc_hll_destroy(out.h)
        out.h = h
        return out

    def __reduce__(self):
        return (HllSketch.from_bytes, (self.to_bytes(),))

    def registers(self):
        """The 2**lg_k register values as bytes (in coupon mode: those its coupons set)."""
        out = bytearray(1 << sc_hll_lg_k(self.h))
        cdef uint8_t[::1] view = out
        sc_hll_registers(self.h, &view[0])
        return bytes(out)

    @property
    def lg_k(self):
        return sc_hll_lg_k(self.h)

    @property
    def is_empty(self):
        return bool(sc_hll_is_empty(self.h))

    @property
    def is_coupon_mode(self):
        """True while the sketch holds its distinct coupons (small cardinalities, exact)."""
        return bool(sc_hll_is_coupon_mode(self.h))

    @property
    def is_out_of_order(self):
        return bool(sc_hll_is_out_of_order(self.h))

    def __repr__(self):
        return f"HllSketch(lg_k={self.lg_k}, estimate={self.estimate():.6g})"


def hll_union(sketches, *, lg_k=None):
    """Union of HLL sketches (registers: max). The result's lg_k is the smallest of the
    inputs' and ``lg_k``; larger sketches fold down, as in DataSketches' ``hll_union``."""
    items = list(sketches)
    for x in items:
        if not isinstance(x, HllSketch):
            raise TypeError(f"expected HllSketch, got {type(x).__name__}")
    target = min([(<HllSketch>x).lg_k for x in items] + ([lg_k] if lg_k is not None else [21]))
    cdef HllSketch out = HllSketch(target)
    for x in items:
        check_status(sc_hll_merge(out.h, (<HllSketch>x).h), "hll_union")
    return out


# ---------------------------------------------------------------------------------------
# concurrent HLL (Rinberg et al.'s framework over the HLL vtable)

cdef int _conc_ingest(sc_concurrent *c, uint32_t w, const chunk_t *cs, size_t m) noexcept nogil:
    """Writer w adds the chunks in pieces of at most `room` rows, reporting each piece."""
    cdef int rc = sc_conc_writer_enter(c, w)
    cdef size_t i, pos, take
    cdef uint64_t room
    cdef sc_hll *loc
    cdef chunk_t piece
    if rc != 0:
        return rc
    for i in range(m):
        pos = 0
        while pos < cs[i].n and rc >= 0:
            loc = <sc_hll *>sc_conc_local(c, w)
            room = sc_conc_room(c, w)
            if room == 0:
                room = 1
            take = cs[i].n - pos if cs[i].n - pos < room else <size_t>room
            piece = cs[i]
            piece.n = take
            piece.off = cs[i].off + <int64_t>pos
            if piece.kind == KIND_I64:
                piece.values = <const int64_t *>cs[i].values + pos
            elif piece.kind == KIND_F64:
                piece.values = <const double *>cs[i].values + pos
            elif piece.kind == KIND_STR32:
                piece.values = <const int32_t *>cs[i].values + pos
            else:
                piece.values = <const int64_t *>cs[i].values + pos
            rc = _ingest(loc, &piece, 1)
            if rc >= 0:
                rc = sc_conc_added(c, w, take)
            pos += take
        if rc < 0:
            break
    sc_conc_writer_exit(c, w)
    return rc if rc < 0 else 0


cdef class ConcurrentHllSketch:
    """HLL_8 sketch several threads update at once (Rinberg et al., Algorithm 2).

    Each writer id owns a double-buffered local HLL; a propagator merges every ``buffer`` rows
    into the global sketch. ``estimate()`` reads the last published estimate lock-free and
    misses at most ``relaxation`` = 2·writers·buffer preceding rows; ``snapshot()`` is an
    HllSketch copy; after ``flush()`` nothing is missing. HLL is always lazy (it keeps no
    update count to switch on). One thread at a time per writer id.
    """

    cdef sc_concurrent *c
    cdef uint8_t lg_k
    cdef readonly uint32_t writers
    cdef readonly uint64_t buffer

    def __cinit__(self, *args, **kwargs):
        self.c = NULL

    def __init__(self, int lg_k=12, *, int writers=1, buffer=1024):
        cdef sc_conc_config cc
        if lg_k < 4 or lg_k > 21:
            raise ValueError(f"ConcurrentHllSketch: lg_k must be in 4..21, got {lg_k}")
        _conc_check_config("ConcurrentHllSketch", writers, buffer)
        self.lg_k = lg_k
        self.writers = writers
        self.buffer = int(buffer)
        cc.vt = &sc_hll_vtable
        cc.global_config = &self.lg_k
        cc.local_config = NULL
        cc.writers = writers
        cc.buffer = self.buffer
        cc.eager_limit = 0
        check_status(sc_conc_create(&self.c, &cc), "ConcurrentHllSketch")

    def __dealloc__(self):
        if self.c != NULL:
            with nogil:
                sc_conc_destroy(self.c)
            self.c = NULL

    def update_batch(self, int writer_id, column):
        """Writer ``writer_id`` adds a NumPy / Arrow / Polars column (GIL released)."""
        _conc_check_writer("ConcurrentHllSketch", writer_id, self.writers)
        parts = _arrow_chunks(column)
        cdef size_t m = len(parts)
        cdef chunk_t *cs = <chunk_t *>PyMem_Malloc(sizeof(chunk_t) * (m + 1))
        cdef int rc
        cdef uint32_t w = writer_id
        if cs == NULL:
            raise MemoryError()
        try:
            for i, (kind, values, data, validity, off, n, _keep) in enumerate(parts):
                cs[i].kind = kind
                cs[i].values = <const void *><uintptr_t>values
                cs[i].data = <const uint8_t *><uintptr_t>data
                cs[i].validity = <const uint8_t *><uintptr_t>validity
                cs[i].off = off
                cs[i].n = n
            with nogil:
                rc = _conc_ingest(self.c, w, cs, m)
        finally:
            PyMem_Free(cs)
        check_status(rc, "ConcurrentHllSketch.update_batch")

    def estimate(self):
        """The last published global estimate (lock-free; never blocks writers)."""
        cdef uint64_t words[8]
        cdef sc_conc_stats st
        cdef double est
        sc_conc_summary(self.c, words, &st)
        memcpy(&est, &words[0], 8)
        return est

    @property
    def relaxation(self):
        """r = 2·writers·buffer: the most preceding rows an estimate may miss."""
        return sc_conc_relaxation(self.c)

    def snapshot(self):
        """An HllSketch copy of the global sketch (one deep copy under the merge lock)."""
        cdef void *out = NULL
        cdef int rc
        cdef HllSketch h = HllSketch(self.lg_k)
        with nogil:
            rc = sc_conc_snapshot(self.c, &out)
        check_status(rc, "ConcurrentHllSketch.snapshot")
        sc_hll_destroy(h.h)
        h.h = <sc_hll *>out
        return h

    def flush(self):
        """Merge every writer's partial buffer; afterwards estimates miss nothing."""
        _conc_flush(self.c, "ConcurrentHllSketch.flush")

    def close(self):
        """Flush and stop the propagator (idempotent)."""
        _conc_close(self.c, "ConcurrentHllSketch.close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
