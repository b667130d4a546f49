# distutils: language = c
# distutils: sources = native/sketch/frequent.c native/sketch/concurrent.c
"""streamcell._frequent: frequent items (heavy hitters) over int64 or strings,
DataSketches-compatible.

Thin wrapper over native/sketch/frequent.h: inputs are collected with the GIL, the work runs
in one ``with nogil:`` call, and every status goes through ``check_status``.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free

import numpy as np

include "common/status.pxi"

cdef extern from "sketch/frequent.h" nogil:
    ctypedef struct sc_frequent:
        uint8_t lg_max
        uint8_t lg_cur
        uint8_t kind
    ctypedef struct sc_frequent_config:
        uint8_t lg_max_map_size
        uint8_t item_kind
    ctypedef enum sc_freq_item_kind:
        SC_FREQ_ITEMS_I64
        SC_FREQ_ITEMS_STR
    ctypedef enum sc_freq_error_type:
        SC_FREQ_NO_FALSE_POSITIVES
        SC_FREQ_NO_FALSE_NEGATIVES
    ctypedef struct sc_freq_row:
        int64_t item
        const char *str
        uint32_t len
        uint64_t estimate, lower, upper
    int sc_frequent_new(sc_frequent **out, const sc_frequent_config *cfg)
    void sc_frequent_destroy(sc_frequent *sk)
    void sc_frequent_reset(sc_frequent *sk)
    int sc_frequent_copy(sc_frequent **out, const sc_frequent *sk)
    int sc_frequent_update(sc_frequent *sk, int64_t item, uint64_t weight)
    int sc_frequent_update_str(sc_frequent *sk, const char *item, uint32_t len, uint64_t weight)
    int sc_frequent_update_large_utf8(sc_frequent *sk, const uint8_t *data, const int64_t *offsets,
                                      const uint64_t *weights, size_t n, const uint8_t *validity,
                                      size_t bit_offset)
    int sc_frequent_update_i64(sc_frequent *sk, const int64_t *items, const uint64_t *weights,
                               size_t n, const uint8_t *validity, size_t bit_offset)
    int sc_frequent_merge(sc_frequent *dst, const sc_frequent *src)
    uint64_t sc_frequent_total_weight(const sc_frequent *sk)
    uint64_t sc_frequent_maximum_error(const sc_frequent *sk)
    uint32_t sc_frequent_num_active(const sc_frequent *sk)
    int sc_frequent_is_empty(const sc_frequent *sk)
    uint64_t sc_frequent_lower_bound(const sc_frequent *sk, int64_t item)
    uint64_t sc_frequent_upper_bound(const sc_frequent *sk, int64_t item)
    uint64_t sc_frequent_estimate(const sc_frequent *sk, int64_t item)
    uint64_t sc_frequent_lower_bound_str(const sc_frequent *sk, const char *item, uint32_t len)
    double sc_frequent_epsilon(uint32_t lg)
    double sc_frequent_apriori_error(uint32_t lg, uint64_t total_weight)
    int sc_frequent_items(const sc_frequent *sk, sc_freq_error_type t, uint64_t threshold,
                          sc_freq_row **out, size_t *count)
    size_t sc_frequent_serialized_size(const sc_frequent *sk)
    int sc_frequent_serialize(const sc_frequent *sk, uint8_t *buf, size_t cap, size_t *written)
    int sc_frequent_deserialize(sc_frequent **out, sc_freq_item_kind kind, const uint8_t *buf,
                                size_t n)
    int sc_frequent_check(const sc_frequent *sk)


include "sketch/concurrent.pxi"

cdef extern from "sketch/frequent.h" nogil:
    const sc_sketch_vtable sc_frequent_i64_vtable


def _int_chunks(values):
    """Yield (int64 ndarray, validity uint8 ndarray | None, bit offset) for a column."""
    mod = type(values).__module__
    if mod.startswith("polars"):
        values = values.to_arrow()
        mod = type(values).__module__
    if mod.startswith("pyarrow"):
        import pyarrow as pa

        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        for arr in chunks:
            if not (pa.types.is_integer(arr.type) or pa.types.is_null(arr.type)):
                raise TypeError(f"frequent items: expected an integer column, got {arr.type}")
            if arr.type != pa.int64():
                arr = arr.cast(pa.int64())
            if len(arr) == 0:
                continue
            bufs = arr.buffers()
            data = np.frombuffer(bufs[1], dtype=np.int64, count=arr.offset + len(arr))[arr.offset:]
            yield data, _validity(arr, bufs), arr.offset
        return
    arr = np.asarray(values)
    if arr.dtype.kind not in "iub":
        raise TypeError(f"frequent items: expected integers, got dtype {arr.dtype}")
    yield np.ascontiguousarray(arr.reshape(-1), dtype=np.int64), None, 0


def _str_chunks(values):
    """Yield (data uint8 ndarray, int64 offsets ndarray, validity | None, bit offset) per
    Arrow large_string chunk; other inputs are converted with pyarrow first."""
    import pyarrow as pa

    mod = type(values).__module__
    if mod.startswith("polars"):
        values = values.to_arrow()
    elif not mod.startswith("pyarrow"):
        values = pa.array(values if isinstance(values, (list, tuple)) else list(values))
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    for arr in chunks:
        t = arr.type
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t) or pa.types.is_null(t)
                or str(t) in ("string_view", "binary_view")):
            raise TypeError(f"frequent strings: expected a string column, got {t}")
        if not (pa.types.is_large_string(t) or pa.types.is_large_binary(t)):
            arr = arr.cast(pa.large_binary() if "binary" in str(t) else pa.large_string())
        if len(arr) == 0:
            continue
        bufs = arr.buffers()
        offsets = np.frombuffer(bufs[1], dtype=np.int64, count=arr.offset + len(arr) + 1)[arr.offset:]
        data = (np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and bufs[2].size
                else np.zeros(1, dtype=np.uint8))
        yield data, offsets, _validity(arr, bufs), arr.offset


def _validity(arr, bufs):
    if arr.null_count and bufs[0] is not None:
        return np.frombuffer(bufs[0], dtype=np.uint8)
    return None


def _weights_column(weights):
    if weights is None:
        return None
    if type(weights).__module__.startswith(("polars", "pyarrow")):
        weights = weights.to_numpy()
    w = np.asarray(weights)
    if w.dtype.kind not in "iu" or (w.dtype.kind == "i" and (w < 0).any()):
        raise ValueError("weights must be non-negative integers")
    return np.ascontiguousarray(w.reshape(-1), dtype=np.uint64)


def _weight(weights):
    w = 1 if weights is None else int(weights)
    if w < 0:
        raise ValueError("weight must be non-negative")
    return w


cdef sc_freq_error_type _error_type(error_type) except *:
    name = getattr(error_type, "name", error_type)
    name = str(name).lower()
    if name == "no_false_positives":
        return SC_FREQ_NO_FALSE_POSITIVES
    if name == "no_false_negatives":
        return SC_FREQ_NO_FALSE_NEGATIVES
    raise ValueError(f"error_type must be 'no_false_positives' or 'no_false_negatives', "
                     f"got {error_type!r}")


cdef class _FrequentSketch:
    """Common implementation of FrequentItemsSketch and FrequentStringsSketch (not public)."""

    cdef sc_frequent *sk

    def __cinit__(self, *args, **kwargs):
        self.sk = NULL

    def __dealloc__(self):
        if self.sk is not NULL:
            sc_frequent_destroy(self.sk)
            self.sk = NULL

    cdef _init(self, int lg_max_map_size, sc_freq_item_kind kind):
        cdef sc_frequent_config cfg
        if not (3 <= lg_max_map_size <= 26):
            raise ValueError(f"lg_max_map_size must be in [3, 26], got {lg_max_map_size}")
        cfg.lg_max_map_size = lg_max_map_size
        cfg.item_kind = kind
        check_status(sc_frequent_new(&self.sk, &cfg), "frequent.new")

    def update_batch(self, column, weights=None):
        """Add every item of a column (NumPy / Arrow / Polars / sequence), GIL released."""
        if isinstance(column, (int, np.integer, str, bytes)):
            raise TypeError("update_batch expects a column; use update(item) for one item")
        self.update(column, weights)

    def merge(self, _FrequentSketch other):
        """Merge ``other`` (same item type) into this sketch; the errors of both add up."""
        cdef int code
        if type(other) is not type(self):
            raise TypeError(f"cannot merge {type(other).__name__} into {type(self).__name__}")
        with nogil:
            code = sc_frequent_merge(self.sk, other.sk)
        check_status(code, "frequent.merge")

    def reset(self):
        """Make the sketch empty again."""
        sc_frequent_reset(self.sk)

    @property
    def total_weight(self):
        return sc_frequent_total_weight(self.sk)

    @property
    def maximum_error(self):
        """upper - lower for every item: the total weight removed by purges."""
        return sc_frequent_maximum_error(self.sk)

    @property
    def num_active_items(self):
        return sc_frequent_num_active(self.sk)

    @property
    def lg_max_map_size(self):
        return self.sk.lg_max

    @property
    def is_empty(self):
        return bool(sc_frequent_is_empty(self.sk))

    @property
    def epsilon(self):
        return sc_frequent_epsilon(self.sk.lg_max)

    def get_estimate(self, item):
        """count + maximum_error if the item is tracked, else 0 (as DataSketches)."""
        c = self.get_lower_bound(item)
        return c + self.maximum_error if c else 0

    def get_upper_bound(self, item):
        return self.get_lower_bound(item) + self.maximum_error

    def get_frequent_items(self, error_type="no_false_positives", threshold=None):
        """Rows ``(item, estimate, lower_bound, upper_bound)`` sorted by estimate, descending.

        ``error_type`` is "no_false_positives" (lower > threshold) or "no_false_negatives"
        (upper > threshold); DataSketches' enum values are accepted too. ``threshold``
        defaults to ``maximum_error``.
        """
        cdef sc_freq_error_type t = _error_type(error_type)
        cdef uint64_t thr = self.maximum_error if threshold is None else threshold
        cdef sc_freq_row *rows = NULL
        cdef size_t count = 0, i
        cdef int code
        cdef bint strings = self.sk.kind == SC_FREQ_ITEMS_STR
        with nogil:
            code = sc_frequent_items(self.sk, t, thr, &rows, &count)
        check_status(code, "frequent.get_frequent_items")
        try:
            if strings:
                return [(rows[i].str[:rows[i].len].decode("utf-8", "surrogateescape"),
                         rows[i].estimate, rows[i].lower, rows[i].upper) for i in range(count)]
            return [(rows[i].item, rows[i].estimate, rows[i].lower, rows[i].upper)
                    for i in range(count)]
        finally:
            free(rows)

    @staticmethod
    def get_epsilon_for_lg_size(int lg_max_map_size):
        return sc_frequent_epsilon(lg_max_map_size)

    @staticmethod
    def get_apriori_error(int lg_max_map_size, uint64_t estimated_total_weight):
        return sc_frequent_apriori_error(lg_max_map_size, estimated_total_weight)

    def to_bytes(self):
        """DataSketches frequent items bytes (see the class docstring for compatibility)."""
        cdef size_t size = sc_frequent_serialized_size(self.sk), written = 0
        out = PyBytes_FromStringAndSize(NULL, size)
        cdef uint8_t *buf = <uint8_t *>PyBytes_AS_STRING(out)
        cdef int code
        with nogil:
            code = sc_frequent_serialize(self.sk, buf, size, &written)
        check_status(code, "frequent.to_bytes")
        return out

    serialize = to_bytes

    cdef _load(self, data, sc_freq_item_kind kind):
        cdef const uint8_t[::1] b = memoryview(data).cast("B")
        cdef size_t n = b.shape[0]
        cdef const uint8_t *p = &b[0] if n else NULL
        cdef int code
        with nogil:
            code = sc_frequent_deserialize(&self.sk, kind, p, n)
        check_status(code, "frequent.from_bytes")
        return self

    def copy(self):
        cdef _FrequentSketch c = type(self).__new__(type(self))
        check_status(sc_frequent_copy(&c.sk, self.sk), "frequent.copy")
        return c

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return (type(self).from_bytes, (self.to_bytes(),))

    def _check(self):
        """Run the native invariant checks (tests)."""
        check_status(sc_frequent_check(self.sk), "frequent.check")

    def __repr__(self):
        return (f"{type(self).__name__}(lg_max_map_size={self.lg_max_map_size}, "
                f"total_weight={self.total_weight}, active={self.num_active_items}, "
                f"maximum_error={self.maximum_error})")


cdef class FrequentItemsSketch(_FrequentSketch):
    """Heavy hitters over int64 items with deterministic error bounds (DataSketches format).

    Every item ``x`` has ``lower <= true count <= upper`` with
    ``upper - lower = maximum_error <= 3.5 / 2**lg_max_map_size * total_weight``.
    Bytes are those of Java ``LongsSketch`` and of Python datasketches
    ``frequent_items_sketch`` serialized with ``PyLongsSerDe``.

    Parameters
    ----------
    lg_max_map_size : int, default 10
        log2 of the maximum hash map size (3..26); at most 0.75 * 2**lg counters.

    Examples
    --------
    >>> import numpy as np
    >>> sk = FrequentItemsSketch(6)
    >>> sk.update(np.array([1, 1, 1, 2, 3, 1]))
    >>> sk.get_frequent_items("no_false_positives", threshold=1)
    [(1, 4, 4, 4)]

    Backends: standalone everywhere; the native backend also runs it concurrently.
    """

    def __init__(self, int lg_max_map_size=10):
        self._init(lg_max_map_size, SC_FREQ_ITEMS_I64)

    def update(self, items, weights=None):
        """Add one int64 item (``weights`` an int, default 1) or a column of them.

        For a column, ``weights`` is None (each item counts 1) or a same-length column of
        non-negative integers. Nulls are skipped.
        """
        if isinstance(items, (int, np.integer)):
            check_status(sc_frequent_update(self.sk, items, _weight(weights)), "frequent.update")
            return
        wcol = _weights_column(weights)
        start = 0
        for data, validity, offset in _int_chunks(items):
            n = data.shape[0]
            w = None if wcol is None else wcol[start:start + n]
            if w is not None and w.shape[0] != n:
                raise ValueError("weights must have the same length as items")
            self._ingest(data, w, validity, offset)
            start += n
        if wcol is not None and start != wcol.shape[0]:
            raise ValueError("weights must have the same length as items")

    cdef _ingest(self, data, weights, validity, size_t offset):
        cdef const int64_t[::1] d = data
        cdef const uint64_t[::1] w
        cdef const uint8_t[::1] vb
        cdef const uint64_t *wp = NULL
        cdef const uint8_t *vp = NULL
        cdef size_t n = d.shape[0]
        cdef int code
        if n == 0:
            return
        if weights is not None:
            w = weights
            wp = &w[0]
        if validity is not None:
            vb = validity
            vp = &vb[0]
        with nogil:
            code = sc_frequent_update_i64(self.sk, &d[0], wp, n, vp, offset)
        check_status(code, "frequent.update")

    def get_lower_bound(self, int64_t item):
        return sc_frequent_lower_bound(self.sk, item)

    @classmethod
    def from_bytes(cls, data):
        """Load bytes written here, by Java LongsSketch, or by Python datasketches
        ``frequent_items_sketch.serialize(PyLongsSerDe())``."""
        cdef FrequentItemsSketch sk = cls.__new__(cls)
        return sk._load(data, SC_FREQ_ITEMS_I64)

    deserialize = from_bytes


cdef class FrequentStringsSketch(_FrequentSketch):
    """Heavy hitters over strings (UTF-8; bytes accepted) with deterministic error bounds.

    Same guarantees as ``FrequentItemsSketch``. Bytes are those of Python datasketches
    ``frequent_strings_sketch`` (C++ ``frequent_items_sketch<std::string>``) and Java
    ``ItemsSketch<String>`` with ``ArrayOfStringsSerDe``. Items come back as ``str``
    (invalid UTF-8 decoded with ``surrogateescape``).

    Examples
    --------
    >>> sk = FrequentStringsSketch(6)
    >>> sk.update(["a", "b", "a", None, "a"])
    >>> sk.get_frequent_items("no_false_positives", threshold=1)
    [('a', 3, 3, 3)]
    """

    def __init__(self, int lg_max_map_size=10):
        self._init(lg_max_map_size, SC_FREQ_ITEMS_STR)

    def update(self, items, weights=None):
        """Add one string (``weights`` an int, default 1) or a column of strings (nulls
        skipped; ``weights`` None or a same-length column of non-negative integers)."""
        cdef bytes b
        if isinstance(items, (str, bytes)):
            b = items.encode("utf-8", "surrogateescape") if isinstance(items, str) else items
            check_status(sc_frequent_update_str(self.sk, b, len(b), _weight(weights)),
                         "frequent.update")
            return
        wcol = _weights_column(weights)
        start = 0
        for data, offsets, validity, offset in _str_chunks(items):
            n = offsets.shape[0] - 1
            w = None if wcol is None else wcol[start:start + n]
            if w is not None and w.shape[0] != n:
                raise ValueError("weights must have the same length as items")
            self._ingest(data, offsets, w, validity, offset)
            start += n
        if wcol is not None and start != wcol.shape[0]:
            raise ValueError("weights must have the same length as items")

    cdef _ingest(self, data, offsets, weights, validity, size_t bit_offset):
        cdef const uint8_t[::1] d = data
        cdef const int64_t[::1] o = offsets
        cdef const uint64_t[::1] w
        cdef const uint8_t[::1] vb
        cdef const uint64_t *wp = NULL
        cdef const uint8_t *vp = NULL
        cdef size_t n = o.shape[0] - 1
        cdef int code
        if n == 0:
            return
        if weights is not None:
            w = weights
            wp = &w[0]
        if validity is not None:
            vb = validity
            vp = &vb[0]
        with nogil:
            code = sc_frequent_update_large_utf8(self.sk, &d[0], &o[0], wp, n, vp, bit_offset)
        check_status(code, "frequent.update")

    def get_lower_bound(self, item):
        cdef bytes b = item.encode("utf-8", "surrogateescape") if isinstance(item, str) else item
        return sc_frequent_lower_bound_str(self.sk, b, len(b))

    @classmethod
    def from_bytes(cls, data):
        """Load bytes written here, by Python datasketches ``frequent_strings_sketch``, or
        by Java ``ItemsSketch<String>`` (ArrayOfStringsSerDe)."""
        cdef FrequentStringsSketch sk = cls.__new__(cls)
        return sk._load(data, SC_FREQ_ITEMS_STR)

    deserialize = from_bytes


cdef int _conc_feed_i64(sc_concurrent *c, uint32_t w, const int64_t *x, size_t n,
                        const uint8_t *vp, size_t off) noexcept nogil:
    """Writer w adds x[0:n] in pieces of at most `room` counted updates (nulls skipped)."""
    cdef int rc = sc_conc_writer_enter(c, w)
    cdef size_t pos = 0, take
    cdef uint64_t room, before, added
    cdef sc_frequent *loc
    if rc != 0:
        return rc
    while pos < n:
        loc = <sc_frequent *>sc_conc_local(c, w)
        room = sc_conc_room(c, w)
        if room == 0:
            room = 1
        take = n - pos if n - pos < room else <size_t>room
        before = sc_frequent_total_weight(loc)
        rc = sc_frequent_update_i64(loc, x + pos, NULL, take, vp, off + pos)
        if rc < 0:
            break
        added = sc_frequent_total_weight(loc) - before
        if added:
            rc = sc_conc_added(c, w, added)
            if rc < 0:
                break
        pos += take
    sc_conc_writer_exit(c, w)
    return rc if rc < 0 else 0


cdef class ConcurrentFrequentItemsSketch:
    """Frequent int64 items several threads update at once (Rinberg et al., Algorithm 2).

    Each of ``writers`` writer ids owns a double-buffered local frequent-items sketch of
    ``buffer`` updates; a propagator thread merges full buffers into the global sketch (the
    errors of merged sketches add up, so the global bound stays maximum_error <= 3.5 /
    2**lg_max_map_size * N, DataSketches' merge bound). While the global total is below
    ``eager_limit`` (default: the map's capacity, where counts are still exact) every update is
    merged at once. Queries (``total_weight``, ``snapshot()``, ``get_frequent_items``) run from
    any thread without blocking writers and miss at most ``relaxation`` = 2·writers·buffer of
    the updates that precede them; after ``flush()`` nothing is missing.

    One thread at a time per writer id; a second thread on a busy id gets an error.
    """

    cdef sc_concurrent *c
    cdef sc_frequent_config cfg
    cdef readonly uint32_t writers
    cdef readonly uint64_t buffer

    def __cinit__(self, *args, **kwargs):
        self.c = NULL

    def __init__(self, int lg_max_map_size=10, *, int writers=1, buffer=1024, eager_limit=None):
        cdef sc_conc_config cc
        if not (3 <= lg_max_map_size <= 26):
            raise ValueError(f"lg_max_map_size must be in [3, 26], got {lg_max_map_size}")
        _conc_check_config("ConcurrentFrequentItemsSketch", writers, buffer)
        self.cfg.lg_max_map_size = lg_max_map_size
        self.cfg.item_kind = SC_FREQ_ITEMS_I64
        self.writers = writers
        self.buffer = int(buffer)
        cc.vt = &sc_frequent_i64_vtable
        cc.global_config = &self.cfg
        cc.local_config = NULL
        cc.writers = writers
        cc.buffer = self.buffer
        cap = (3 << lg_max_map_size) // 4
        cc.eager_limit = cap if eager_limit is None else max(0, int(eager_limit))
        check_status(sc_conc_create(&self.c, &cc), "ConcurrentFrequentItemsSketch")

    def __dealloc__(self):
        if self.c != NULL:
            with nogil:
                sc_conc_destroy(self.c)
            self.c = NULL

    cdef _live(self):
        if self.c == NULL:
            raise ValueError("ConcurrentFrequentItemsSketch is closed")

    def update_batch(self, int writer_id, column):
        """Writer ``writer_id`` adds a column of integers (GIL released; nulls skipped)."""
        cdef const int64_t[::1] d
        cdef const uint8_t[::1] vb
        cdef const uint8_t *vp
        cdef size_t n, off
        cdef int rc
        self._live()
        _conc_check_writer("ConcurrentFrequentItemsSketch", writer_id, self.writers)
        for data, validity, offset in _int_chunks(column):
            d = data
            n = d.shape[0]
            if n == 0:
                continue
            vp = NULL
            if validity is not None:
                vb = validity
                vp = &vb[0]
            off = offset
            with nogil:
                rc = _conc_feed_i64(self.c, writer_id, &d[0], n, vp, off)
            check_status(rc, "ConcurrentFrequentItemsSketch.update_batch")

    @property
    def total_weight(self):
        """Total weight of the global sketch at the last publish (lock-free read)."""
        cdef uint64_t w[8]
        cdef sc_conc_stats st
        self._live()
        sc_conc_summary(self.c, w, &st)
        return w[0]

    @property
    def maximum_error(self):
        cdef uint64_t w[8]
        cdef sc_conc_stats st
        self._live()
        sc_conc_summary(self.c, w, &st)
        return w[1]

    @property
    def relaxation(self):
        """r = 2·writers·buffer: the most preceding updates a query may miss."""
        self._live()
        return sc_conc_relaxation(self.c)

    def snapshot(self):
        """A FrequentItemsSketch copy of the global sketch (one deep copy under the merge lock)."""
        cdef void *out = NULL
        cdef int rc
        cdef FrequentItemsSketch sk = FrequentItemsSketch.__new__(FrequentItemsSketch)
        self._live()
        with nogil:
            rc = sc_conc_snapshot(self.c, &out)
        check_status(rc, "ConcurrentFrequentItemsSketch.snapshot")
        sk.sk = <sc_frequent *>out
        return sk

    def get_frequent_items(self, error_type="no_false_positives", threshold=None):
        return self.snapshot().get_frequent_items(error_type, threshold)

    def get_estimate(self, item):
        return self.snapshot().get_estimate(item)

    def flush(self):
        """Merge every writer's partial buffer; afterwards queries miss nothing."""
        self._live()
        _conc_flush(self.c, "ConcurrentFrequentItemsSketch.flush")

    def close(self):
        """Flush and stop the propagator (idempotent)."""
        if self.c == NULL:
            return
        _conc_close(self.c, "ConcurrentFrequentItemsSketch.close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
