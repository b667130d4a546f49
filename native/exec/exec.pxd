# Cython declarations of exec/exec.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from runtime.batch cimport sc_batch

cdef extern from "exec/exec.h":
    void sc_exec_tune_allocator() nogil
    ctypedef struct sc_schema:
        int32_t ncols
        uint8_t *lt
    int sc_schema_init(sc_schema *s, int32_t ncols, const uint8_t *lt) nogil
    void sc_schema_free(sc_schema *s) nogil
    ctypedef struct sc_atomic_u64:
        pass
    uint64_t sc_u64_load_relaxed(const sc_atomic_u64 *a) nogil
    ctypedef struct sc_step_counters:
        sc_atomic_u64 rows_in, rows_out, filtered, dead, late
    ctypedef struct sc_side:
        pass
    ctypedef struct sc_side_meta:
        uint8_t kind
        uint64_t serial
        int64_t row
        char *reason
    int sc_side_take(sc_side *s, sc_batch **rows, sc_side_meta **meta, int64_t *n) nogil
    void sc_side_meta_free(sc_side_meta *meta, int64_t n) nogil
    uint32_t sc_side_step(const sc_side *s) nogil
    const sc_schema *sc_side_schema(const sc_side *s) nogil
    ctypedef struct sc_op_base:
        sc_side *side
    int sc_op_base_init(sc_op_base *b, uint32_t step, bint count_in, bint count_out,
                        sc_step_counters *counters, const sc_schema *inp, const sc_schema *out,
                        int64_t capacity, bint with_side) nogil
    void sc_op_base_free(sc_op_base *b) nogil
    int sc_batch_new(sc_batch **out, const sc_schema *s, int64_t capacity) nogil
    int sc_batch_new_shell(sc_batch **out, const sc_schema *s) nogil
    int sc_batch_concat(sc_batch **out, const sc_schema *s, sc_batch *const *parts, int32_t n) nogil
    ctypedef struct sc_batch_list:
        sc_batch **b
        int32_t n
        int64_t rows
    int sc_batch_list_add(sc_batch_list *l, sc_batch *b) nogil
    int sc_batch_list_join(sc_batch_list *l, const sc_schema *s, sc_batch **out) nogil
