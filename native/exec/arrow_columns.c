/* arrow_columns: one Arrow C stream per column read in step (contract in arrow_columns.h). */
#include "arrow_columns.h"

#include <stdlib.h>
#include <string.h>

/* The bundle's struct schema, shared by every hold: each hold's schema is a shallow copy whose
 * release drops one reference; the last one releases the columns' schemas. */
typedef struct shared_schema {
    struct ArrowSchema s;       /* "+s", children = the columns' schemas */
    struct ArrowSchema *kids;   /* k of them, from the streams' get_schema */
    struct ArrowSchema **ptrs;
    int32_t k;
    int64_t refs; /* atomic */
} shared_schema;

static void shared_unref(shared_schema *o) {
    if (__atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int32_t j = 0; j < o->k; j++)
        if (o->kids[j].release) o->kids[j].release(&o->kids[j]);
    free(o->kids);
    free(o->ptrs);
    free(o);
}

static void release_schema_ref(struct ArrowSchema *s) {
    shared_unref(s->private_data);
    s->release = NULL;
}

/* A reference to the shared schema as a schema of its own (moved into a hold). */
static void schema_ref(shared_schema *o, struct ArrowSchema *out) {
    __atomic_fetch_add(&o->refs, 1, __ATOMIC_RELAXED);
    *out = o->s;
    out->private_data = o;
    out->release = release_schema_ref;
}

/* The struct array of one step: it owns the columns' chunks and releases them with itself. */
typedef struct bundle {
    struct ArrowArray *kids;
    struct ArrowArray **ptrs;
    int32_t k;
    const void *buffers[1];
} bundle;

static void release_bundle(struct ArrowArray *a) {
    bundle *b = a->private_data;
    for (int32_t j = 0; j < b->k; j++)
        if (b->kids[j].release) b->kids[j].release(&b->kids[j]);
    free(b->kids);
    free(b->ptrs);
    free(b);
    a->release = NULL;
}

struct sc_arrow_columns {
    struct ArrowArrayStream *streams; /* k, owned */
    int32_t k;
    shared_schema *schema;
    sc_schema target;
    uint8_t *keep; /* NULL or one flag per target column */
    uint8_t shared;
    const char *err; /* the failing stream's message (owned by the stream) */
};

void sc_arrow_columns_free(sc_arrow_columns *c) {
    if (!c) return;
    for (int32_t j = 0; c->streams && j < c->k; j++)
        if (c->streams[j].release) c->streams[j].release(&c->streams[j]);
    free(c->streams);
    if (c->schema) shared_unref(c->schema);
    sc_schema_free(&c->target);
    free(c->keep);
    free(c);
}

int sc_arrow_columns_create(sc_arrow_columns **out, struct ArrowArrayStream *streams, int32_t k,
                            const sc_schema *target, const uint8_t *keep, uint8_t shared) {
    if (!out || !streams || k <= 0 || !target) return SC_EINVAL;
    sc_arrow_columns *c = calloc(1, sizeof *c);
    struct ArrowArrayStream *own = calloc((size_t)k, sizeof *own);
    shared_schema *o = calloc(1, sizeof *o);
    if (o) {
        o->kids = calloc((size_t)k, sizeof *o->kids);
        o->ptrs = calloc((size_t)k, sizeof *o->ptrs);
    }
    int rc = c && own && o && o->kids && o->ptrs ? SC_OK : SC_ENOMEM;
    for (int32_t j = 0; j < k; j++) { /* moved in whatever happens: released on an error */
        if (own) {
            own[j] = streams[j];
        } else if (streams[j].release) {
            streams[j].release(&streams[j]);
        }
        streams[j].release = NULL;
    }
    if (c) {
        c->streams = own;
        c->k = k;
        c->shared = shared;
    } else if (own) {
        for (int32_t j = 0; j < k; j++)
            if (own[j].release) own[j].release(&own[j]);
        free(own);
    }
    if (o && (rc || !c)) {
        free(o->kids);
        free(o->ptrs);
        free(o);
        o = NULL;
    }
    if (rc) {
        sc_arrow_columns_free(c);
        return rc;
    }
    o->k = k;
    o->refs = 1;
    c->schema = o;
    for (int32_t j = 0; !rc && j < k; j++) {
        if (!own[j].release || own[j].get_schema(&own[j], &o->kids[j]) != 0) {
            c->err = own[j].release ? own[j].get_last_error(&own[j]) : NULL;
            memset(&o->kids[j], 0, sizeof o->kids[j]); /* whatever the producer left: not ours */
            rc = SC_EFORMAT;
        }
        o->ptrs[j] = &o->kids[j];
    }
    o->s = (struct ArrowSchema){ .format = "+s", .name = "", .metadata = NULL, .flags = 0, .n_children = k,
                                 .children = o->ptrs, .dictionary = NULL, .release = NULL, .private_data = o };
    if (!rc) rc = sc_schema_copy(&c->target, target);
    if (!rc && keep) {
        c->keep = malloc((size_t)(target->ncols ? target->ncols : 1));
        if (c->keep) memcpy(c->keep, keep, (size_t)target->ncols);
        else rc = SC_ENOMEM;
    }
    if (rc) {
        sc_arrow_columns_free(c);
        return rc;
    }
    *out = c;
    return SC_OK;
}

const char *sc_arrow_columns_error(const sc_arrow_columns *c) { return c && c->err ? c->err : ""; }

int sc_arrow_columns_next(sc_arrow_columns *c, sc_extbuf **hold) {
    if (!c || !hold) return SC_EINVAL;
    *hold = NULL;
    int32_t k = c->k;
    bundle *b = calloc(1, sizeof *b);
    if (b) {
        b->kids = calloc((size_t)k, sizeof *b->kids);
        b->ptrs = calloc((size_t)k, sizeof *b->ptrs);
    }
    if (!b || !b->kids || !b->ptrs) {
        if (b) free(b->kids), free(b->ptrs);
        free(b);
        return SC_ENOMEM;
    }
    b->k = k;
    int rc = SC_OK;
    int32_t ended = 0;
    for (int32_t j = 0; !rc && j < k; j++) {
        struct ArrowArrayStream *s = &c->streams[j];
        if (s->get_next(s, &b->kids[j]) != 0) {
            c->err = s->get_last_error(s);
            memset(&b->kids[j], 0, sizeof b->kids[j]); /* whatever the producer left: not ours */
            rc = SC_EFORMAT;
            break;
        }
        b->ptrs[j] = &b->kids[j];
        ended += b->kids[j].release == NULL;
    }
    if (!rc && ended && ended != k) {
        c->err = "its columns end apart";
        rc = SC_EFORMAT;
    }
    for (int32_t j = 1; !rc && !ended && j < k; j++)
        if (b->kids[j].length != b->kids[0].length) {
            c->err = "its columns' chunks differ in length";
            rc = SC_EFORMAT;
        }
    struct ArrowArray parent = { .length = rc || ended ? 0 : b->kids[0].length, .null_count = 0, .offset = 0,
                                 .n_buffers = 1, .n_children = k, .buffers = b->buffers, .children = b->ptrs,
                                 .dictionary = NULL, .release = release_bundle, .private_data = b };
    if (rc || ended) {
        release_bundle(&parent);
        return rc;
    }
    sc_extbuf *h = NULL;
    rc = sc_arrow_hold_create(&h, &parent);
    if (rc) {
        release_bundle(&parent);
        return rc;
    }
    h->shared = c->shared;
    struct ArrowSchema sch;
    schema_ref(c->schema, &sch);
    rc = sc_arrow_hold_defer(h, &sch, &c->target, c->keep);
    if (rc) {
        if (sch.release) sch.release(&sch);
        sc_extbuf_unref(h);
        return rc;
    }
    *hold = h;
    return SC_OK;
}
