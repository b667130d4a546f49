# distutils: language = c
# distutils: sources = native/sketch/kll.c native/sketch/concurrent.c
"""streamcell._kll: KLL quantiles sketches (doubles, floats), DataSketches-compatible.

Thin wrapper over native/sketch/kll.h: inputs are collected with the GIL, the work runs in
one ``with nogil:`` call, and every status goes through ``check_status``.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t

import numpy as np

include "common/status.pxi"

cdef extern from "sketch/kll.h" nogil:
    ctypedef struct sc_kll:
        uint16_t k
        uint16_t min_k
    ctypedef struct sc_kll_config:
        uint32_t k
        uint64_t seed
    ctypedef enum sc_kll_kind:
        SC_KLL_DOUBLE
        SC_KLL_FLOAT
    int SC_KLL_DEFAULT_K
    int sc_kll_new(sc_kll **out, sc_kll_kind kind, const sc_kll_config *cfg)
    void sc_kll_destroy(sc_kll *sk)
    void sc_kll_reset(sc_kll *sk)
    int sc_kll_copy(sc_kll **out, const sc_kll *sk)
    int sc_kll_update(sc_kll *sk, double x)
    int sc_kll_update_f64(sc_kll *sk, const double *x, size_t n, const uint8_t *validity, size_t off)
    int sc_kll_update_f32(sc_kll *sk, const float *x, size_t n, const uint8_t *validity, size_t off)
    int sc_kll_update_i64(sc_kll *sk, const int64_t *x, size_t n, const uint8_t *validity, size_t off)
    int sc_kll_merge(sc_kll *dst, const sc_kll *src)
    uint64_t sc_kll_n(const sc_kll *sk)
    int sc_kll_is_empty(const sc_kll *sk)
    int sc_kll_is_estimation_mode(const sc_kll *sk)
    uint32_t sc_kll_num_retained(const sc_kll *sk)
    double sc_kll_min(const sc_kll *sk)
    double sc_kll_max(const sc_kll *sk)
    double sc_kll_rank_error_for_k(uint32_t k, int pmf)
    double sc_kll_normalized_rank_error(const sc_kll *sk, int pmf)
    int sc_kll_ranks(const sc_kll *sk, const double *x, size_t m, int inclusive, double *out)
    int sc_kll_quantiles(const sc_kll *sk, const double *r, size_t m, int inclusive, double *out)
    int sc_kll_cdf(const sc_kll *sk, const double *s, size_t m, int inclusive, double *out)
    int sc_kll_pmf(const sc_kll *sk, const double *s, size_t m, int inclusive, double *out)
    size_t sc_kll_serialized_size(const sc_kll *sk)
    int sc_kll_serialize(const sc_kll *sk, uint8_t *buf, size_t cap, size_t *written)
    int sc_kll_deserialize(sc_kll **out, sc_kll_kind kind, const uint8_t *buf, size_t n,
                           uint64_t seed)
    int sc_kll_check(const sc_kll *sk)

include "sketch/concurrent.pxi"

cdef extern from "sketch/kll.h" nogil:
    const sc_sketch_vtable sc_kll_double_vtable


# ---------------------------------------------------------------------------------------
# columns: NumPy / Arrow / Polars (or any sequence) -> contiguous typed chunks + validity

_DIRECT = {"float64": 0, "float32": 1, "int64": 2}


def _column_chunks(values):
    """Yield (ndarray, validity ndarray|None, bit_offset) with dtype float64/float32/int64."""
    mod = type(values).__module__
    if mod.startswith("polars"):
        values = values.to_arrow()
        mod = type(values).__module__
    if mod.startswith("pyarrow"):
        import pyarrow as pa
        import pyarrow.compute as pc

        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        for arr in chunks:
            if str(arr.type) not in _DIRECT:
                arr = pc.cast(arr, pa.float64())
            if len(arr) == 0:
                continue
            dtype = np.dtype(str(arr.type))
            bufs = arr.buffers()
            data = np.frombuffer(bufs[1], dtype=dtype, count=arr.offset + len(arr))[arr.offset:]
            validity = None
            if arr.null_count and bufs[0] is not None:
                validity = np.frombuffer(bufs[0], dtype=np.uint8)
            yield data, validity, arr.offset
        return
    arr = np.asarray(values)
    if arr.dtype.name not in _DIRECT:
        arr = arr.astype(np.float64)
    yield np.ascontiguousarray(arr.reshape(-1)), None, 0


cdef int _ingest(sc_kll *sk, arr, validity, size_t offset) except -1:
    cdef const double[::1] d
    cdef const float[::1] f
    cdef const int64_t[::1] i
    cdef const uint8_t[::1] vb
    cdef const uint8_t *vp = NULL
    cdef size_t n = arr.shape[0]
    cdef int code = 0
    if validity is not None:
        vb = validity
        vp = &vb[0]
    kind = _DIRECT[arr.dtype.name]
    if n == 0:
        return 0
    if kind == 0:
        d = arr
        with nogil:
            code = sc_kll_update_f64(sk, &d[0], n, vp, offset)
    elif kind == 1:
        f = arr
        with nogil:
            code = sc_kll_update_f32(sk, &f[0], n, vp, offset)
    else:
        i = arr
        with nogil:
            code = sc_kll_update_i64(sk, &i[0], n, vp, offset)
    return check_status(code, "kll.update")


cdef uint64_t _seed(seed) except? 0:
    if seed is None:
        return 0
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    return s if s else 0x9E3779B97F4A7C15


cdef _as_f64(values):
    return np.ascontiguousarray(np.asarray(values, dtype=np.float64).reshape(-1))


# ---------------------------------------------------------------------------------------


cdef class _KllSketch:
    """Common implementation of KllDoublesSketch and KllFloatsSketch (not public)."""

    cdef sc_kll *sk
    cdef sc_kll_kind kind

    def __cinit__(self, *args, **kwargs):
        self.sk = NULL

    def __dealloc__(self):
        if self.sk is not NULL:
            sc_kll_destroy(self.sk)
            self.sk = NULL

    cdef _init(self, sc_kll_kind kind, k, seed):
        cdef sc_kll_config cfg
        if not (8 <= k <= 65535):
            raise ValueError(f"k must be in [8, 65535], got {k}")
        cfg.k = k
        cfg.seed = _seed(seed)
        self.kind = kind
        check_status(sc_kll_new(&self.sk, kind, &cfg), "kll.new")

    # -- updates ---------------------------------------------------------------------
    def update(self, values):
        """Add one number, or every number of a column (NaN and nulls are ignored)."""
        cdef double x
        cdef int code
        if isinstance(values, (int, float, np.number)):
            x = values
            code = sc_kll_update(self.sk, x)
            check_status(code, "kll.update")
            return
        for arr, validity, offset in _column_chunks(values):
            _ingest(self.sk, arr, validity, offset)

    def update_batch(self, column):
        """Add every number of a column (NumPy / Arrow / Polars / sequence), GIL released."""
        for arr, validity, offset in _column_chunks(column):
            _ingest(self.sk, arr, validity, offset)

    def merge(self, _KllSketch other):
        """Merge ``other`` (same kind) into this sketch."""
        cdef int code
        if type(other) is not type(self):
            raise TypeError(f"cannot merge {type(other).__name__} into {type(self).__name__}")
        with nogil:
            code = sc_kll_merge(self.sk, other.sk)
        check_status(code, "kll.merge")

    def reset(self):
        """Make the sketch empty again (keeps k and the random stream)."""
        sc_kll_reset(self.sk)

    # -- properties ------------------------------------------------------------------
    @property
    def k(self):
        return self.sk.k

    @property
    def min_k(self):
        return self.sk.min_k

    @property
    def n(self):
        return sc_kll_n(self.sk)

    @property
    def num_retained(self):
        return sc_kll_num_retained(self.sk)

    @property
    def is_empty(self):
        return bool(sc_kll_is_empty(self.sk))

    @property
    def is_estimation_mode(self):
        return bool(sc_kll_is_estimation_mode(self.sk))

    @property
    def min_value(self):
        return sc_kll_min(self.sk)

    @property
    def max_value(self):
        return sc_kll_max(self.sk)

    def __len__(self):
        return sc_kll_n(self.sk)

    # -- queries ---------------------------------------------------------------------
    def get_ranks(self, values, *, bint inclusive=False):
        """Normalized ranks of many values (ndarray); NaN for an empty sketch."""
        cdef const double[::1] x = _as_f64(values)
        out = np.empty(x.shape[0], dtype=np.float64)
        cdef double[::1] o = out
        cdef int code = 0
        if x.shape[0]:
            with nogil:
                code = sc_kll_ranks(self.sk, &x[0], x.shape[0], inclusive, &o[0])
        check_status(code, "kll.get_ranks")
        return out

    def get_rank(self, double value, *, bint inclusive=False):
        """Normalized rank of ``value``: weight of items < value (<= if inclusive) over n."""
        cdef double out
        check_status(sc_kll_ranks(self.sk, &value, 1, inclusive, &out), "kll.get_rank")
        return out

    def get_quantiles(self, ranks, *, bint inclusive=False):
        """Quantiles at many normalized ranks in [0, 1] (ndarray)."""
        cdef const double[::1] r = _as_f64(ranks)
        out = np.empty(r.shape[0], dtype=np.float64)
        cdef double[::1] o = out
        cdef int code = 0
        if r.shape[0]:
            with nogil:
                code = sc_kll_quantiles(self.sk, &r[0], r.shape[0], inclusive, &o[0])
        check_status(code, "kll.get_quantiles")
        return out

    def get_quantile(self, double rank, *, bint inclusive=False):
        """The retained item at normalized ``rank`` (see the C header for the exact rule)."""
        cdef double out
        check_status(sc_kll_quantiles(self.sk, &rank, 1, inclusive, &out), "kll.get_quantile")
        return out

    def _split_query(self, split_points, bint inclusive, bint pmf):
        cdef const double[::1] s = _as_f64(split_points)
        cdef size_t m = s.shape[0]
        cdef int code
        if sc_kll_is_empty(self.sk):
            return np.empty(0, dtype=np.float64)
        out = np.empty(m + 1, dtype=np.float64)
        cdef double[::1] o = out
        cdef const double *sp = &s[0] if m else NULL
        with nogil:
            if pmf:
                code = sc_kll_pmf(self.sk, sp, m, inclusive, &o[0])
            else:
                code = sc_kll_cdf(self.sk, sp, m, inclusive, &o[0])
        if code == SC_EINVAL:
            raise ValueError("split points must be unique, monotonically increasing and not NaN")
        check_status(code, "kll.get_pmf" if pmf else "kll.get_cdf")
        return out

    def get_pmf(self, split_points, *, bint inclusive=False):
        """Approximate mass of the m+1 intervals defined by m increasing split points."""
        return self._split_query(split_points, inclusive, True)

    def get_cdf(self, split_points, *, bint inclusive=False):
        """Approximate CDF at each split point, then 1.0 (m+1 values)."""
        return self._split_query(split_points, inclusive, False)

    def normalized_rank_error(self, bint pmf=False):
        """This sketch's rank error (uses min_k): 2.296/k^0.9723, or 2.446/k^0.9433 for PMF."""
        return sc_kll_normalized_rank_error(self.sk, pmf)

    @staticmethod
    def get_normalized_rank_error(k, bint pmf=False):
        """Rank error for a given k (single-sided, or double-sided when ``pmf``)."""
        return sc_kll_rank_error_for_k(k, pmf)

    # -- bytes -----------------------------------------------------------------------
    def to_bytes(self):
        """Serialize in the Apache DataSketches KLL compact format."""
        cdef size_t size = sc_kll_serialized_size(self.sk), written = 0
        out = PyBytes_FromStringAndSize(NULL, size)
        cdef uint8_t *buf = <uint8_t *>PyBytes_AS_STRING(out)
        cdef int code
        with nogil:
            code = sc_kll_serialize(self.sk, buf, size, &written)
        check_status(code, "kll.to_bytes")
        return out

    serialize = to_bytes

    cdef _set_from_bytes(self, sc_kll_kind kind, data, seed):
        cdef const uint8_t[::1] b = memoryview(data).cast("B")
        cdef uint64_t s = _seed(seed)
        cdef int code
        cdef size_t n = b.shape[0]
        cdef const uint8_t *p = &b[0] if n else NULL
        self.kind = kind
        with nogil:
            code = sc_kll_deserialize(&self.sk, kind, p, n, s)
        check_status(code, "kll.from_bytes")
        return self

    def copy(self):
        """Deep copy (including the random stream state)."""
        cdef _KllSketch c = type(self).__new__(type(self))
        c.kind = self.kind
        check_status(sc_kll_copy(&c.sk, self.sk), "kll.copy")
        return c

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return (type(self).from_bytes, (self.to_bytes(),))

    def _check(self):
        """Run the native invariant checks (tests)."""
        check_status(sc_kll_check(self.sk), "kll.check")

    def __repr__(self):
        return (f"{type(self).__name__}(k={self.k}, n={self.n}, retained={self.num_retained}, "
                f"min={self.min_value}, max={self.max_value})")


cdef class KllDoublesSketch(_KllSketch):
    """KLL quantiles sketch over float64 values, byte-compatible with DataSketches.

    Parameters
    ----------
    k : int, default 200
        Accuracy parameter in [8, 65535]; normalized rank error ~ 2.296 / k**0.9723
        (1.33% at k=200, 99% confidence).
    seed : int, optional (keyword-only)
        Seed of the compaction coin flips. Same seed and same input give the same sketch.
        None draws a distinct seed per sketch.

    Examples
    --------
    >>> import numpy as np
    >>> sk = KllDoublesSketch(200, seed=1)
    >>> sk.update(np.arange(1000.0))
    >>> sk.n, sk.get_quantile(0.5)
    (1000, 499.0)

    Backends: standalone everywhere; the native backend also runs it concurrently.
    """

    def __init__(self, int k=200, *, seed=None):
        self._init(SC_KLL_DOUBLE, k, seed)

    @classmethod
    def from_bytes(cls, data, *, seed=None):
        """Load a sketch serialized here or by DataSketches ``kll_doubles_sketch``."""
        cdef KllDoublesSketch sk = cls.__new__(cls)
        return sk._set_from_bytes(SC_KLL_DOUBLE, data, seed)

    deserialize = from_bytes


cdef class KllFloatsSketch(_KllSketch):
    """KLL quantiles sketch over float32 values, byte-compatible with DataSketches.

    Every input is rounded to float32. Parameters and methods as ``KllDoublesSketch``.

    Examples
    --------
    >>> sk = KllFloatsSketch(seed=1)
    >>> sk.update([0.5, 1.5, 2.5])
    >>> sk.get_quantile(0.5, inclusive=True)
    1.5
    """

    def __init__(self, int k=200, *, seed=None):
        self._init(SC_KLL_FLOAT, k, seed)

    @classmethod
    def from_bytes(cls, data, *, seed=None):
        """Load a sketch serialized here or by DataSketches ``kll_floats_sketch``."""
        cdef KllFloatsSketch sk = cls.__new__(cls)
        return sk._set_from_bytes(SC_KLL_FLOAT, data, seed)

    deserialize = from_bytes


# ---------------------------------------------------------------------------------------
# concurrent KLL (Rinberg et al.'s framework over the KLL vtable, native/sketch/concurrent.h)

cdef int _conc_feed(sc_concurrent *c, uint32_t w, const double *x, size_t n,
                    const uint8_t *vp, size_t off) noexcept nogil:
    """Writer w adds x[0:n] in pieces of at most `room` accepted updates."""
    cdef int rc = sc_conc_writer_enter(c, w)
    cdef size_t pos = 0, take
    cdef uint64_t room, before, added
    cdef sc_kll *loc
    if rc != 0:
        return rc
    while pos < n:
        loc = <sc_kll *>sc_conc_local(c, w)
        room = sc_conc_room(c, w)
        if room == 0:
            room = 1
        take = n - pos if n - pos < room else <size_t>room
        before = sc_kll_n(loc)
        rc = sc_kll_update_f64(loc, x + pos, take, vp, off + pos)
        if rc < 0:
            break
        added = sc_kll_n(loc) - before  # NaN and nulls are not updates
        if added:
            rc = sc_conc_added(c, w, added)
            if rc < 0:
                break
        pos += take
    sc_conc_writer_exit(c, w)
    return rc if rc < 0 else 0


cdef class ConcurrentKllDoublesSketch:
    """KLL doubles sketch several threads update at once (Rinberg et al., Algorithm 2).

    Each of ``writers`` writer ids owns a double-buffered local KLL sketch of ``buffer``
    updates; a propagator thread merges full buffers into the global sketch. While the global
    sketch holds fewer than ``eager_limit`` items (default k, where KLL is still exact) every
    update is merged at once. Queries (``n``, ``snapshot()``, ``get_quantile``) run from any
    thread without blocking writers and miss at most ``relaxation`` = 2·writers·buffer of the
    updates that precede them. After ``flush()`` nothing is missing.

    One thread at a time per writer id; a second thread on a busy id gets an error.
    """

    cdef sc_concurrent *c
    cdef sc_kll_config cfg
    cdef readonly uint32_t writers
    cdef readonly uint64_t buffer

    def __cinit__(self, *args, **kwargs):
        self.c = NULL

    def __init__(self, int k=200, *, int writers=1, buffer=64, seed=None, eager_limit=None):
        cdef sc_conc_config cc
        if not (8 <= k <= 65535):
            raise ValueError(f"ConcurrentKllDoublesSketch: k must be in [8, 65535], got {k}")
        _conc_check_config("ConcurrentKllDoublesSketch", writers, buffer)
        self.cfg.k = k
        self.cfg.seed = _seed(seed)
        self.writers = writers
        self.buffer = int(buffer)
        cc.vt = &sc_kll_double_vtable
        cc.global_config = &self.cfg
        cc.local_config = NULL
        cc.writers = writers
        cc.buffer = self.buffer
        cc.eager_limit = k if eager_limit is None else max(0, int(eager_limit))
        check_status(sc_conc_create(&self.c, &cc), "ConcurrentKllDoublesSketch")

    def __dealloc__(self):
        if self.c != NULL:
            with nogil:
                sc_conc_destroy(self.c)
            self.c = NULL

    cdef _live(self):
        if self.c == NULL:
            raise ValueError("ConcurrentKllDoublesSketch is closed")

    def update_batch(self, int writer_id, column):
        """Writer ``writer_id`` adds a column of numbers (GIL released; NaN/nulls skipped)."""
        cdef const double[::1] d
        cdef const uint8_t[::1] vb
        cdef const uint8_t *vp
        cdef size_t n, off
        cdef int rc
        self._live()
        _conc_check_writer("ConcurrentKllDoublesSketch", writer_id, self.writers)
        for arr, validity, offset in _column_chunks(column):
            d = np.ascontiguousarray(arr, dtype=np.float64)
            n = d.shape[0]
            if n == 0:
                continue
            vp = NULL
            if validity is not None:
                vb = validity
                vp = &vb[0]
            off = offset
            with nogil:
                rc = _conc_feed(self.c, writer_id, &d[0], n, vp, off)
            check_status(rc, "ConcurrentKllDoublesSketch.update_batch")

    @property
    def n(self):
        """Items in the global sketch at the last publish (lock-free read)."""
        cdef uint64_t w[8]
        cdef sc_conc_stats st
        self._live()
        sc_conc_summary(self.c, w, &st)
        return st.n_global

    @property
    def eager(self):
        cdef uint64_t w[8]
        cdef sc_conc_stats st
        self._live()
        sc_conc_summary(self.c, w, &st)
        return bool(st.eager)

    @property
    def relaxation(self):
        """r = 2·writers·buffer: the most preceding updates a query may miss."""
        self._live()
        return sc_conc_relaxation(self.c)

    def snapshot(self):
        """A KllDoublesSketch copy of the global sketch (one deep copy under the merge lock)."""
        cdef void *out = NULL
        cdef int rc
        cdef KllDoublesSketch sk = KllDoublesSketch.__new__(KllDoublesSketch)
        self._live()
        with nogil:
            rc = sc_conc_snapshot(self.c, &out)
        check_status(rc, "ConcurrentKllDoublesSketch.snapshot")
        sk.kind = SC_KLL_DOUBLE
        sk.sk = <sc_kll *>out
        return sk

    def get_quantile(self, double rank, *, bint inclusive=False):
        return self.snapshot().get_quantile(rank, inclusive=inclusive)

    def get_rank(self, double value, *, bint inclusive=False):
        return self.snapshot().get_rank(value, inclusive=inclusive)

    def flush(self):
        """Merge every writer's partial buffer; afterwards queries miss nothing."""
        self._live()
        _conc_flush(self.c, "ConcurrentKllDoublesSketch.flush")

    def close(self):
        """Flush and stop the propagator (idempotent)."""
        if self.c == NULL:
            return
        _conc_close(self.c, "ConcurrentKllDoublesSketch.close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
