# distutils: language = c
"""streamcell._native: build information and the status mapping smoke test."""

include "common/status.pxi"

cdef extern from "sc_atomic.h":
    ctypedef struct sc_atomic_i64:
        pass
    void sc_i64_init(sc_atomic_i64 *a, long long x) nogil
    long long sc_i64_fetch_add_relaxed(sc_atomic_i64 *a, long long x) nogil
    long long sc_i64_load_acquire(const sc_atomic_i64 *a) nogil


def build_info():
    """Return a dict describing how the native extension was compiled."""
    return {"debug": bool(_debug_enabled()), "atomics": "c11"}


cdef extern from *:
    """
    #ifdef SC_DEBUG
    static int _sc_debug_enabled(void) { return 1; }
    #else
    static int _sc_debug_enabled(void) { return 0; }
    #endif
    """
    int _sc_debug_enabled() nogil


cdef int _debug_enabled():
    return _sc_debug_enabled()


def atomic_counter_selftest(long long n):
    """Add 1 n times to a C11 atomic with the GIL released; returns the final value."""
    cdef sc_atomic_i64 a
    cdef long long i
    with nogil:
        sc_i64_init(&a, 0)
        for i in range(n):
            sc_i64_fetch_add_relaxed(&a, 1)
    return sc_i64_load_acquire(&a)


def raise_status(int code):
    """Raise the exception streamcell maps ``code`` to (used by tests of check_status)."""
    check_status(code, "raise_status")
    return None
