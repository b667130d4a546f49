# Cython declarations of runtime/atomic_ext.h (the contract is stated in the header).

from libc.stdint cimport uint64_t

cdef extern from "runtime/atomic_ext.h":
    uint64_t sc_now_ns() nogil
    ctypedef struct sc_backoff:
        pass
