/* keyhash: byte buffers, key encoding and hashing, and the key -> value map of the keyed
 * operators (see the building blocks in ops_state.h). */
#include "ops_state.h"
#include "lists.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- buffers */

int sc_buf_reserve(sc_buf *b, size_t extra) {
    size_t need = b->len + extra;
    if (need <= b->cap) return SC_OK;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < need) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return SC_ENOMEM;
    b->p = p;
    b->cap = cap;
    return SC_OK;
}

void sc_buf_free(sc_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

int sc_sbuf_reserve(sc_sbuf *s, size_t len) {
    if (len > UINT32_MAX) return SC_EINVAL;
    if (len <= SC_SBUF_INLINE && s->cap <= SC_SBUF_INLINE) return SC_OK;
    if (s->cap > SC_SBUF_INLINE && len <= s->cap) return SC_OK;
    size_t cap = s->cap > SC_SBUF_INLINE ? (size_t)s->cap * 2 : 2 * SC_SBUF_INLINE;
    while (cap < len) cap *= 2;
    if (cap > UINT32_MAX) cap = UINT32_MAX;
    uint8_t *p;
    if (s->cap > SC_SBUF_INLINE) {
        p = realloc(s->u.p, cap);
        if (!p) return SC_ENOMEM;
    } else {
        p = malloc(cap);
        if (!p) return SC_ENOMEM;
        memcpy(p, s->u.inl, s->len);
    }
    s->u.p = p;
    s->cap = (uint32_t)cap;
    return SC_OK;
}

int sc_sbuf_set(sc_sbuf *s, const void *p, size_t len) {
    int rc = sc_sbuf_reserve(s, len);
    if (rc) return rc;
    if (len) memcpy(sc_sbuf_data(s), p, len);
    s->len = (uint32_t)len;
    return SC_OK;
}

void sc_sbuf_free(sc_sbuf *s) {
    if (s->cap > SC_SBUF_INLINE) free(s->u.p);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------------- key encoding */

int sc_key_encode(sc_buf *out, const sc_batch *b, int64_t row, const int32_t *cols, int32_t ncols,
                  const uint8_t *lt) {
    for (int32_t k = 0; k < ncols; k++) {
        int32_t c = cols[k];
        const sc_column *col = &b->cols[c];
        int32_t len = 0;
        const char *s = NULL;
        if (col->type == SC_COL_UTF8 && sc_bit_get(col->validity, row)) s = sc_batch_get_utf8(b, c, row, &len);
        int rc = sc_buf_reserve(out, 9 + (size_t)len);
        if (rc) return rc;
        uint8_t *p = out->p + out->len;
        if (!sc_bit_get(col->validity, row)) {
            *p = 0;
            out->len += 1;
            continue;
        }
        *p++ = 1;
        switch (col->type) {
        case SC_COL_INT64: memcpy(p, (const int64_t *)col->values + row, 8); out->len += 9; break;
        case SC_COL_DOUBLE: {
            double d = ((const double *)col->values)[row];
            if (isnan(d)) d = NAN;     /* one NaN */
            else if (d == 0.0) d = 0.0; /* -0.0 -> 0.0 */
            memcpy(p, &d, 8);
            out->len += 9;
            break;
        }
        case SC_COL_BOOL: *p = sc_batch_get_bool(b, c, row); out->len += 2; break;
        case SC_COL_UTF8: {
            uint32_t l = (uint32_t)len;
            memcpy(p, &l, 4);
            if (len) memcpy(p + 4, s, (size_t)len);
            if (lt && sc_ltype_is_list(lt[c]) && sc_list_leaf(lt[c]) == SC_LT_FLOAT)
                sc_list_norm_floats((char *)p + 4, len, (uint8_t)(lt[c] - SC_LT_LIST));
            out->len += 5 + (size_t)len;
            break;
        }
        default: return SC_ETYPE;
        }
    }
    return SC_OK;
}

/* ------------------------------------------------------------------------- hashing */

/* ----------------------------------------------------------------------------- map */

#define rd64 sc_rd64
#define nz sc_kmap_nz
#define slot_key sc_kmap_slot_key
#define key_eq sc_key_eq

int sc_kmap_init(sc_kmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    size_t cap = 8;
    while (cap * 7 < expected * 10) cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return SC_ENOMEM;
    m->cap = cap;
    return SC_OK;
}

void sc_kmap_free(sc_kmap *m) {
    free(m->slots);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

static int grow_slots(sc_kmap *m) {
    size_t cap = m->cap * 2;
    sc_kmap_slot *s = calloc(cap, sizeof *s);
    if (!s) return SC_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].hash) continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (s[j].hash) j = (j + 1) & (cap - 1);
        s[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = s;
    m->cap = cap;
    return SC_OK;
}

static int arena_put(sc_kmap *m, const void *key, uint32_t len, uint64_t *off) {
    if (m->alen + len > m->acap) {
        size_t cap = m->acap ? m->acap * 2 : 64;
        while (cap < m->alen + len) cap *= 2;
        uint8_t *a = realloc(m->arena, cap);
        if (!a) return SC_ENOMEM;
        m->arena = a;
        m->acap = cap;
    }
    if (len) memcpy(m->arena + m->alen, key, len);
    *off = m->alen;
    m->alen += len;
    return SC_OK;
}

int sc_kmap_upsert(sc_kmap *m, uint64_t hash, const void *key, uint32_t len, uint64_t *val, bool *inserted) {
    hash = nz(hash);
    if ((m->n + 1) * 10 > m->cap * 7) {
        int rc = grow_slots(m);
        if (rc) return rc;
    }
    size_t mask = m->cap - 1, i = hash & mask;
    for (;; i = (i + 1) & mask) {
        sc_kmap_slot *s = &m->slots[i];
        if (!s->hash) break;
        if (s->hash == hash && s->len == len && key_eq(slot_key(m, s), key, len)) {
            *val = s->val;
            *inserted = false;
            return SC_OK;
        }
    }
    sc_kmap_slot ns = { .hash = hash, .val = *val, .len = len };
    if (len <= SC_KMAP_INLINE) {
        if (len) memcpy(ns.k.key, key, len);
    } else {
        int rc = arena_put(m, key, len, &ns.k.off);
        if (rc) return rc;
    }
    m->slots[i] = ns;
    m->n++;
    *inserted = true;
    return SC_OK;
}

/* Rewrite the arena with only the live keys (after many removals). */
static int compact(sc_kmap *m) {
    size_t live = m->alen - m->garbage;
    uint8_t *a = malloc(live ? live : 1);
    if (!a) return SC_ENOMEM;
    size_t off = 0;
    for (size_t i = 0; i < m->cap; i++) {
        sc_kmap_slot *s = &m->slots[i];
        if (!s->hash || s->len <= SC_KMAP_INLINE) continue;
        memcpy(a + off, m->arena + s->k.off, s->len);
        s->k.off = off;
        off += s->len;
    }
    free(m->arena);
    m->arena = a;
    m->acap = live ? live : 1;
    m->alen = off;
    m->garbage = 0;
    return SC_OK;
}

int sc_kmap_remove(sc_kmap *m, uint64_t hash, uint64_t val) {
    hash = nz(hash);
    size_t mask = m->cap - 1, i = hash & mask;
    for (;; i = (i + 1) & mask) {
        if (!m->slots[i].hash) return SC_EINTERNAL;
        if (m->slots[i].hash == hash && m->slots[i].val == val) break;
    }
    if (m->slots[i].len > SC_KMAP_INLINE) m->garbage += m->slots[i].len;
    m->n--;
    /* backward-shift: move later members of the probe run into the hole */
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        sc_kmap_slot *s = &m->slots[j];
        if (!s->hash) break;
        size_t home = s->hash & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = *s;
            i = j;
        }
    }
    m->slots[i].hash = 0;
    /* a failed compaction leaves a valid (larger) arena: not an error */
    if (m->garbage > 4096 && m->garbage * 2 > m->alen) (void)compact(m);
    return SC_OK;
}
