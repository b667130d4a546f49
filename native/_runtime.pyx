# distutils: language = c
# distutils: sources = native/exec/common.c native/exec/expr.c native/exec/expr_vec.c native/exec/expr_fast.c native/exec/expr_funcs.c native/exec/expr_compile.c native/exec/expr_compat_num.c native/exec/expr_compat_time.c native/exec/expr_compat_str.c native/exec/ops_filter_project.c native/exec/select.c native/exec/ops_state.c native/exec/ops_keyed.c native/exec/aggstate.c native/exec/ops_window.c native/exec/keyhash.c native/exec/rowstore.c native/exec/program.c native/exec/pacer.c native/exec/arrow_bridge.c native/exec/arrow_columns.c native/exec/lists.c native/exec/ops_sketch.c native/exec/ops_entities.c native/exec/ops_speculate.c native/exec/ops_step.c native/exec/speculate.c native/exec/dag.c native/exec/ops_join.c native/exec/ops_correlate.c native/sketch/theta.c native/sketch/hll.c native/sketch/kll.c native/sketch/frequent.c native/sketch/murmur3.c native/sketch/concurrent.c native/runtime/pool.c native/runtime/scheduler.c native/runtime/reorder.c native/runtime/hybrid_queue.c native/runtime/ring.c native/runtime/batch.c native/runtime/metrics.c
# distutils: include_dirs = native native/common native/exec native/runtime
"""streamcell._runtime: the Python face of the native runtime (native/exec, native/runtime).

A :class:`Program` is a compiled plan's operator chain on the worker pool. The driver
(streamcell.backends.native) builds it from the lowered plan, pushes Arrow record batches
in (copied into runtime batches without the GIL), and takes ordered output batches out as
zero-copy Arrow record batches. Everything between runs on C threads without the GIL.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc, calloc
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New

include "common/status.pxi"

# the C components' declarations: one .pxd beside each header (native/runtime, native/exec)
from runtime.batch cimport (
    sc_batch, sc_batch_release, sc_batch_release_chain, sc_colbuf_cached, sc_colbuf_trim, sc_column
)
from runtime.atomic_ext cimport sc_now_ns
from runtime.scheduler cimport (
    SC_OP_STATEFUL, SC_OP_STATELESS, sc_op_kind, sc_sched, sc_sched_op_stats, sc_sched_stats,
)
from runtime.metrics cimport sc_latency_summary, sc_metrics_snapshot, sc_op_counters
from runtime.pool cimport sc_op_run_fn, sc_pool_config
from exec.exec cimport (
    sc_batch_list, sc_batch_list_add, sc_batch_list_join, sc_batch_new, sc_batch_new_shell, sc_exec_tune_allocator,
    sc_op_base, sc_op_base_free, sc_op_base_init, sc_schema, sc_schema_free, sc_schema_init, sc_side, sc_side_meta,
    sc_side_meta_free, sc_side_schema, sc_side_step, sc_side_take, sc_step_counters,
    sc_u64_load_relaxed,
)
from exec.expr cimport (
    sc_enode, sc_op_filter_create, sc_op_filter_destroy, sc_op_filter_run,
    sc_op_fused_create, sc_op_fused_destroy, sc_op_fused_run, sc_op_project_create,
    sc_op_project_destroy, sc_op_project_run,
)
from exec.ops_state cimport (
    SC_PUBLISH_COMPLETE, sc_agg_spec, sc_keyed_spec, sc_op_aggregate_create, sc_op_aggregate_destroy,
    sc_op_aggregate_run, sc_op_dedup_create, sc_op_dedup_destroy, sc_op_dedup_run,
    sc_op_topk_create, sc_op_topk_destroy, sc_op_topk_run, sc_op_window_create,
    sc_op_window_destroy, sc_op_window_run, sc_out_col, sc_window_spec,
)
from exec.program cimport (
    sc_op_destroy_fn, sc_prog, sc_prog_add, sc_prog_add_bases, sc_prog_add_keyed, sc_prog_counters, sc_prog_create,
    sc_prog_destroy, sc_prog_error, sc_prog_finish, sc_prog_metrics, sc_prog_nops, sc_prog_op_name,
    sc_prog_take_due, sc_prog_pause, sc_prog_push, sc_prog_resume, sc_prog_sched, sc_prog_set_coalesce,
    sc_prog_set_publish, sc_prog_sides, sc_prog_start, sc_prog_state_size, sc_prog_stop,
    sc_prog_take,
)
from exec.pacer cimport (
    sc_paced_due, sc_pacer, sc_pacer_create, sc_pacer_destroy, sc_pacer_halt, sc_pacer_pushed, sc_pacer_submit,
    sc_pacer_wait,
)
from exec.dag cimport (
    sc_dag, sc_dag_add_op, sc_dag_counters, sc_dag_create, sc_dag_destroy, sc_dag_edge,
    sc_dag_error, sc_dag_finish, sc_dag_merge, sc_dag_nvertices, sc_dag_push, sc_dag_sides,
    sc_dag_source, sc_dag_start, sc_dag_stats, sc_dag_stats_get, sc_dag_stop, sc_dag_take,
    sc_dag_vertex, sc_dag_vertex_name, sc_dag_vertex_stats, sc_dag_vstats, sc_dag_wait,
)
from exec.lists cimport (
    sc_list_decode, sc_list_decoded, sc_list_decoded_free, sc_op_explode_create,
    sc_op_explode_destroy, sc_op_explode_run,
)
from exec.ops_sketch cimport (
    sc_op_sketch_bytes, sc_op_sketch_create, sc_op_sketch_destroy, sc_op_sketch_keys,
    sc_op_sketch_nkeys, sc_op_sketch_run, sc_op_sketch_summary, sc_sketch_spec,
)
from exec.ops_entities cimport (
    sc_entities, sc_entities_count, sc_entities_create, sc_entities_destroy, sc_entities_waits,
    sc_op_apply_create, sc_op_apply_destroy, sc_op_apply_run, sc_op_order_create,
    sc_op_order_destroy, sc_op_order_run,
)
from exec.ops_step cimport sc_op_step_create, sc_op_step_destroy, sc_op_step_run, sc_step_kernel
from exec.ops_speculate cimport (
    sc_op_speculate_cancel, sc_op_speculate_create, sc_op_speculate_destroy, sc_op_speculate_run,
    sc_op_speculate_stats, sc_spec_config, sc_spec_stats, sc_txn_kernel,
)
from exec.ops_join cimport sc_join_spec, sc_op_join_create, sc_op_join_destroy, sc_op_join_run
from exec.ops_correlate cimport (
    sc_corr_agg, sc_corr_spec, sc_op_correlate_create, sc_op_correlate_destroy, sc_op_correlate_run,
)
from exec.arrow_bridge cimport (
    ArrowArray, ArrowArrayStream, ArrowSchema, sc_arrow_defer, sc_arrow_export, sc_arrow_export_stream, sc_arrow_hold_array, sc_arrow_hold_create,
    sc_arrow_hold_defer, sc_arrow_import, sc_arrow_import_ref, sc_arrow_reclaim, sc_extbuf, sc_extbuf_ref,
    sc_extbuf_unref,
)
from exec.arrow_columns cimport (
    sc_arrow_columns, sc_arrow_columns_create, sc_arrow_columns_error, sc_arrow_columns_free, sc_arrow_columns_next,
)


sc_exec_tune_allocator()


def buffer_cache_trim(double age_s=0.0):
    """Release the column buffers the runtime keeps for reuse (batch.h: sc_colbuf) that were
    freed at least ``age_s`` seconds ago (0: all of them); returns the bytes released. Also
    releases, here with the GIL, the imported Arrow arrays no batch or exported chunk uses
    any more (a table that shared a source's buffers, dropped since the last run)."""
    cdef uint64_t age = <uint64_t>(age_s * 1e9) if age_s > 0 else 0
    cdef int64_t n
    sc_arrow_reclaim()
    with nogil:
        n = sc_colbuf_trim(age)
    return n


def buffer_cache_bytes():
    """Bytes of freed column buffers the runtime keeps for reuse now."""
    return sc_colbuf_cached()


def now_ns():
    """The runtime's monotonic clock (ns): the time base of paced pushes and latency markers."""
    return sc_now_ns()


def paced_due_ns(uint64_t t0_ns, int64_t row, int64_t batch_size, int64_t burst, double rate):
    """The pacer's schedule (exec/pacer.h): when the batch starting at source ``row`` is pushed,
    ``burst`` batches of ``batch_size`` rows together, the source's row 0 due at ``t0_ns``."""
    if batch_size <= 0 or burst <= 0 or rate <= 0:
        raise ValueError("batch_size, burst and rate must be positive")
    return sc_paced_due(t0_ns, row, batch_size * burst, rate)


# status codes the driver branches on
OK = SC_OK
FULL = SC_EFULL
EMPTY = SC_EEMPTY
CLOSED = SC_ECLOSED

SCHEDULERS = {"CT": 0, "QST": 1, "LP": 2, "ET": 3}
REORDERS = {"nonblocking": 0, "locked": 1, "none": 0}
KEYED_QUEUES = {"hybrid": 0, "partitioned": 1}


cdef class _Schema:
    """An owned sc_schema built from a bytes of logical types."""
    cdef sc_schema s
    cdef object arrow  # the pyarrow.Schema its batches export as, once one has been exported

    def __cinit__(self, bytes lts):
        check_status(sc_schema_init(&self.s, <int32_t>len(lts), <const uint8_t *><char *>lts), "schema")

    def __dealloc__(self):
        sc_schema_free(&self.s)


cdef class _Nodes:
    """An expression's sc_enode array; keeps the Python literals it points into alive."""
    cdef sc_enode *nodes
    cdef int32_t n
    cdef list keep

    def __cinit__(self, list nodes):
        self.n = len(nodes)
        self.keep = []
        self.nodes = <sc_enode *>calloc(max(self.n, 1), sizeof(sc_enode))
        if self.nodes == NULL:
            raise MemoryError()
        cdef int k
        cdef sc_enode *e
        cdef int64_t *il
        cdef double *fl
        cdef const char **sl
        cdef int32_t *ln
        for k, node in enumerate(nodes):
            e = &self.nodes[k]
            e.op, e.lt, e.a, e.b, e.c = node["op"], node["lt"], node.get("a", -1), node.get("b", -1), node.get("c", -1)
            e.is_null = node.get("is_null", False)
            e.i = node.get("i", 0)
            e.f = node.get("f", 0.0)
            s = node.get("s")
            if s is not None:
                self.keep.append(s)
                e.s = <const char *>s
                e.slen = <int32_t>len(s)
            lst = node.get("list")
            if lst is not None:
                e.nlist = len(lst)
                e.list_has_null = node.get("list_has_null", False)
                kind = node["list_kind"]
                if kind == "i":
                    il = <int64_t *>malloc(max(len(lst), 1) * sizeof(int64_t))
                    for j, v in enumerate(lst):
                        il[j] = v
                    self.keep.append(_Ptr.wrap(il))
                    e.ilist = il
                elif kind == "f":
                    fl = <double *>malloc(max(len(lst), 1) * sizeof(double))
                    for j, v in enumerate(lst):
                        fl[j] = v
                    self.keep.append(_Ptr.wrap(fl))
                    e.flist = fl
                else:
                    sl = <const char **>malloc(max(len(lst), 1) * sizeof(char *))
                    ln = <int32_t *>malloc(max(len(lst), 1) * sizeof(int32_t))
                    for j, v in enumerate(lst):
                        self.keep.append(v)
                        sl[j] = <const char *>v
                        ln[j] = <int32_t>len(v)
                    self.keep.append(_Ptr.wrap(sl))
                    self.keep.append(_Ptr.wrap(ln))
                    e.slist = sl
                    e.slens = ln

    def __dealloc__(self):
        free(self.nodes)


cdef class _Ptr:
    cdef void *p

    @staticmethod
    cdef _Ptr wrap(void *p):
        cdef _Ptr o = _Ptr.__new__(_Ptr)
        o.p = p
        return o

    def __dealloc__(self):
        free(self.p)


cdef int32_t *_ints(list xs) except NULL:
    cdef int32_t *a = <int32_t *>malloc(max(len(xs), 1) * sizeof(int32_t))
    if a == NULL:
        raise MemoryError()
    for k, x in enumerate(xs):
        a[k] = x
    return a


cdef sc_out_col *_outs(list outs) except NULL:
    cdef sc_out_col *o = <sc_out_col *>malloc(max(len(outs), 1) * sizeof(sc_out_col))
    if o == NULL:
        raise MemoryError()
    for k, (kind, arg) in enumerate(outs):
        o[k].kind = kind
        o[k].arg = arg
    return o


cdef sc_agg_spec *_aggs(list aggs) except NULL:
    cdef sc_agg_spec *a = <sc_agg_spec *>malloc(max(len(aggs), 1) * sizeof(sc_agg_spec))
    if a == NULL:
        raise MemoryError()
    for k, (fn, arg, lt) in enumerate(aggs):
        a[k].fn = fn
        a[k].arg = arg
        a[k].lt = lt
    return a


cdef class SketchTap


cdef inline int _join(sc_batch_list *parts, const sc_schema *s, sc_batch **joined, int rc) noexcept nogil:
    """Join the collected batches (none left on an earlier error rc)."""
    cdef int rc2 = sc_batch_list_join(parts, s, joined)
    if rc != SC_OK:
        sc_batch_release(joined[0])
        joined[0] = NULL
    return rc if rc != SC_OK else rc2


cdef class ColumnStreams:
    """A source's columns as Arrow C streams read in step (:meth:`Program.column_streams`):
    the chunk being pushed is held until its last row went in."""
    cdef sc_arrow_columns *c
    cdef sc_extbuf *hold
    cdef int64_t off, length
    cdef object owner    # the Program whose input schema the chunks were checked against
    cdef object pending  # a read's error after rows of the same call went in: raised next call

    def __dealloc__(self):
        if self.hold != NULL:
            sc_extbuf_unref(self.hold)
        sc_arrow_columns_free(self.c)

    cdef sc_extbuf *_next(self) except? NULL:
        """The next step's hold (NULL after the last), or the read's error raised."""
        cdef sc_extbuf *h = NULL
        cdef int rc = sc_arrow_columns_next(self.c, &h)
        if rc == SC_EFORMAT:
            raise _NativeError(
                f"reading the source: {sc_arrow_columns_error(self.c).decode(errors='replace')}", rc
            )
        check_status(rc, "push")
        return h

    def next_chunk(self):
        """The next step of the columns' chunks as a :class:`HeldChunk` (None after the
        last), for a feeder that hands chunks on one by one (:meth:`Program.pace_submit`)."""
        if self.hold != NULL:
            raise ValueError("next_chunk: a chunk is being pushed (push_columns)")
        sc_arrow_reclaim()
        cdef sc_extbuf *h = self._next()
        if h == NULL:
            return None
        cdef HeldChunk chunk = HeldChunk.__new__(HeldChunk)
        chunk.hold = h
        chunk.owner = self.owner
        chunk.num_rows = sc_arrow_hold_array(h).length
        return chunk


cdef class HeldChunk:
    """One step of :class:`ColumnStreams`: the columns' chunks as one hold, type-checked,
    which :meth:`Program.pace_submit` and :meth:`Program.push_many` take as they take a
    record batch (each use a reference of its own)."""
    cdef sc_extbuf *hold
    cdef object owner  # the Program it was checked for
    cdef readonly int64_t num_rows

    def __dealloc__(self):
        if self.hold != NULL:
            sc_extbuf_unref(self.hold)


cdef class Program:
    """A native operator chain (see module doc). Build with the ``add_*`` methods, then
    ``start``; feed with ``push``; drain with ``take``; always ``close``."""
    cdef sc_prog *p
    cdef uint32_t nsteps
    cdef list schemas       # _Schema of each operator's output, in order
    cdef list op_steps
    cdef _Schema out_schema
    cdef _Schema in_schema
    cdef bint started
    cdef list entities      # sc_entities tables (addresses), freed after the program
    cdef list speculators   # speculate operator states (addresses; owned by the program)
    cdef sc_dag *d          # DAG mode (exec/dag.h) instead of the chain
    cdef public bint share_sources  # pushed arrays' buffers may be shared by outputs (sc_extbuf.shared)
    cdef public int vertex  # DAG mode: the vertex add_* methods append to
    cdef list source_schemas
    cdef list sink_schemas
    cdef bytes keep_views   # per input column (hidden first): its strings may stay views
    cdef bint lean          # pushed batches are lean: nothing reads their hidden columns
    cdef sc_pacer *pacer    # a throttled source's pushes, on a thread of their own (exec/pacer.h)

    def __cinit__(self, int nsteps, int max_out=64, tuple dag=None):
        if dag is None:
            check_status(sc_prog_create(&self.p, nsteps, max_out), "program")
        else:  # (vertices, sources, sinks, phases in flight): a DAG run by phases (exec/dag.h)
            nv, nsrc, nsink, phases = dag
            check_status(sc_dag_create(&self.d, nsteps, nv, nsrc, nsink, phases, max_out), "dag")
            self.source_schemas = []
            self.sink_schemas = []
        self.nsteps = nsteps
        self.entities = []
        self.speculators = []
        self.schemas = []
        self.op_steps = []

    def __dealloc__(self):
        self._release()

    cdef _cancel_speculators(self):
        # a batch in flight in a speculate operator returns promptly (exec/speculate.h)
        if self.speculators and not self._closed():
            for op in self.speculators:
                sc_op_speculate_cancel(<void *><uintptr_t>op)

    cdef _release(self):
        self._cancel_speculators()
        self.speculators = []
        self._end_pacer()
        if self.p != NULL:
            with nogil:
                sc_prog_destroy(self.p)
            self.p = NULL
        if self.d != NULL:
            with nogil:
                sc_dag_destroy(self.d)
            self.d = NULL
        self._free_entities()
        sc_arrow_reclaim()  # the arrays the freed batches pointed into

    cdef bint _closed(self):
        return self.p == NULL and self.d == NULL

    cdef int _add(self, const char *name, sc_op_kind kind, sc_op_run_fn run, sc_op_destroy_fn destroy, void *st,
                  sc_op_base *base):
        if self.d != NULL:
            return sc_dag_add_op(self.d, self.vertex, name, kind == SC_OP_STATELESS, run, destroy, st, base)
        return sc_prog_add(self.p, name, kind, run, destroy, st, base)

    cdef int _add_keyed(self, const char *name, sc_op_run_fn run, sc_op_destroy_fn destroy, void **states,
                        sc_op_base **bases, uint32_t partitions, const int32_t *keys, int32_t nkeys,
                        const sc_schema *si, const sc_schema *so):
        cdef uint32_t i
        if self.d != NULL:  # a DAG vertex runs its phases in order: one partition
            for i in range(1, partitions):
                destroy(states[i])
            return sc_dag_add_op(self.d, self.vertex, name, False, run, destroy, states[0], bases[0])
        return sc_prog_add_keyed(self.p, name, run, destroy, states, bases, partitions, keys, nkeys, si, so)

    cdef sc_step_counters *_ctr(self, int step):
        if self.d != NULL:
            return sc_dag_counters(self.d, step)
        return sc_prog_counters(self.p, step)

    cdef _free_entities(self):
        if self.entities:
            for a in self.entities:
                sc_entities_destroy(<sc_entities *><uintptr_t>a)
            self.entities = []

    def close(self):
        """Stop the workers and free everything (idempotent)."""
        self._release()

    def add_step(self, int step, bytes in_lts, bytes out_lts, uintptr_t kernel, list keys, list args,
                 bytes kinds, bytes ret, int64_t state_size, int partitions, int64_t capacity):
        """A keyed step over a typed state struct (exec/ops_step.h): the compiled kernel at
        address ``kernel`` with one ``state_size``-byte state per key; partitioned by ``keys``
        ``partitions`` ways (one instance without keys, and in a DAG vertex)."""
        cdef _Schema si = _Schema(in_lts)
        cdef _Schema so = _Schema(out_lts)
        cdef int32_t *ks = _ints(keys)
        cdef int32_t *cols = _ints(args)
        cdef int nparts = partitions if keys else 1
        cdef void **states = <void **>calloc(nparts, sizeof(void *))
        cdef sc_op_base **bases = <sc_op_base **>calloc(nparts, sizeof(sc_op_base *))
        cdef sc_op_base b
        cdef int rc = 0
        cdef int i
        try:
            if kernel == 0 or len(kinds) != len(args) or len(ret) != 1:
                raise ValueError("add_step: a step kernel, one kind per argument, one return kind")
            if states == NULL or bases == NULL:
                raise MemoryError()
            for i in range(nparts):
                self._base(&b, step, True, True, si, so, capacity, False)
                rc = sc_op_step_create(&states[i], &b, <sc_step_kernel>kernel, ks, <int32_t>len(keys), cols,
                                       kinds, <int32_t>len(args), ret[0], state_size)
                sc_op_base_free(&b)
                if rc < 0:
                    for j in range(i):
                        sc_op_step_destroy(states[j])
                    check_status(rc, f"apply step {step}")
                bases[i] = <sc_op_base *>states[i]
            check_status(self._add_keyed(b"apply", sc_op_step_run, sc_op_step_destroy, states, bases, nparts,
                                         ks, <int32_t>len(keys), &si.s, &so.s), "apply")
        finally:
            free(ks)
            free(cols)
            free(states)
            free(bases)
        self.schemas.extend([si, so, so])

    def add_speculate(self, int step, bytes in_lts, bytes out_lts, uintptr_t kernel, list args, bytes kinds,
                      int workers, int horizon, int max_horizon, int64_t capacity):
        """A speculate stage (exec/ops_speculate.h): the transactional kernel at address
        ``kernel`` (a compiled UDF module's, exec/txn.h) run per row on ``workers`` threads;
        ``horizon`` 0 is adaptive. Returns the operator's address (for speculate_stats)."""
        cdef _Schema si = _Schema(in_lts)
        cdef _Schema so = _Schema(out_lts)
        cdef int32_t *cols = _ints(args)
        cdef sc_spec_config cfg
        cdef sc_op_base b
        cdef void *st = NULL
        if kernel == 0 or len(kinds) != len(args):
            free(cols)
            raise ValueError("add_speculate: a transactional kernel and one kind per argument")
        cfg.workers = workers
        cfg.horizon = horizon
        cfg.max_horizon = max_horizon
        try:
            self._base(&b, step, True, True, si, so, capacity, False)
            rc = sc_op_speculate_create(&st, &b, <sc_txn_kernel>kernel, cols, kinds, <int32_t>len(args), &cfg)
            sc_op_base_free(&b)
            check_status(rc, f"speculate step {step}")
        finally:
            free(cols)
        check_status(self._add(b"speculate", SC_OP_STATEFUL, sc_op_speculate_run, sc_op_speculate_destroy,
                               st, <sc_op_base *>st), "speculate")
        self.schemas.append(so)
        self.speculators.append(<uintptr_t>st)
        return <uintptr_t>st

    def speculate_stats(self, uintptr_t op):
        """Counters of a speculate operator from add_speculate (while the program is open)."""
        if self._closed() or op not in self.speculators:
            raise ValueError("not a speculate operator of this open program")
        cdef sc_spec_stats st
        sc_op_speculate_stats(<void *>op, &st)
        return {"commits": st.commits, "aborts": st.aborts,
                "abort_rate": st.aborts / st.commits if st.commits else 0.0,
                "horizon": st.horizon, "horizon_mean": st.horizon_mean,
                "mode": "adaptive" if st.adaptive else "fixed", "workers": st.workers,
                "keys": st.keys, "store_bytes": st.store_bytes}

    def add_transfer(self, int step, bytes in_lts, bytes mid_lts, bytes out_lts, list keys, int amount,
                     bint is_float, double initial_f, int64_t initial_i, bint overdraft, bint serial,
                     list reasons, bytes rejected, int64_t capacity):
        """A multi-entity transfer (exec/ops_entities.h): ORDER (stateful) then APPLY
        (stateless, many workers) over one entity table. Returns the table's address."""
        cdef _Schema si = _Schema(in_lts)
        cdef _Schema sm = _Schema(mid_lts)
        cdef _Schema so = _Schema(out_lts)
        cdef sc_entities *ents = NULL
        cdef int32_t ks[2]
        cdef const char *rs[5]
        cdef sc_op_base b
        cdef void *st = NULL
        cdef list keep = [bytes(r) for r in reasons]
        ks[0], ks[1] = keys
        for i in range(5):
            rs[i] = <const char *>keep[i]
        check_status(sc_entities_create(&ents, is_float, initial_f, initial_i, overdraft, serial), "entities")
        self.entities.append(<uintptr_t>ents)
        self._base(&b, step, True, False, si, sm, capacity, True)
        rc = sc_op_order_create(&st, &b, ents, ks, amount, rs)
        sc_op_base_free(&b)
        check_status(rc, f"transfer step {step} (order)")
        check_status(self._add(b"order", SC_OP_STATEFUL, sc_op_order_run, sc_op_order_destroy,
                                 st, <sc_op_base *>st), "order")
        self.schemas.append(sm)
        self._base(&b, step, False, True, sm, so, capacity, True)
        rc = sc_op_apply_create(&st, &b, ents, amount, rejected)
        sc_op_base_free(&b)
        check_status(rc, f"transfer step {step} (apply)")
        check_status(self._add(b"apply", SC_OP_STATELESS, sc_op_apply_run, sc_op_apply_destroy,
                                 st, <sc_op_base *>st), "apply")
        self.schemas.append(so)
        return <uintptr_t>ents

    def entity_stats(self, uintptr_t table):
        """(entities, events that waited for a ticket) of a table from add_transfer."""
        if table not in self.entities:
            raise ValueError("not an entity table of this program")
        cdef sc_entities *e = <sc_entities *>table
        return sc_entities_count(e), sc_entities_waits(e)

    cdef int _base(self, sc_op_base *b, int step, bint cin, bint cout, _Schema i, _Schema o, int64_t capacity,
                   bint side) except -1:
        return check_status(sc_op_base_init(b, step, cin, cout, self._ctr(step), &i.s, &o.s,
                                            capacity, side), "operator")

    def set_input(self, bytes lts, bytes keep_views=None, bint lean=False):
        """The input schema (type codes, hidden columns first); ``keep_views``: one byte per
        column, nonzero where a string column is read by no operator (only carried to the
        sink), so Polars' inline string views pass through as they are (arrow_bridge.h);
        ``lean``: the batches :meth:`push_many` pushes are lean (exec/exec.h: their hidden
        columns are not written), for a program that never reads them."""
        self.in_schema = _Schema(lts)
        if keep_views is not None and len(keep_views) != len(lts):
            raise ValueError("keep_views needs one flag per input column")
        self.keep_views = keep_views
        self.lean = lean

    cdef void *_filter(self, int step, bint cin, bint cout, bytes lts, list pred, int64_t capacity) except NULL:
        cdef _Schema s = _Schema(lts)
        cdef _Nodes n = _Nodes(pred)
        cdef sc_op_base b
        cdef void *st = NULL
        self._base(&b, step, cin, cout, s, s, capacity, True)
        rc = sc_op_filter_create(&st, &b, n.nodes, n.n)
        sc_op_base_free(&b)
        check_status(rc, f"filter step {step}")
        self.schemas.append(s)
        return st

    cdef void *_project(self, int step, bint cin, bint cout, bytes in_lts, bytes out_lts, list src, list exprs,
                        int64_t capacity) except NULL:
        cdef _Schema si = _Schema(in_lts)
        cdef _Schema so = _Schema(out_lts)
        cdef list nodes = [_Nodes(e) for e in exprs]
        cdef int nex = len(nodes)
        cdef const sc_enode **ptrs = <const sc_enode **>malloc(max(nex, 1) * sizeof(sc_enode *))
        cdef int32_t *lens = <int32_t *>malloc(max(nex, 1) * sizeof(int32_t))
        cdef int32_t *srcs = _ints(src)
        cdef _Nodes n
        for k in range(nex):
            n = nodes[k]
            ptrs[k] = n.nodes
            lens[k] = n.n
        cdef sc_op_base b
        cdef void *st = NULL
        try:
            self._base(&b, step, cin, cout, si, so, capacity, True)
            rc = sc_op_project_create(&st, &b, srcs, <int32_t>len(src), ptrs, lens, nex)
            sc_op_base_free(&b)
            check_status(rc, f"project step {step}")
        finally:
            free(ptrs)
            free(lens)
            free(srcs)
        self.schemas.append(so)
        return st

    def add_filter(self, int step, bint cin, bint cout, bytes lts, list pred, int64_t capacity):
        cdef void *st = self._filter(step, cin, cout, lts, pred, capacity)
        check_status(self._add(b"filter", SC_OP_STATELESS, sc_op_filter_run, sc_op_filter_destroy,
                               st, <sc_op_base *>st), "filter")

    def add_project(self, int step, bint cin, bint cout, bytes in_lts, bytes out_lts, list src, list exprs,
                    int64_t capacity):
        cdef void *st = self._project(step, cin, cout, in_lts, out_lts, src, exprs, capacity)
        check_status(self._add(b"project", SC_OP_STATELESS, sc_op_project_run, sc_op_project_destroy,
                               st, <sc_op_base *>st), "project")

    def add_fused(self, list parts):
        """Consecutive filter / project steps as one fused stage (exec/expr.h): ``parts`` are
        ("filter", step, cin, cout, lts, pred, capacity) and ("project", step, cin, cout,
        in_lts, out_lts, src, exprs, capacity), as add_filter / add_project take them. Chains only."""
        cdef int np = len(parts)
        cdef void **states = <void **>calloc(np, sizeof(void *))
        cdef uint8_t *kinds = <uint8_t *>calloc(np, 1)
        cdef void *st = NULL
        cdef sc_op_base **bases = NULL
        cdef int rc = SC_ENOMEM
        try:
            for i in range(np if states != NULL and kinds != NULL else 0):
                a = parts[i]
                kinds[i] = 1 if a[0] == "filter" else 2
                if kinds[i] == 1:
                    states[i] = self._filter(a[1], a[2], a[3], a[4], a[5], a[6])
                else:
                    states[i] = self._project(a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8])
        finally:  # the stage owns the parts whatever it returns (an error frees them)
            if states != NULL and kinds != NULL:
                rc = sc_op_fused_create(&st, &bases, states, kinds, np)
            free(states)
            free(kinds)
        check_status(rc, "fused stage")
        check_status(sc_prog_add_bases(self.p, b"fused", SC_OP_STATELESS, sc_op_fused_run, sc_op_fused_destroy,
                                       st, bases, np), "fused stage")

    def add_keyed(self, str kind, int step, bint cin, bint cout, bytes in_lts, bytes out_lts, list keys,
                  int partitions, int64_t capacity, list aggs=None, list outs=None, int by=-1, int k=0,
                  bint descending=False, int64_t publish_ns=0, int64_t publish_max_ns=0,
                  bint publish_complete=False):
        """kind: aggregate (also running), topk or dedup. ``publish_ns`` > 0 (an aggregate with
        keys): publish the changed keys first after that long, then at an interval doubling up
        to ``publish_max_ns`` (default: publish_ns), and at end of stream, instead of one row
        per input row (exec/ops_state.h, exec/program.h). ``publish_complete``: the end-of-stream
        publish holds every key, its rows marked pos 1 (a table replaces its rows with them)."""
        cdef _Schema si = _Schema(in_lts)
        cdef _Schema so = _Schema(out_lts)
        cdef int32_t *ks = _ints(keys)
        cdef sc_agg_spec *ag = _aggs(aggs or [])
        cdef sc_out_col *oc = _outs(outs or [])
        cdef sc_keyed_spec spec
        cdef void **states = <void **>calloc(partitions, sizeof(void *))
        cdef sc_op_base **bases = <sc_op_base **>calloc(partitions, sizeof(sc_op_base *))
        cdef sc_op_base b
        cdef sc_op_run_fn run
        cdef sc_op_destroy_fn destroy
        cdef int rc = 0
        cdef int i
        spec.keys = ks
        spec.nkeys = <int32_t>len(keys)
        spec.aggs = ag
        spec.naggs = <int32_t>len(aggs or [])
        spec.outs = oc
        spec.publish = (SC_PUBLISH_COMPLETE if publish_complete else 1) if publish_ns > 0 and kind == "aggregate" else 0
        if kind == "aggregate":
            run, destroy = sc_op_aggregate_run, sc_op_aggregate_destroy
        elif kind == "topk":
            run, destroy = sc_op_topk_run, sc_op_topk_destroy
        elif kind == "dedup":
            run, destroy = sc_op_dedup_run, sc_op_dedup_destroy
        else:
            raise ValueError(kind)
        try:
            for i in range(partitions):
                self._base(&b, step, cin, cout, si, so, capacity, False)
                if kind == "aggregate":
                    rc = sc_op_aggregate_create(&states[i], &b, &spec)
                elif kind == "topk":
                    rc = sc_op_topk_create(&states[i], &b, ks, spec.nkeys, by, k, descending, oc)
                else:
                    rc = sc_op_dedup_create(&states[i], &b, ks, spec.nkeys)
                sc_op_base_free(&b)
                if rc < 0:
                    for j in range(i):
                        destroy(states[j])
                    check_status(rc, f"{kind} step {step}")
                bases[i] = <sc_op_base *>states[i]
            check_status(self._add_keyed(kind.encode(), run, destroy, states, bases, partitions, ks,
                                           spec.nkeys, &si.s, &so.s), kind)
            if spec.publish and self.d == NULL:
                check_status(sc_prog_set_publish(self.p, <uint64_t>publish_ns,
                                                 <uint64_t>max(publish_ns, publish_max_ns)), "publish")
        finally:
            free(ks)
            free(ag)
            free(oc)
            free(states)
            free(bases)
        self.schemas.extend([si, so, so])

    def add_sketch(self, int step, bint cin, bint cout, bytes lts, list keys, list specs, int partitions,
                   int64_t capacity):
        """A sketch tap (exec/ops_sketch.h): specs are (kind, column, param) triples; with keys it
        runs partitioned ``partitions`` ways. Returns a :class:`SketchTap` for queries."""
        cdef _Schema s = _Schema(lts)
        cdef int32_t *ks = _ints(keys)
        cdef int nspec = len(specs)
        cdef sc_sketch_spec *sp = <sc_sketch_spec *>malloc(max(nspec, 1) * sizeof(sc_sketch_spec))
        cdef int nparts = partitions if keys else 1
        cdef void **states = <void **>calloc(nparts, sizeof(void *))
        cdef sc_op_base **bases = <sc_op_base **>calloc(nparts, sizeof(sc_op_base *))
        cdef sc_op_base b
        cdef int rc = 0
        cdef int i
        cdef SketchTap tap = SketchTap.__new__(SketchTap)
        if sp == NULL or states == NULL or bases == NULL:
            free(ks); free(sp); free(states); free(bases)
            raise MemoryError()
        for i in range(nspec):
            sp[i].kind, sp[i].col, sp[i].param = specs[i]
        try:
            for i in range(nparts):
                self._base(&b, step, cin, cout, s, s, capacity, False)
                rc = sc_op_sketch_create(&states[i], &b, ks, <int32_t>len(keys), sp, nspec)
                sc_op_base_free(&b)
                if rc < 0:
                    for j in range(i):
                        sc_op_sketch_destroy(states[j])
                    check_status(rc, f"sketch step {step}")
                bases[i] = <sc_op_base *>states[i]
            tap.states = [<uintptr_t>states[i] for i in range(nparts)]
            tap.schema = s
            tap.program = self
            if keys:
                check_status(self._add_keyed(b"sketch", sc_op_sketch_run, sc_op_sketch_destroy, states,
                                               bases, nparts, ks, <int32_t>len(keys), &s.s, &s.s), "sketch")
                self.schemas.extend([s, s, s])
            else:
                check_status(self._add(b"sketch", SC_OP_STATEFUL, sc_op_sketch_run,
                                         sc_op_sketch_destroy, states[0], bases[0]), "sketch")
                self.schemas.append(s)
        finally:
            free(ks)
            free(sp)
            free(states)
            free(bases)
        return tap

    def add_window(self, int step, bint cin, bint cout, bytes in_lts, bytes out_lts, list keys, list aggs,
                   list outs, int kind, int time_col, int64_t size, int64_t every, int64_t lateness,
                   int64_t capacity):
        cdef _Schema si = _Schema(in_lts)
        cdef _Schema so = _Schema(out_lts)
        cdef sc_window_spec spec
        cdef sc_op_base b
        cdef void *st = NULL
        memset(&spec, 0, sizeof(spec))
        spec.keyed.keys = _ints(keys)
        spec.keyed.nkeys = <int32_t>len(keys)
        spec.keyed.aggs = _aggs(aggs)
        spec.keyed.naggs = <int32_t>len(aggs)
        spec.keyed.outs = _outs(outs)
        spec.kind = kind
        spec.time_col = time_col
        spec.size = size
        spec.every = every
        spec.lateness = lateness
        try:
            self._base(&b, step, cin, cout, si, so, capacity, True)
            rc = sc_op_window_create(&st, &b, &spec)
            sc_op_base_free(&b)
            check_status(rc, f"window step {step}")
        finally:
            free(<void *>spec.keyed.keys)
            free(<void *>spec.keyed.aggs)
            free(<void *>spec.keyed.outs)
        check_status(self._add(b"window", SC_OP_STATEFUL, sc_op_window_run, sc_op_window_destroy,
                                 st, <sc_op_base *>st), "window")
        self.schemas.append(so)

    def add_join(self, int step, bint cin, bint cout, bytes in_lts, bytes out_lts, list widths,
                 list left_keys, list right_keys, list time_cols, int64_t within, int64_t lateness,
                 list outs, bytes reason, int64_t capacity):
        """A keyed interval join (exec/ops_join.h), one stateful operator over the tagged
        layout of its two inputs (exec/fanin.h): ``widths`` their user column counts,
        ``left_keys`` / ``right_keys`` / ``time_cols`` / ``outs`` tagged column indexes."""
        cdef _Schema si = _Schema(in_lts)
        cdef _Schema so = _Schema(out_lts)
        cdef sc_join_spec spec
        cdef sc_op_base b
        cdef void *st = NULL
        if len(widths) != 2 or len(time_cols) != 2 or len(left_keys) != len(right_keys):
            raise ValueError("add_join: two inputs, one key list per side")
        memset(&spec, 0, sizeof(spec))
        spec.width[0], spec.width[1] = widths
        spec.time_col[0], spec.time_col[1] = time_cols
        spec.keys[0] = _ints(left_keys)
        spec.keys[1] = _ints(right_keys)
        spec.nkeys = <int32_t>len(left_keys)
        spec.within = within
        spec.lateness = lateness
        spec.outs = _ints(outs)
        spec.dead_reason = reason
        try:
            self._base(&b, step, cin, cout, si, so, capacity, True)
            rc = sc_op_join_create(&st, &b, &spec)
            sc_op_base_free(&b)
            check_status(rc, f"join step {step}")
        finally:
            free(<void *>spec.keys[0])
            free(<void *>spec.keys[1])
            free(<void *>spec.outs)
        check_status(self._add(b"join", SC_OP_STATEFUL, sc_op_join_run, sc_op_join_destroy,
                                 st, <sc_op_base *>st), "join")
        self.schemas.append(so)

    def add_correlate(self, int step, bint cin, bint cout, bytes in_lts, bytes out_lts, list widths,
                      list keys, list time_cols, int64_t over, int64_t lateness, list aggs, list outs,
                      bytes reason, int64_t capacity):
        """A correlate step (exec/ops_correlate.h), one stateful operator over the tagged
        layout of its inputs: ``keys`` one list of tagged key columns per input, ``aggs``
        (fn, port, tagged column or -1) triples, ``outs`` (kind, arg) pairs."""
        cdef _Schema si = _Schema(in_lts)
        cdef _Schema so = _Schema(out_lts)
        cdef sc_corr_spec spec
        cdef sc_op_base b
        cdef void *st = NULL
        cdef int nports = len(widths)
        cdef int nkeys = len(keys[0]) if keys else 0
        cdef int j
        if len(keys) != nports or len(time_cols) != nports or any(len(k) != nkeys for k in keys):
            raise ValueError("add_correlate: one key list and one time column per input")
        memset(&spec, 0, sizeof(spec))
        spec.nports = nports
        spec.nkeys = nkeys
        spec.over = over
        spec.lateness = lateness
        spec.naggs = <int32_t>len(aggs)
        spec.dead_reason = reason
        cdef sc_corr_agg *ag = <sc_corr_agg *>malloc(max(len(aggs), 1) * sizeof(sc_corr_agg))
        if ag == NULL:
            raise MemoryError()
        for j in range(len(aggs)):
            ag[j].fn, ag[j].port, ag[j].col = aggs[j]
        spec.aggs = ag
        try:
            spec.width = _ints(widths)
            spec.keys = _ints([c for k in keys for c in k])
            spec.time_col = _ints(time_cols)
            spec.out_kind = _ints([k for k, _ in outs])
            spec.out_arg = _ints([a for _, a in outs])
            self._base(&b, step, cin, cout, si, so, capacity, True)
            rc = sc_op_correlate_create(&st, &b, &spec)
            sc_op_base_free(&b)
            check_status(rc, f"correlate step {step}")
        finally:
            free(ag)
            free(<void *>spec.width)
            free(<void *>spec.keys)
            free(<void *>spec.time_col)
            free(<void *>spec.out_kind)
            free(<void *>spec.out_arg)
        check_status(self._add(b"correlate", SC_OP_STATEFUL, sc_op_correlate_run,
                                 sc_op_correlate_destroy, st, <sc_op_base *>st), "correlate")
        self.schemas.append(so)

    def add_explode(self, int step, bint cin, bint cout, bytes in_lts, bytes out_lts, list cols,
                    bytes reason, int64_t capacity):
        cdef _Schema si = _Schema(in_lts)
        cdef _Schema so = _Schema(out_lts)
        cdef sc_op_base b
        cdef void *st = NULL
        cdef int32_t *cs = _ints(cols)
        try:
            self._base(&b, step, cin, cout, si, so, capacity, True)
            rc = sc_op_explode_create(&st, &b, cs, <int32_t>len(cols), reason)
            sc_op_base_free(&b)
            check_status(rc, f"explode step {step}")
        finally:
            free(cs)
        check_status(self._add(b"explode", SC_OP_STATELESS, sc_op_explode_run, sc_op_explode_destroy,
                                 st, <sc_op_base *>st), "explode")
        self.schemas.append(so)

    def set_output(self, bytes lts, int64_t coalesce_rows=0):
        """The output schema; with ``coalesce_rows`` the sink joins output batches into chunks
        of up to that many rows on the worker that delivers them (exec/program.h)."""
        self.out_schema = _Schema(lts)
        if coalesce_rows:
            check_status(sc_prog_set_coalesce(self.p, &self.out_schema.s, coalesce_rows), "set_output")

    def op_names(self):
        return [sc_prog_op_name(self.p, j).decode() for j in range(sc_prog_nops(self.p))]

    def start(self, int workers=1, str scheduler="CT", str reorder="nonblocking", str keyed="hybrid",
              int partitions=0, int window=0, int marker_every=16, uint64_t idle_sleep_ns=0):
        cdef sc_pool_config cfg
        cdef int rc
        if self.d != NULL:
            with nogil:
                rc = sc_dag_start(self.d, workers)
            check_status(rc, "start (dag)")
            self.started = True
            return
        memset(&cfg, 0, sizeof(cfg))
        cfg.workers = workers
        cfg.sched.policy = SCHEDULERS[scheduler]
        cfg.reorder = REORDERS[reorder]
        cfg.unordered = reorder == "none"
        cfg.keyed = KEYED_QUEUES[keyed]
        cfg.partitions = partitions
        cfg.window = window
        cfg.marker_every = marker_every
        cfg.idle_sleep_ns = idle_sleep_ns
        with nogil:
            rc = sc_prog_start(self.p, &cfg)
        check_status(rc, "start")
        self.started = True

    cdef sc_extbuf *_hold(self, batch) except NULL:
        """The record batch's Arrow array, moved into a hold its runtime batches point into,
        type-checked against the input schema here, on the caller's thread."""
        if isinstance(batch, HeldChunk):  # type-checked when it was read: one more reference
            if (<HeldChunk>batch).hold == NULL or (<HeldChunk>batch).owner is not self:
                raise ValueError("a HeldChunk goes only to the program whose column_streams read it")
            sc_extbuf_ref((<HeldChunk>batch).hold)
            return (<HeldChunk>batch).hold
        schema_capsule, array_capsule = batch.__arrow_c_array__()
        cdef ArrowSchema *sch = <ArrowSchema *>PyCapsule_GetPointer(schema_capsule, "arrow_schema")
        cdef ArrowArray *arr = <ArrowArray *>PyCapsule_GetPointer(array_capsule, "arrow_array")
        cdef sc_extbuf *hold = NULL
        cdef const uint8_t *keep = NULL
        cdef int rc
        sc_arrow_reclaim()  # release the arrays earlier batches no longer use (here, with the GIL)
        check_status(sc_arrow_hold_create(&hold, arr), "push")
        hold.shared = self.share_sources
        if self.keep_views is not None:
            keep = <const uint8_t *>self.keep_views
        rc = sc_arrow_hold_defer(hold, sch, &self.in_schema.s, keep)
        if rc != SC_OK:
            sc_extbuf_unref(hold)
            check_status(rc, "push")
        return hold

    def push_many(self, batch, int64_t offset, int64_t n, int64_t seq0, int64_t batch_size,
                  int64_t timeout_ns=-1):
        """Hand rows [offset, offset+n) to the runtime as batches of up to ``batch_size`` rows,
        in one call without the GIL (each batch is imported by the worker that runs it).
        Returns (status, rows taken): OK with ``n``, or FULL / CLOSED with fewer when the
        pipeline stayed full for ``timeout_ns`` or was closed (the rest is not taken). A
        throttled source is pushed by the pacer instead (:meth:`pace`)."""
        cdef int rc = 0
        cdef int64_t done = 0
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        if self.pacer != NULL:  # exec/pacer.h: the program's only feeder until pace_end()
            raise ValueError("push_many: the pacer feeds this program (pace_end() first)")
        cdef sc_extbuf *hold = self._hold(batch)
        with nogil:
            rc = self._push_slices(hold, offset, n, seq0, batch_size, timeout_ns, &done)
            sc_extbuf_unref(hold)
        if rc != SC_OK and rc != SC_EFULL and rc != SC_ECLOSED:
            check_status(rc, "push")
        return rc, done

    cdef int _push_slices(self, sc_extbuf *hold, int64_t offset, int64_t n, int64_t seq0, int64_t batch_size,
                          int64_t timeout_ns, int64_t *done) noexcept nogil:
        """Push rows [offset, offset+n) of ``hold`` (source rows ``seq0``..) as deferred batches
        of up to ``batch_size`` rows; ``*done``: the rows pushed. The first status that is not
        OK ends it (FULL after ``timeout_ns``, CLOSED)."""
        cdef sc_batch *b = NULL
        cdef int rc = SC_OK
        cdef int64_t m
        done[0] = 0
        while done[0] < n:
            m = batch_size if batch_size < n - done[0] else n - done[0]
            b = NULL
            # a batch that names its rows: the worker that runs it imports them (and
            # allocates its buffers), so this thread only hands out slices
            rc = sc_batch_new_shell(&b, &self.in_schema.s)
            if rc == 0:
                b.lean = self.lean
                rc = sc_arrow_defer(b, hold, offset + done[0], m, seq0 + done[0])
            if rc == 0:
                rc = sc_prog_push(self.p, b, timeout_ns)
                if rc == SC_OK:
                    b = NULL
            if b != NULL:
                sc_batch_release(b)
            if rc != SC_OK:
                break
            done[0] += m
        return rc

    def column_streams(self, list capsules):
        """A source read as one Arrow C stream per input column (``__arrow_c_stream__``
        capsules, moved in), the columns' chunks taken in step (exec/arrow_columns.h), for
        :meth:`push_columns`: a Polars frame's columns exported on their own, their chunks as
        they are, with no Python object per chunk."""
        cdef int32_t k = len(capsules)
        if k == 0:
            raise ValueError("column_streams: one stream per input column")
        cdef ArrowArrayStream *moved = <ArrowArrayStream *>calloc(k, sizeof(ArrowArrayStream))
        if moved == NULL:
            raise MemoryError("column_streams: out of memory")
        cdef ArrowArrayStream *st
        cdef const uint8_t *keep = NULL
        cdef ColumnStreams src = ColumnStreams.__new__(ColumnStreams)
        cdef int rc
        cdef int32_t taken = 0
        try:
            for j in range(k):
                st = <ArrowArrayStream *>PyCapsule_GetPointer(capsules[j], "arrow_array_stream")
                moved[j] = st[0]
                st.release = NULL  # moved: the capsule no longer releases it
                taken += 1
            if self.keep_views is not None:
                keep = <const uint8_t *>self.keep_views
            rc = sc_arrow_columns_create(&src.c, moved, k, &self.in_schema.s, keep, self.share_sources)
        except BaseException:
            for j in range(taken):  # moved out of their capsules: released here
                if moved[j].release != NULL:
                    moved[j].release(&moved[j])
            raise
        finally:
            free(moved)
        check_status(rc, "column_streams")
        src.owner = self
        return src

    def push_columns(self, ColumnStreams src, int64_t max_rows, int64_t seq0, int64_t batch_size,
                     int64_t timeout_ns=-1):
        """Hand up to ``max_rows`` of ``src``'s next rows to the runtime as :meth:`push_many`
        does (batches of up to ``batch_size`` rows, imported by the workers): (status, rows
        taken, whether ``src`` has no rows left). A chunk is type-checked when it is read
        (a ``TypeError``, as :meth:`push_many`'s)."""
        cdef int rc = SC_OK
        cdef int64_t done = 0, m, took = 0
        cdef bint ended = False
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        if self.pacer != NULL:  # exec/pacer.h: the program's only feeder until pace_end()
            raise ValueError("push_columns: the pacer feeds this program (pace_end() first)")
        if src.owner is not self:
            raise ValueError("push_columns: the column streams of another program")
        if src.pending is not None:  # a read that failed after rows of the last call went in
            err, src.pending = src.pending, None
            raise err
        sc_arrow_reclaim()  # release the arrays earlier batches no longer use (with the GIL)
        while done < max_rows:
            if src.hold == NULL:
                try:
                    src.hold = src._next()
                except Exception as e:
                    if done == 0:
                        raise
                    src.pending = e  # the rows taken so far count first: raised next call
                    break
                if src.hold == NULL:
                    ended = True
                    break
                src.off = 0
                src.length = sc_arrow_hold_array(src.hold).length
            m = src.length - src.off
            if m > max_rows - done:
                m = max_rows - done
            with nogil:
                rc = self._push_slices(src.hold, src.off, m, seq0 + done, batch_size, timeout_ns, &took)
            src.off += took
            done += took
            if src.off >= src.length:
                sc_extbuf_unref(src.hold)
                src.hold = NULL
            if rc != SC_OK:
                break
        if rc != SC_OK and rc != SC_EFULL and rc != SC_ECLOSED:
            check_status(rc, "push")
        return rc, done, ended

    def pace(self, double rate, int64_t batch_size, int64_t burst, uint64_t origin_ns,
             uint64_t catchup_ns):
        """Start the pacer (exec/pacer.h): from now on a throttled source's rows go in on its
        own thread, ``burst`` batches of ``batch_size`` rows together when the first one's
        rows are due (source row ``i`` at ``origin_ns + i / rate``, :func:`paced_due_ns`, on
        :func:`now_ns`'s clock), so the driver's work never delays a push. Where the schedule
        falls more than ``catchup_ns`` behind it restarts from now (a token bucket)."""
        if self.pacer != NULL or self.p == NULL or not self.started:
            raise ValueError("pace: a started chain program, once")
        if batch_size <= 0 or burst <= 0 or not rate > 0:
            raise ValueError("batch_size, burst and rate must be positive")
        check_status(
            sc_pacer_create(&self.pacer, self.p, &self.in_schema.s, self.lean, rate, batch_size,
                            burst, origin_ns, catchup_ns),
            "pace",
        )

    def pace_submit(self, batch, int64_t offset, int64_t n, int64_t seq0):
        """Queue rows [offset, offset+n) of ``batch`` (source rows ``seq0``..) for the pacer:
        OK, FULL while two jobs wait (wait and submit again), CLOSED once the run stopped."""
        if self.pacer == NULL:
            raise ValueError("pace_submit: no pacer")
        cdef sc_extbuf *hold = self._hold(batch)
        cdef int rc = sc_pacer_submit(self.pacer, hold, offset, n, seq0)
        sc_extbuf_unref(hold)  # the pacer holds its own reference
        if rc != SC_OK and rc != SC_EFULL and rc != SC_ECLOSED:
            check_status(rc, "push")
        return rc

    def pace_wait(self, int64_t timeout_ns):
        """(status, rows pushed so far, idle): waits up to ``timeout_ns`` without the GIL until
        a job is done or the outputs are due to be taken (or an error: CLOSED once the run
        stopped)."""
        cdef int64_t pushed = 0
        cdef int idle = 0
        cdef int rc
        if self.pacer == NULL:
            raise ValueError("pace_wait: no pacer")
        with nogil:
            rc = sc_pacer_wait(self.pacer, timeout_ns, &pushed, &idle)
        sc_arrow_reclaim()
        if rc != SC_OK and rc != SC_EFULL and rc != SC_ECLOSED:
            check_status(rc, "push")
        return rc, pushed, bool(idle)

    def pace_pushed(self):
        """(rows the pacer pushed so far, rows of the batch it is pushing at that instant): a
        snapshot, for counters read after metrics (an operator may count the batch being
        pushed before the pacer does)."""
        cdef int64_t in_flight = 0
        cdef int64_t pushed
        if self.pacer == NULL:
            raise ValueError("pace_pushed: no pacer")
        pushed = sc_pacer_pushed(self.pacer, &in_flight)
        return pushed, in_flight

    def pace_halt(self):
        """Push nothing more (the jobs are dropped; new ones may be queued): (status, rows
        pushed so far)."""
        cdef int64_t pushed = 0
        cdef int rc
        if self.pacer == NULL:
            raise ValueError("pace_halt: no pacer")
        with nogil:
            rc = sc_pacer_halt(self.pacer, &pushed)
        sc_arrow_reclaim()
        return rc, pushed

    cdef _end_pacer(self):
        if self.pacer != NULL:
            with nogil:
                sc_pacer_destroy(self.pacer)
            self.pacer = NULL

    def pace_end(self):
        """Halt the pacer and join its thread (idempotent)."""
        self._end_pacer()
        sc_arrow_reclaim()

    cdef int _collect(self, int64_t timeout_ns, int64_t max_rows, sc_batch_list *parts,
                      bint *eos, int *taken) noexcept nogil:
        """Every output batch ready now (waiting up to ``timeout_ns`` for the first), up to
        about ``max_rows`` rows, added to ``parts`` in order; an end of stream sets ``eos``.
        ``taken`` gets the first take's status; returns the first error adding to ``parts``."""
        cdef sc_batch *b = NULL
        cdef int rc, rc2 = SC_OK
        taken[0] = sc_prog_take(self.p, timeout_ns, &b)
        rc = taken[0]
        while rc == SC_OK and rc2 == SC_OK:
            if b.eos:
                sc_batch_release(b)
                eos[0] = True
                break
            rc2 = sc_batch_list_add(&parts[0], b)
            if parts.rows >= max_rows or rc2 != SC_OK:
                break
            rc = sc_prog_take(self.p, 0, &b)
        return rc2

    def take_many(self, int64_t timeout_ns=0, int64_t max_rows=65536):
        """(status, eos, pyarrow.RecordBatch | None): every output batch ready now (waiting up
        to ``timeout_ns`` for the first), up to about ``max_rows`` rows, joined in order into
        one record batch."""
        cdef sc_batch *joined = NULL
        cdef sc_batch_list parts
        cdef int rc = SC_OK, rc2
        cdef int32_t n = 0
        cdef bint eos = False
        memset(&parts, 0, sizeof(parts))
        sc_arrow_reclaim()
        with nogil:
            rc2 = self._collect(timeout_ns, max_rows, &parts, &eos, &rc)
            n = parts.n
            rc2 = _join(&parts, &self.out_schema.s, &joined, rc2)
        check_status(rc2, "take")
        if n == 0:
            return (SC_OK if eos else rc), eos, None
        return SC_OK, eos, _export(joined, &self.out_schema.s, self.out_schema)

    def take_chunks(self, int64_t timeout_ns=0, int64_t max_rows=65536):
        """(status, eos, [pyarrow.RecordBatch]): every output batch ready now (waiting up to
        ``timeout_ns`` for the first), up to about ``max_rows`` rows, in order, each exported
        as it is (no copy, no join): the chunks of one Arrow stream, for a frame built from
        chunks."""
        cdef sc_batch *b = NULL
        cdef sc_batch_list parts
        cdef int rc = SC_OK, rc2
        cdef int32_t i
        cdef bint eos = False
        cdef list out = []
        memset(&parts, 0, sizeof(parts))
        sc_arrow_reclaim()
        with nogil:
            rc2 = self._collect(timeout_ns, max_rows, &parts, &eos, &rc)
        try:
            check_status(rc2, "take")
            for i in range(parts.n):
                b = parts.b[i]
                parts.b[i] = NULL  # _export owns it from here (and releases it on failure)
                out.append(_export(b, &self.out_schema.s, self.out_schema))
        finally:
            for i in range(parts.n):
                if parts.b[i] != NULL:
                    sc_batch_release(parts.b[i])
            free(parts.b)
        if not out:
            return (SC_OK if eos else rc), eos, out
        return SC_OK, eos, out

    def take_batches(self, int64_t timeout_ns=0, int64_t max_rows=65536):
        """(status, eos, OutBatches | None): as :meth:`take_chunks`, the batches kept in C,
        for a consumer that reads them as one Arrow C stream (no Python object per batch)."""
        cdef sc_batch_list parts
        cdef int rc = SC_OK, rc2
        cdef bint eos = False
        memset(&parts, 0, sizeof(parts))
        sc_arrow_reclaim()
        with nogil:
            rc2 = self._collect(timeout_ns, max_rows, &parts, &eos, &rc)
        out = OutBatches(self.out_schema)
        out._absorb(&parts)  # owns them now, also on the error below
        check_status(rc2, "take")
        if not out.nbatches:
            return (SC_OK if eos else rc), eos, None
        return SC_OK, eos, out

    def finish(self, int64_t timeout_ns=-1):
        if self.pacer != NULL:
            raise ValueError("finish: the pacer feeds this program (pace_end() first)")
        with nogil:
            if self.d != NULL:
                rc = sc_dag_finish(self.d, timeout_ns)
            else:
                rc = sc_prog_finish(self.p, timeout_ns)
        if rc == SC_EFULL or rc == SC_ECLOSED:
            return rc
        check_status(rc, "finish")
        return rc

    def take(self, int64_t timeout_ns=0):
        """(status, eos, pyarrow.RecordBatch | None): the next output batch in order."""
        import pyarrow as pa
        cdef sc_batch *b = NULL
        cdef int rc
        cdef ArrowSchema *sch
        cdef ArrowArray *arr
        with nogil:
            rc = sc_prog_take(self.p, timeout_ns, &b)
        if rc != SC_OK:
            return rc, False, None
        eos = bool(b.eos)
        if eos:
            sc_batch_release(b)
            return rc, True, None
        return rc, False, _export(b, &self.out_schema.s)

    def sides(self):
        """Dead and late rows recorded since the last call: a list of
        (step, kinds, serials, rows, reasons, pyarrow.RecordBatch)."""
        cdef sc_side **sides = NULL
        cdef uint32_t n = 0
        cdef sc_batch *rows
        cdef sc_side_meta *meta
        cdef int64_t m
        cdef list out = []
        if self.d != NULL:
            check_status(sc_dag_sides(self.d, &sides, &n), "sides")
        else:
            check_status(sc_prog_sides(self.p, &sides, &n), "sides")
        cdef _Schema sch
        try:
            for i in range(n):
                sc_side_take(sides[i], &rows, &meta, &m)
                if m == 0:
                    if rows != NULL:
                        sc_batch_release(rows)
                    sc_side_meta_free(meta, m)
                    continue
                kinds = [meta[j].kind for j in range(m)]
                serials = [meta[j].serial for j in range(m)]
                rws = [meta[j].row for j in range(m)]
                reasons = [None if meta[j].reason == NULL else meta[j].reason.decode("utf-8", "replace")
                           for j in range(m)]
                sc_side_meta_free(meta, m)
                step = sc_side_step(sides[i])
                out.append((step, kinds, serials, rws, reasons, _export(rows, sc_side_schema(sides[i]))))
        finally:
            free(sides)
        return out

    def counters(self):
        """Per step: (rows_in, rows_out, filtered, dead, late)."""
        cdef sc_step_counters *c
        out = []
        for s in range(self.nsteps):
            c = self._ctr(s)
            out.append((sc_u64_load_relaxed(&c.rows_in), sc_u64_load_relaxed(&c.rows_out),
                        sc_u64_load_relaxed(&c.filtered), sc_u64_load_relaxed(&c.dead),
                        sc_u64_load_relaxed(&c.late)))
        return out

    def metrics(self):
        """Per operator counters and scheduler statistics, and the end-to-end latency."""
        if self.d != NULL:
            return self._dag_metrics()
        cdef uint32_t nops = sc_prog_nops(self.p)
        cdef sc_op_counters *oc = <sc_op_counters *>calloc(max(nops, 1), sizeof(sc_op_counters))
        cdef sc_latency_summary lat
        cdef sc_sched_op_stats st
        cdef const sc_sched *sched = sc_prog_sched(self.p)
        if sc_prog_metrics(self.p) == NULL:
            free(oc)
            return {"ops": [], "latency": None}
        sc_metrics_snapshot(sc_prog_metrics(self.p), oc, nops, &lat)
        ops = []
        for j in range(nops):
            d = {"op": sc_prog_op_name(self.p, j).decode(), "rows_in": oc[j].rows_in, "rows_out": oc[j].rows_out,
                 "batches_in": oc[j].batches_in, "ns": oc[j].ns, "queue_depth": oc[j].queue_depth,
                 "workers": oc[j].workers, "state_size": sc_prog_state_size(self.p, j)}
            if sched != NULL and sc_sched_stats(sched, j, &st) == 0:
                d.update(cost_ns=st.cost_ns, selectivity=st.selectivity, queued=st.queued,
                         workers_now=st.workers, max_workers=st.max_workers, grants=st.grants)
            ops.append(d)
        free(oc)
        return {"ops": ops, "latency": {"count": lat.count, "p50_ns": lat.p50_ns, "p99_ns": lat.p99_ns,
                                        "max_ns": lat.max_ns, "mean_ns": lat.mean_ns}}

    def pause(self):
        return 0 if self.d != NULL else sc_prog_pause(self.p)  # a DAG pauses at its feeder

    def resume(self):
        return 0 if self.d != NULL else sc_prog_resume(self.p)

    def stop(self):
        cdef int rc
        self._cancel_speculators()
        with nogil:
            if self.d != NULL:
                rc = sc_dag_stop(self.d)
            elif self.p != NULL:
                rc = sc_prog_stop(self.p)
            else:
                rc = 0
        return rc

    def error(self):
        cdef uint32_t op = 0
        if self.d != NULL:
            rc = sc_dag_error(self.d, &op)
            if rc == 0:
                return None
            return rc, "vertex " + sc_dag_vertex_name(self.d, op).decode(), sc_status_name(rc).decode()
        rc = sc_prog_error(self.p, &op)
        if rc == 0:
            return None
        name = sc_prog_op_name(self.p, op)
        return rc, (name.decode() if name != NULL else "output"), sc_status_name(rc).decode()


    # ------------------------------------------------------------------ DAG mode (exec/dag.h)

    def dag_vertex(self, int v, str name, int nin, int sink):
        self.vertex = v
        check_status(sc_dag_vertex(self.d, v, name.encode()[:31], nin, sink), f"dag vertex {v}")

    def dag_source(self, int i, int v, bytes lts):
        """Source ``i`` (in push_phase order; declare them in order) feeds vertex ``v``."""
        if i != len(self.source_schemas):
            raise ValueError("declare sources in order")
        check_status(sc_dag_source(self.d, i, v), "dag source")
        self.source_schemas.append(_Schema(lts))

    def dag_sink(self, bytes lts):
        """The next sink queue's schema (sink queues are numbered in declaration order)."""
        self.sink_schemas.append(_Schema(lts))

    def dag_edge(self, int u, int w, int port):
        check_status(sc_dag_edge(self.d, u, w, port), f"dag edge {u}->{w}:{port}")

    def dag_merge(self, int v, bytes lts, list maps, int port_col):
        """Vertex v merges its ports into schema ``lts``; maps[p][c]: the input column of port
        p copied to merged column c (-1: null)."""
        cdef _Schema sch = _Schema(lts)
        cdef list flat = [c for m in maps for c in m]
        cdef int32_t *a = _ints(flat)
        try:
            check_status(sc_dag_merge(self.d, v, &sch.s, a, port_col), f"dag merge {v}")
        finally:
            free(a)

    def push_phase(self, list sources, int64_t timeout_ns=-1):
        """Start a phase: sources[i] is a list of (record batch, offset, n, seqs) pieces of
        source i (seqs: n merged serials, int64). Returns OK, FULL (nothing taken) or CLOSED."""
        cdef uint32_t nsrc = len(self.source_schemas)
        cdef sc_batch **chains = <sc_batch **>calloc(max(nsrc, 1), sizeof(sc_batch *))
        cdef sc_batch *b = NULL
        cdef sc_batch *tail = NULL
        cdef ArrowSchema *sch
        cdef ArrowArray *arr
        cdef const int64_t[::1] sq
        cdef _Schema target
        cdef int rc = 0
        cdef int64_t off, n
        cdef uint32_t i
        if chains == NULL:
            raise MemoryError()
        if len(sources) != nsrc:
            free(chains)
            raise ValueError("one piece list per source")
        try:
            for i in range(nsrc):
                target = self.source_schemas[i]
                tail = NULL
                for rb, off, n, seqs in sources[i]:
                    if n <= 0:
                        continue
                    schema_capsule, array_capsule = rb.__arrow_c_array__()
                    sch = <ArrowSchema *>PyCapsule_GetPointer(schema_capsule, "arrow_schema")
                    arr = <ArrowArray *>PyCapsule_GetPointer(array_capsule, "arrow_array")
                    sq = seqs
                    if sq.shape[0] != n:
                        raise ValueError("seqs must have n entries")
                    with nogil:
                        b = NULL
                        rc = sc_batch_new(&b, &target.s, n)
                        if rc == 0:
                            rc = sc_arrow_import(sch, arr, off, n, &target.s, b, 0)
                        if rc == 0:
                            memcpy(b.cols[0].values, &sq[0], n * sizeof(int64_t))
                            b.first_row = <uint64_t>sq[0]
                            if tail == NULL:
                                chains[i] = b
                            else:
                                tail.next = b
                            tail = b
                            b = NULL
                        elif b != NULL:
                            sc_batch_release(b)
                    check_status(rc, "push_phase")
            with nogil:
                rc = sc_dag_push(self.d, chains, timeout_ns)
            if rc == SC_OK:
                for i in range(nsrc):
                    chains[i] = NULL
            elif rc != SC_EFULL and rc != SC_ECLOSED:
                check_status(rc, "push_phase")
            return rc
        finally:
            for i in range(nsrc):
                if chains[i] != NULL:
                    sc_batch_release_chain(chains[i])
            free(chains)

    def push_phases(self, list sources, int64_t rounds, int64_t start=0, int64_t timeout_ns=-1):
        """Push consecutive phases of ``rounds`` rows of every source, in one call without the
        GIL: sources[i] is one piece (record batch, offset, n, seqs) with the same n for every
        source that has rows (None: no rows). Starts at phase ``start``; returns (status,
        phases pushed so far): OK when all are in, FULL / CLOSED when it stopped early."""
        cdef uint32_t nsrc = len(self.source_schemas)
        cdef list keep = []
        cdef ArrowSchema **schs = <ArrowSchema **>calloc(max(nsrc, 1), sizeof(ArrowSchema *))
        cdef ArrowArray **arrs = <ArrowArray **>calloc(max(nsrc, 1), sizeof(ArrowArray *))
        cdef const int64_t **sqs = <const int64_t **>calloc(max(nsrc, 1), sizeof(int64_t *))
        cdef const sc_schema **tgs = <const sc_schema **>calloc(max(nsrc, 1), sizeof(sc_schema *))
        cdef int64_t *offs = <int64_t *>calloc(max(nsrc, 1), sizeof(int64_t))
        cdef sc_batch **chains = <sc_batch **>calloc(max(nsrc, 1), sizeof(sc_batch *))
        cdef const int64_t[::1] sq
        cdef _Schema target
        cdef int64_t n = -1, q = start, nph, lo, m
        cdef uint32_t i
        cdef int rc = SC_OK
        cdef sc_batch *b
        try:
            if not (schs and arrs and sqs and tgs and offs and chains):
                raise MemoryError()
            if len(sources) != nsrc or rounds <= 0:
                raise ValueError("one piece (or None) per source, rounds > 0")
            for i in range(nsrc):
                if sources[i] is None:
                    continue
                rb, off, rows, seqs = sources[i]
                if n >= 0 and rows != n:
                    raise ValueError("every source's piece must have the same rows")
                n = rows
                caps = rb.__arrow_c_array__()
                keep.append((caps, seqs))
                schs[i] = <ArrowSchema *>PyCapsule_GetPointer(caps[0], "arrow_schema")
                arrs[i] = <ArrowArray *>PyCapsule_GetPointer(caps[1], "arrow_array")
                sq = seqs
                if sq.shape[0] != n:
                    raise ValueError("seqs must have n entries")
                sqs[i] = &sq[0] if n > 0 else NULL
                target = self.source_schemas[i]
                tgs[i] = &target.s
                offs[i] = off
            nph = (n + rounds - 1) // rounds if n > 0 else 0
            with nogil:
                while q < nph:
                    lo = q * rounds
                    m = n - lo if n - lo < rounds else rounds
                    for i in range(nsrc):
                        if schs[i] == NULL:
                            continue
                        b = NULL
                        rc = sc_batch_new(&b, tgs[i], m)
                        if rc == 0:
                            rc = sc_arrow_import(schs[i], arrs[i], offs[i] + lo, m, tgs[i], b, 0)
                        if rc != 0:
                            if b != NULL:
                                sc_batch_release(b)
                            break
                        memcpy(b.cols[0].values, sqs[i] + lo, m * sizeof(int64_t))
                        b.first_row = <uint64_t>sqs[i][lo]
                        chains[i] = b
                    if rc == 0:
                        rc = sc_dag_push(self.d, chains, timeout_ns)
                    if rc == SC_OK:
                        for i in range(nsrc):
                            chains[i] = NULL
                        q += 1
                        continue
                    for i in range(nsrc):
                        if chains[i] != NULL:
                            sc_batch_release(chains[i])
                            chains[i] = NULL
                    break
            if rc != SC_OK and rc != SC_EFULL and rc != SC_ECLOSED:
                check_status(rc, "push_phases")
            return rc, q
        finally:
            free(schs)
            free(arrs)
            free(sqs)
            free(tgs)
            free(offs)
            free(chains)

    def dag_discard(self, int sink):
        """Release every output batch waiting in sink queue ``sink`` (a ``sink none``);
        returns how many rows they held."""
        cdef sc_batch *b = NULL
        cdef int64_t rows = 0
        with nogil:
            while sc_dag_take(self.d, sink, &b) == SC_OK:
                rows += b.nrows
                sc_batch_release(b)
        return rows

    def dag_take(self, int sink, int64_t max_rows=65536):
        """Every output batch of sink queue ``sink`` waiting now (up to about ``max_rows``
        rows), joined in order into one pyarrow.RecordBatch; None when there is none."""
        cdef _Schema sch = self.sink_schemas[sink]
        cdef sc_batch *b = NULL
        cdef sc_batch *joined = NULL
        cdef sc_batch_list parts
        cdef int rc2 = SC_OK
        memset(&parts, 0, sizeof(parts))
        with nogil:
            while rc2 == SC_OK and parts.rows < max_rows and sc_dag_take(self.d, sink, &b) == SC_OK:
                rc2 = sc_batch_list_add(&parts, b)
            rc2 = _join(&parts, &sch.s, &joined, rc2)
        check_status(rc2, "dag take")
        if joined == NULL:
            return None
        return _export(joined, &sch.s)

    def dag_take_batches(self, int sink, int64_t max_rows=65536, int64_t join_below=4096):
        """The output batches of sink queue ``sink`` waiting now (up to about ``max_rows``
        rows), kept in C (an ``OutBatches``, read by Polars as one Arrow C stream: no pyarrow
        object); None when none is waiting. Batches of ``join_below`` rows or more pass as
        they are; each run of smaller ones is joined into one (a frame of many tiny chunks
        would cost every later query)."""
        cdef _Schema sch = self.sink_schemas[sink]
        cdef sc_batch *b = NULL
        cdef sc_batch *joined = NULL
        cdef sc_batch_list small, parts
        cdef int rc2 = SC_OK
        cdef int64_t rows = 0
        memset(&small, 0, sizeof(small))
        memset(&parts, 0, sizeof(parts))
        with nogil:
            while rc2 == SC_OK and rows < max_rows and sc_dag_take(self.d, sink, &b) == SC_OK:
                rows += b.nrows
                if b.nrows < join_below:
                    rc2 = sc_batch_list_add(&small, b)
                    continue
                if small.n:  # the small ones before it, joined, first
                    rc2 = _join(&small, &sch.s, &joined, rc2)
                    if rc2 == SC_OK and joined != NULL:
                        rc2 = sc_batch_list_add(&parts, joined)  # releases it on ENOMEM
                    joined = NULL
                if rc2 == SC_OK:
                    rc2 = sc_batch_list_add(&parts, b)
                else:
                    sc_batch_release(b)
            if small.n:
                rc2 = _join(&small, &sch.s, &joined, rc2)
                if rc2 == SC_OK and joined != NULL:
                    rc2 = sc_batch_list_add(&parts, joined)
        out = OutBatches(sch)
        out._absorb(&parts)  # owns them now, also on the error below
        check_status(rc2, "dag take")
        if out.nbatches == 0:
            return None
        return out

    def dag_wait(self, int64_t timeout_ns):
        """1 once the end-of-stream phase is done, 0 otherwise (after waiting up to
        ``timeout_ns`` for an output), CLOSED when stopped or failed."""
        cdef int rc
        with nogil:
            rc = sc_dag_wait(self.d, timeout_ns)
        return rc

    def dag_stats(self):
        """(totals, per-vertex list): phases, vertex-phase pairs executed and skipped."""
        cdef sc_dag_stats t
        cdef sc_dag_vstats vs
        cdef uint32_t nv = sc_dag_nvertices(self.d)
        sc_dag_stats_get(self.d, &t)
        verts = []
        for v in range(nv):
            sc_dag_vertex_stats(self.d, v, &vs)
            verts.append({"vertex": v, "name": sc_dag_vertex_name(self.d, v).decode(),
                          "executions": vs.executions, "skipped": t.phases - vs.executions if t.phases >= vs.executions else 0,
                          "rows_in": vs.rows_in, "rows_out": vs.rows_out, "ns": vs.ns,
                          "state_size": vs.state_size, "index_limit": vs.index_limit})
        total = {"phases": t.phases, "vertices": nv, "pairs": t.pairs, "possible": t.phases * nv,
                 "skipped": t.phases * nv - t.pairs, "in_flight_max": t.in_flight_max,
                 "concurrent_max": t.concurrent_max,
                 "latency": {"count": t.lat_count, "p50_ns": t.lat_p50_ns, "p99_ns": t.lat_p99_ns,
                             "max_ns": t.lat_max_ns, "mean_ns": t.lat_mean_ns}}
        return total, verts

    def _dag_metrics(self):
        total, verts = self.dag_stats()
        ops = [{"op": v["name"], "rows_in": v["rows_in"], "rows_out": v["rows_out"], "ns": v["ns"],
                "state_size": v["state_size"], "batches_in": v["executions"], "queue_depth": 0, "workers": 0}
               for v in verts]
        dag = {k: total[k] for k in ("phases", "vertices", "pairs", "possible", "skipped", "in_flight_max",
                                     "concurrent_max")}
        dag["per_vertex"] = verts
        return {"ops": ops, "latency": total["latency"], "dag": dag}

cdef class SketchTap:
    """Queries into a running sketch stage (exec/ops_sketch.h): safe from any thread while the
    program lives; the driver takes its final answers before it closes the program."""

    cdef public list states     # one sk_op per partition (addresses)
    cdef _Schema schema
    cdef Program program

    cdef void *_state(self, int part) except NULL:
        if self.program._closed():
            raise RuntimeError("the run's native program is closed")
        return <void *><uintptr_t>self.states[part]

    def nkeys(self, int part=0):
        return sc_op_sketch_nkeys(self._state(part))

    def keys(self, int part):
        """The first input row of every key of partition ``part`` (pyarrow.RecordBatch), or None."""
        cdef sc_batch *b = NULL
        cdef void *st = self._state(part)
        with nogil:
            rc = sc_op_sketch_keys(st, &b)
        check_status(rc, "sketch keys")
        if b == NULL:
            return None
        return _export(b, &self.schema.s)

    def summary(self, int part, int64_t key, int spec):
        """Headline numbers without a copy (exec/ops_sketch.h, sc_op_sketch_summary)."""
        cdef double out[7]
        cdef void *st = self._state(part)
        with nogil:
            rc = sc_op_sketch_summary(st, key, spec, out)
        check_status(rc, "sketch summary")
        return tuple(out[i] for i in range(7))

    def to_bytes(self, int part, int64_t key, int spec):
        """DataSketches bytes of sketch ``spec`` for key index ``key`` of partition ``part``."""
        cdef uint8_t *buf = NULL
        cdef size_t n = 0
        cdef void *st = self._state(part)
        with nogil:
            rc = sc_op_sketch_bytes(st, key, spec, &buf, &n)
        check_status(rc, "sketch bytes")
        try:
            return (<char *>buf)[:n]
        finally:
            free(buf)


cdef void _release_stream_capsule(object capsule) noexcept:
    cdef ArrowArrayStream *st = <ArrowArrayStream *>PyCapsule_GetPointer(capsule, "arrow_array_stream")
    if st.release != NULL:  # not moved out by a consumer
        st.release(st)
    free(st)


cdef class OutBatches:
    """Output batches of one schema, in order, kept in C until a consumer reads them all as
    one Arrow C stream (``__arrow_c_stream__``, e.g. ``polars.DataFrame(obj)``): no Python
    object per batch. Reading them moves them out; the object is then empty."""
    cdef sc_batch_list parts
    cdef _Schema schema
    cdef readonly int64_t num_rows

    def __cinit__(self, _Schema schema not None):
        memset(&self.parts, 0, sizeof(self.parts))
        self.schema = schema
        self.num_rows = 0

    def __dealloc__(self):
        cdef int32_t i
        for i in range(self.parts.n):
            sc_batch_release(self.parts.b[i])
        free(self.parts.b)

    cdef void _absorb(self, sc_batch_list *l):
        """Move every batch of ``l`` (emptied, its array freed) to the end of this one."""
        cdef int32_t i
        cdef int rc = SC_OK
        for i in range(l.n):
            if rc == SC_OK:
                rc = sc_batch_list_add(&self.parts, l.b[i])  # releases it on ENOMEM
                if rc == SC_OK:
                    self.num_rows += self.parts.b[self.parts.n - 1].nrows
            else:
                sc_batch_release(l.b[i])
        free(l.b)
        memset(l, 0, sizeof(l[0]))
        check_status(rc, "take")

    @property
    def nbatches(self):
        return self.parts.n

    def absorb(self, OutBatches other):
        """Move ``other``'s batches (same schema) to the end of this one."""
        if other is self:
            raise ValueError("OutBatches.absorb: an object cannot absorb itself")
        if other.schema is not self.schema:
            raise ValueError("OutBatches.absorb: another schema")
        other.num_rows = 0
        self._absorb(&other.parts)

    def __arrow_c_stream__(self, requested_schema=None):
        """The batches as one Arrow C stream of their visible columns (the two hidden ones
        left out; named c0, c1, ...), moved into it. ``requested_schema`` is not applied (the
        protocol lets a producer ignore it)."""
        cdef ArrowArrayStream *st = <ArrowArrayStream *>calloc(1, sizeof(ArrowArrayStream))
        if st == NULL:
            raise MemoryError()
        rc = sc_arrow_export_stream(self.parts.b, self.parts.n, &self.schema.s, 2, st)
        if rc != SC_OK:
            free(st)
            check_status(rc, "export")
        memset(&self.parts, 0, sizeof(self.parts))  # the stream owns them
        self.num_rows = 0
        try:
            return PyCapsule_New(st, "arrow_array_stream", _release_stream_capsule)
        except BaseException:
            st.release(st)
            free(st)
            raise


cdef object _export(sc_batch *b, const sc_schema *s, _Schema known=None):
    """``b`` as a pyarrow.RecordBatch (which owns it). With ``known`` (the _Schema that ``s``
    belongs to), the Arrow schema is imported once and reused: every batch of a schema
    exports the same one, and importing it costs pyarrow more than the batch's arrays."""
    import pyarrow as pa
    cdef ArrowSchema *sch = <ArrowSchema *>calloc(1, sizeof(ArrowSchema))
    cdef ArrowArray *arr = <ArrowArray *>calloc(1, sizeof(ArrowArray))
    try:
        rc = sc_arrow_export(b, s, sch, arr)
        if rc != 0:
            sc_batch_release(b)
            check_status(rc, "export")
        if known is None:
            return pa.RecordBatch._import_from_c(<uintptr_t>arr, <uintptr_t>sch)
        if known.arrow is None:
            try:
                known.arrow = pa.Schema._import_from_c(<uintptr_t>sch)  # moves it (release set NULL)
            except BaseException:
                arr.release(arr)  # releases b
                raise
        elif sch.release != NULL:
            sch.release(sch)
        return pa.RecordBatch._import_from_c(<uintptr_t>arr, known.arrow)
    finally:
        free(sch)
        free(arr)


def decode_list(encoded, int inner_lt):
    """The buffers of a large-list column from its encoded values (an Arrow binary array as
    exported for a list column): (n, validity bytes | None, offsets, m, element validity,
    values, string offsets, string bytes), each a ``bytes``; see exec/lists.h."""
    import pyarrow as pa
    cdef sc_column c
    cdef sc_list_decoded d
    cdef int64_t n = len(encoded)
    cdef int rc
    if encoded.offset != 0:
        encoded = pa.concat_arrays([encoded])  # decode from offset 0
    bufs = encoded.buffers()
    cdef const uint8_t[:] vb
    cdef const int32_t[:] ob
    cdef const char[:] db
    cdef bytes valid_copy
    valid_copy = bytes(bufs[0]) if bufs[0] is not None else b"\xff" * ((n + 7) // 8 + 1)
    offs = memoryview(bufs[1]).cast("B")
    data = bytes(bufs[2]) if bufs[2] is not None and bufs[2].size else b"\0"
    cdef bytes offs_copy = bytes(offs)
    c.validity = <uint8_t *><const char *>valid_copy
    c.offsets = <int32_t *><const char *>offs_copy
    c.data = <char *><const char *>data
    with nogil:
        rc = sc_list_decode(&c, n, <uint8_t>inner_lt, &d)
    check_status(rc, "decode list")
    try:
        bm = (d.m + 7) // 8
        out = (
            n,
            None if bufs[0] is None else bytes(bufs[0]),
            (<char *>d.offsets)[:(n + 1) * 8],
            d.m,
            (<char *>d.validity)[:bm] if bm else b"",
            None if d.values == NULL else (<char *>d.values)[:(bm if inner_lt == 3 else d.m * (4 if inner_lt == 6 else 8))],
            None if d.str_offsets == NULL else (<char *>d.str_offsets)[:(d.m + 1) * 8],
            None if d.str_data == NULL else (<char *>d.str_data)[:d.str_bytes],
        )
    finally:
        sc_list_decoded_free(&d)
    return out
