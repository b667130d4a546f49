# Cython declarations of exec/ops_step.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint8_t
from runtime.batch cimport sc_batch
from exec.exec cimport sc_op_base

cdef extern from "exec/ops_step.h":
    ctypedef void (*sc_step_kernel)(int64_t n, void **states, const void **vals, const uint8_t **oks, void *out,
                                    uint8_t *out_ok) noexcept nogil
    int sc_op_step_create(void **st, const sc_op_base *base, sc_step_kernel kernel, const int32_t *keys,
                          int32_t nkeys, const int32_t *args, const char *kinds, int32_t nargs, char ret,
                          int64_t state_size)
    int sc_op_step_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_step_destroy(void *st) nogil
