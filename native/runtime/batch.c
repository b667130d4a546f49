/* batch: see batch.h for the contract. */
#include "batch.h"

#include <stdlib.h>

#include "atomic_ext.h"
#include "ring.h"

struct sc_batch_pool {
    uint32_t size;
    int32_t ncols;
    int64_t rows;
    int64_t utf8_bytes;
    sc_col_type *types;
    sc_batch *batches;
    sc_ring *free_list;       /* MPMC ring of free sc_batch* */
    sc_atomic_i64 in_use;
#ifdef SC_DEBUG
    sc_atomic_u64 *out_flags; /* 1 while a batch is out: catches double release */
#endif
};

static int64_t bitmap_bytes(int64_t bits) { return (bits + 7) / 8; }

static int alloc_column(sc_column *c, sc_col_type t, int64_t rows, int64_t utf8_bytes) {
    memset(c, 0, sizeof *c);
    c->type = t;
    c->validity = malloc((size_t)bitmap_bytes(rows));
    if (!c->validity) return SC_ENOMEM;
    switch (t) {
    case SC_COL_INT64: c->values = malloc((size_t)rows * sizeof(int64_t)); break;
    case SC_COL_DOUBLE: c->values = malloc((size_t)rows * sizeof(double)); break;
    case SC_COL_BOOL: c->values = calloc((size_t)bitmap_bytes(rows), 1); break;
    case SC_COL_UTF8:
        c->offsets = calloc((size_t)rows + 1, sizeof(int32_t));
        c->data = malloc((size_t)(utf8_bytes > 0 ? utf8_bytes : 1));
        c->data_cap = utf8_bytes;
        if (!c->offsets || !c->data) return SC_ENOMEM;
        return SC_OK;
    default: return SC_EINVAL;
    }
    return c->values ? SC_OK : SC_ENOMEM;
}

static void free_column(sc_column *c) {
    free(c->validity);
    if (!c->borrowed) free(c->values);
    free(c->offsets);
    free(c->data);
}

void sc_batch_reset(sc_batch *b) {
    b->serial = 0;
    b->first_row = 0;
    b->nrows = 0;
    b->marker_ns = 0;
    b->next = NULL;
    b->part = 0;
    b->group_n = 0;
    b->eos = 0;
    b->publish = 0;
    for (int32_t i = 0; i < b->ncols; i++) {
        sc_column *c = &b->cols[i];
        memset(c->validity, 0xFF, (size_t)bitmap_bytes(b->capacity));
        c->null_count = 0;
        if (c->offsets) c->offsets[0] = 0;
    }
}

int sc_batch_pool_destroy(sc_batch_pool *p) {
    if (!p) return SC_OK;
    int64_t out = sc_i64_load_acquire(&p->in_use);
    if (p->batches) {
        for (uint32_t i = 0; i < p->size; i++) {
            sc_batch *b = &p->batches[i];
            if (!b->cols) continue;
            for (int32_t c = 0; c < b->ncols; c++) free_column(&b->cols[c]);
            free(b->cols);
        }
    }
    free(p->batches);
    free(p->types);
    sc_ring_destroy(p->free_list);
#ifdef SC_DEBUG
    free(p->out_flags);
#endif
    free(p);
    return out == 0 ? SC_OK : SC_EINTERNAL;
}

int sc_batch_pool_create(sc_batch_pool **out, const sc_col_type *types, int32_t ncols,
                         int64_t row_capacity, int64_t utf8_bytes, uint32_t max_batches) {
    if (!out || ncols < 0 || (ncols > 0 && !types) || row_capacity <= 0 ||
        row_capacity > INT32_MAX - 1 || max_batches == 0 || utf8_bytes < 0 || utf8_bytes > INT32_MAX)
        return SC_EINVAL;
    for (int32_t i = 0; i < ncols; i++)
        if (types[i] < SC_COL_INT64 || types[i] > SC_COL_UTF8) return SC_EINVAL;
    sc_batch_pool *p = calloc(1, sizeof *p);
    if (!p) return SC_ENOMEM;
    p->size = max_batches;
    p->ncols = ncols;
    p->rows = row_capacity;
    p->utf8_bytes = utf8_bytes;
    sc_i64_init(&p->in_use, 0);
    int rc = SC_ENOMEM;
    p->types = malloc(sizeof(sc_col_type) * (size_t)(ncols > 0 ? ncols : 1));
    p->batches = calloc(max_batches, sizeof(sc_batch));
#ifdef SC_DEBUG
    p->out_flags = calloc(max_batches, sizeof(sc_atomic_u64));
    if (!p->out_flags) goto fail;
#endif
    if (!p->types || !p->batches) goto fail;
    if (ncols > 0) memcpy(p->types, types, sizeof(sc_col_type) * (size_t)ncols);
    rc = sc_ring_create(&p->free_list, SC_RING_MPMC, max_batches);
    if (rc) goto fail;
    for (uint32_t i = 0; i < max_batches; i++) {
        sc_batch *b = &p->batches[i];
        b->capacity = row_capacity;
        b->pool = p;
        b->index = i;
        b->cols = calloc((size_t)(ncols > 0 ? ncols : 1), sizeof(sc_column));
        rc = SC_ENOMEM;
        if (!b->cols) goto fail;
        b->ncols = ncols;
        for (int32_t c = 0; c < ncols; c++)
            if ((rc = alloc_column(&b->cols[c], types[c], row_capacity, utf8_bytes))) goto fail;
        sc_batch_reset(b);
        if ((rc = sc_ring_try_push(p->free_list, b))) goto fail;
    }
    *out = p;
    return SC_OK;
fail:
    sc_batch_pool_destroy(p);
    return rc;
}

int sc_batch_acquire(sc_batch_pool *p, sc_batch **out) {
    void *item;
    int rc = sc_ring_try_pop(p->free_list, &item);
    if (rc == SC_EEMPTY) return SC_EFULL;
    if (rc) return rc;
    sc_batch *b = item;
#ifdef SC_DEBUG
    uint64_t was = 0;
    SC_INVARIANT(sc_u64_cas_acqrel(&p->out_flags[b->index], &was, 1), "batch handed out twice");
#endif
    sc_i64_fetch_add_relaxed(&p->in_use, 1);
    *out = b;
    return SC_OK;
}

/* A standalone batch (exec/sc_batch_new: pool == NULL) owns its columns and itself. */
void sc_batch_free_standalone(sc_batch *b) {
    for (int32_t c = 0; c < b->ncols; c++) free_column(&b->cols[c]);
    sc_extbuf_unref(b->ext);
    free(b->cols);
    free(b);
}

void sc_batch_release(sc_batch *b) {
    if (!b) return;
    sc_batch_pool *p = b->pool;
    if (!p) {
        sc_batch_free_standalone(b);
        return;
    }
#ifdef SC_DEBUG
    uint64_t was = 1;
    SC_INVARIANT(sc_u64_cas_acqrel(&p->out_flags[b->index], &was, 0), "batch released twice");
#endif
    sc_batch_reset(b);
    sc_i64_fetch_add_relaxed(&p->in_use, -1);
    /* The ring holds every batch of the pool, so there is always a free slot; but a slot a
     * concurrent acquire has claimed is reusable only once that pop publishes it, so a push
     * may briefly see "full" (seen under load in the debug stress run): retry until it lands. */
    int rc;
    uint32_t spins = 0;
    while ((rc = sc_ring_try_push(p->free_list, b)) == SC_EFULL) {
        sc_cpu_relax();
        SC_INVARIANT(++spins < (1u << 30), "batch free list overflow");
    }
    (void)rc;
    (void)spins;
}

void sc_batch_release_chain(sc_batch *b) {
    while (b) {
        sc_batch *n = b->next;
        sc_batch_release(b);
        b = n;
    }
}

uint32_t sc_batch_pool_in_use(const sc_batch_pool *p) { return (uint32_t)sc_i64_load_acquire(&p->in_use); }
uint32_t sc_batch_pool_size(const sc_batch_pool *p) { return p->size; }

int sc_batch_set_utf8(sc_batch *b, int32_t col, int64_t row, const char *s, int32_t len) {
    if (col < 0 || col >= b->ncols || row < 0 || row >= b->capacity || len < 0) return SC_EINVAL;
    sc_column *c = &b->cols[col];
    if (c->type != SC_COL_UTF8) return SC_ETYPE;
    int64_t start = c->offsets[row];
    if (start + len > c->data_cap) return SC_EFULL;
    memcpy(c->data + start, s, (size_t)len);
    c->offsets[row + 1] = (int32_t)(start + len);
    if (!sc_bit_get(c->validity, row)) { sc_bit_set(c->validity, row, true); c->null_count--; }
    return SC_OK;
}
