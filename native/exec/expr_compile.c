/* expr_compile: type checking and compilation of expression nodes (sc_expr_create: the
 * result type compiler._Typer gives every node, owned copies of literals and lists).
 */
#include "expr_internal.h"
#include "lists.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------- compilation */

static int unify(int a, int b) {
    if (a == b) return a;
    if (a == SC_LT_NULL) return b;
    if (b == SC_LT_NULL) return a;
    if (a >= SC_LT_LIST && b >= SC_LT_LIST) { /* element types unify (list[null] with any) */
        int u = unify(a - SC_LT_LIST, b - SC_LT_LIST);
        return u < 0 ? -1 : SC_LT_LIST + u;
    }
    if ((a == SC_LT_INT && b == SC_LT_FLOAT) || (a == SC_LT_FLOAT && b == SC_LT_INT)) return SC_LT_FLOAT;
    return -1;
}

static int arith_type(int op, int a, int b) {
    if (op == SC_E_ADD && a == SC_LT_STR && (b == SC_LT_STR || b == SC_LT_NULL)) return SC_LT_STR;
    if (!num_or_null(a) || !num_or_null(b)) return -1;
    if (op == SC_E_DIV || (op == SC_E_POW && (a == SC_LT_FLOAT || b == SC_LT_FLOAT))) return SC_LT_FLOAT;
    if (op == SC_E_POW) return a == SC_LT_INT && b == SC_LT_INT ? SC_LT_INT : SC_LT_FLOAT;
    int u = unify(a, b);
    return u == SC_LT_NULL ? SC_LT_INT : u;
}

static int dt_type(int op, int a) {
    if (a != SC_LT_DATETIME && a != SC_LT_DATE && a != SC_LT_NULL) return -1;
    if (a == SC_LT_DATE && (op == SC_E_DT_HOUR || op == SC_E_DT_MINUTE || op == SC_E_DT_SECOND)) return -1;
    return op == SC_E_DT_DATE ? SC_LT_DATE : SC_LT_INT;
}

static bool list_ok(const sc_enode *nd) {
    if (nd->nlist < 0) return false;
    if (nd->nlist == 0) return true;
    return (nd->ilist || nd->flist || nd->slist) && (!nd->slist || nd->slens);
}

/* The result type compiler._Typer gives node k (its children are checked already), or -1. */
static int node_type(const sc_enode *nodes, int32_t k, const sc_schema *in) {
    const sc_enode *nd = &nodes[k];
    if (nd->op == SC_E_COL) return nd->a >= 0 && nd->a < in->ncols ? in->lt[nd->a] : -1;
    if (nd->op == SC_E_LIT) {
        if (sc_ltype_is_list(nd->lt)) { /* an encoded list literal */
            int64_t cnt;
            bool ok = sc_list_leaf(nd->lt) <= SC_LT_DATE &&
                      (nd->is_null || (nd->slen >= 0 && (nd->s || !nd->slen) &&
                                       sc_list_count(nd->s, nd->slen, (uint8_t)(nd->lt - SC_LT_LIST), &cnt) == SC_OK));
            return ok ? nd->lt : -1;
        }
        return nd->lt <= SC_LT_DATE && (nd->is_null || nd->lt != SC_LT_STR || nd->slen >= 0) ? nd->lt : -1;
    }
    int A = nd->a >= 0 && nd->a < k ? nodes[nd->a].lt : -1;
    int B = nd->b >= 0 && nd->b < k ? nodes[nd->b].lt : -1;
    int C = nd->c >= 0 && nd->c < k ? nodes[nd->c].lt : -1;
    if (A < 0) return -1;
    switch (nd->op) {
    case SC_E_NEG:
    case SC_E_ABS: return num_or_null(A) ? A : -1;
    case SC_E_NOT: return bool_or_null(A) ? SC_LT_BOOL : -1;
    case SC_E_ADD:
    case SC_E_SUB:
    case SC_E_MUL:
    case SC_E_DIV:
    case SC_E_FLOORDIV:
    case SC_E_MOD:
    case SC_E_POW: return B < 0 ? -1 : arith_type(nd->op, A, B);
    case SC_E_EQ:
    case SC_E_NE:
    case SC_E_LT:
    case SC_E_LE:
    case SC_E_GT:
    case SC_E_GE: return B >= 0 && (A == SC_LT_NULL || B == SC_LT_NULL || unify(A, B) >= 0) ? SC_LT_BOOL : -1;
    case SC_E_AND:
    case SC_E_OR: return bool_or_null(A) && bool_or_null(B) ? SC_LT_BOOL : -1;
    case SC_E_WHEN: return bool_or_null(A) && B >= 0 && C >= 0 ? unify(B, C) : -1;
    case SC_E_IS_NULL:
    case SC_E_IS_NOT_NULL: return SC_LT_BOOL;
    case SC_E_FILL_NULL: return B < 0 ? -1 : unify(A, B);
    case SC_E_CAST: return nd->lt <= SC_LT_DATE ? nd->lt : -1;
    case SC_E_IS_IN: /* a list subject: slist holds encoded lists of its element type */
        if (A >= SC_LT_LIST) return list_ok(nd) && !nd->ilist && !nd->flist ? SC_LT_BOOL : -1;
        return list_ok(nd) ? SC_LT_BOOL : -1;
    case SC_E_ROUND:
        if (nd->b >= 0 && B != SC_LT_INT && B != SC_LT_NULL) return -1;
        return num_or_null(A) ? A : -1;
    case SC_E_STR_CONTAINS:
    case SC_E_STR_STARTS_WITH:
    case SC_E_STR_ENDS_WITH: return (A == SC_LT_STR || A == SC_LT_NULL) && B == SC_LT_STR ? SC_LT_BOOL : -1;
    case SC_E_STR_LOWER:
    case SC_E_STR_UPPER:
    case SC_E_STR_LEN_CHARS:
        if (A != SC_LT_STR && A != SC_LT_NULL) return -1;
        return nd->op == SC_E_STR_LEN_CHARS ? SC_LT_INT : SC_LT_STR;
    case SC_E_DT_YEAR:
    case SC_E_DT_MONTH:
    case SC_E_DT_DAY:
    case SC_E_DT_HOUR:
    case SC_E_DT_MINUTE:
    case SC_E_DT_SECOND:
    case SC_E_DT_WEEKDAY:
    case SC_E_DT_DATE:
    case SC_E_DT_EPOCH_US: return dt_type(nd->op, A);
    case SC_E_UDF: {
        if (nd->nlist < 1 || !nd->ilist || !nd->s || nd->slen != nd->nlist || nd->i == 0 || nd->ilist[0] != nd->a)
            return -1;
        for (int32_t j = 0; j < nd->nlist; j++) {
            int64_t x = nd->ilist[j];
            if (x < 0 || x >= k) return -1;
            int T = nodes[x].lt;
            bool ok = T == SC_LT_NULL || (nd->s[j] == 'd' && (T == SC_LT_INT || T == SC_LT_FLOAT)) ||
                      (nd->s[j] == 'i' && T == SC_LT_INT) || (nd->s[j] == 'b' && T == SC_LT_BOOL);
            if (!ok) return -1;
        }
        return nd->lt == SC_LT_FLOAT || nd->lt == SC_LT_INT || nd->lt == SC_LT_BOOL ? nd->lt : -1;
    }
    default: return -1;
    }
}

static void *dup_bytes(const void *p, size_t n) {
    void *q = malloc(n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}

/* Own copies of a node's literal string and lists. */
static int copy_payload(sc_enode *d, const sc_enode *s) {
    d->s = NULL;
    d->ilist = NULL;
    d->flist = NULL;
    d->slist = NULL;
    d->slens = NULL;
    if (s->op == SC_E_LIT && is_strlike(s->lt) && !s->is_null) {
        if (s->slen && !s->s) return SC_EINVAL;
        if (!(d->s = dup_bytes(s->s, (size_t)s->slen))) return SC_ENOMEM;
    }
    if (s->op == SC_E_UDF) {
        if (s->nlist < 1 || !s->ilist || !s->s) return SC_EINVAL;
        if (!(d->ilist = dup_bytes(s->ilist, (size_t)s->nlist * sizeof(int64_t)))) return SC_ENOMEM;
        if (!(d->s = dup_bytes(s->s, (size_t)s->slen))) return SC_ENOMEM;
        return SC_OK;
    }
    if (s->op != SC_E_IS_IN || s->nlist == 0) return SC_OK;
    size_t n = (size_t)s->nlist;
    if (s->ilist && !(d->ilist = dup_bytes(s->ilist, n * sizeof(int64_t)))) return SC_ENOMEM;
    if (s->flist && !(d->flist = dup_bytes(s->flist, n * sizeof(double)))) return SC_ENOMEM;
    if (!s->slist) return SC_OK;
    const char **sl = calloc(n, sizeof(char *));
    d->slist = sl;
    if (!sl || !(d->slens = dup_bytes(s->slens, n * sizeof(int32_t)))) return SC_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        if (s->slens[k] < 0 || (s->slens[k] && !s->slist[k])) return SC_EINVAL;
        if (!(sl[k] = dup_bytes(s->slist[k], (size_t)s->slens[k]))) return SC_ENOMEM;
    }
    return SC_OK;
}

static void free_payload(sc_enode *d) {
    free((void *)d->s);
    free((void *)d->ilist);
    free((void *)d->flist);
    for (int32_t k = 0; d->slist && k < d->nlist; k++) free((void *)d->slist[k]);
    free((void *)d->slist);
    free((void *)d->slens);
}

int sc_expr_create(sc_expr **out, const sc_enode *nodes, int32_t nnodes, const sc_schema *in) {
    if (!out || !nodes || nnodes <= 0 || !in) return SC_EINVAL;
    for (int32_t k = 0; k < nnodes; k++)
        if (node_type(nodes, k, in) != nodes[k].lt) return SC_EINVAL;
    sc_expr *e = calloc(1, sizeof *e);
    if (!e || !(e->nodes = calloc((size_t)nnodes, sizeof(sc_enode)))) {
        free(e);
        return SC_ENOMEM;
    }
    cx_pool_init(&e->pool);
    int rc = SC_OK;
    for (int32_t k = 0; k < nnodes; k++) {
        e->nodes[k] = nodes[k];
        e->n = k + 1;
        rc = copy_payload(&e->nodes[k], &nodes[k]);
        if (rc) break;
    }
    if (rc) {
        sc_expr_destroy(e);
        return rc;
    }
    *out = e;
    return SC_OK;
}

void sc_expr_destroy(sc_expr *e) {
    if (!e) return;
    for (int32_t k = 0; k < e->n; k++) free_payload(&e->nodes[k]);
    free(e->nodes);
    cx_pool_destroy(&e->pool);
    free(e);
}

sc_ltype sc_expr_type(const sc_expr *e) { return (sc_ltype)e->nodes[e->n - 1].lt; }
