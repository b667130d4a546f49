/* expr: vectorized evaluation of plan expressions over columnar batches, and the two
 * stateless operators built on it (filter, project).
 *
 * An expression arrives as a flat array of nodes in post-order (children before parents;
 * the root is the last node). Semantics are exactly the reference interpreter's
 * (kernel/streamcell/backends/evaluate.py), Polars-compatible:
 * - null propagates through arithmetic, comparisons and functions; filter keeps only rows
 *   whose predicate is valid and true; and/or are Kleene three-valued;
 * - `/` is float division (x/0: +-inf or nan); `//` and `%` floor like Python and give null
 *   for a zero divisor; int results wrap at 64 bits; comparisons order NaN above every number
 *   and NaN == NaN; strings compare bytewise (UTF-8 order = code point order);
 * - a failed cast and `int ** negative int` are row errors: the row is dead-lettered.
 * Errors: sc_expr_eval marks failing rows in `err` (1 = error) and keeps going. As in the
 * reference, an operand's error only counts where Python evaluates it: not after a null left
 * operand, not in an untaken when / fill_null branch, not on the right of a decided and/or.
 * Lists of SC_E_IS_IN: each non-NULL list (ilist, flist, slist + slens) holds nlist values; a
 * number is compared exactly with ilist and flist (NaN never matches), a bool as 0 / 1, a
 * datetime / date with ilist (us / days), a str with slist, a list with slist holding
 * encoded lists of the subject's element type (equality as for ==).
 * Lists (lt >= SC_LT_LIST, lists of lists too, encoded as in lists.h): columns, literals
 * (s + slen hold the encoded value), when / fill_null (list[int] with list[float] unifies to
 * list[float]; the int lists keep their ints, as the reference's Python lists do, until
 * written out),
 * is_null / is_not_null, is_in, and comparisons with Python's list semantics
 * (sc_list_compare): ordering two lists whose first differing elements include a null is a
 * row error, as the reference's TypeError is.
 *
 * Thread safety: a compiled sc_expr is immutable after sc_expr_create; sc_expr_eval may run
 * on any number of threads at once. Each call takes a scratch context from a pool inside the
 * sc_expr (a mutex around a free list, held only to take and give back) and returns it
 * for the next batch to reuse; the filter / project operators keep such a pool per
 * operator.
 */
#ifndef SC_EXEC_EXPR_H
#define SC_EXEC_EXPR_H

#include "exec.h"

typedef enum {
    SC_E_COL = 1,      /* column a of the input batch */
    SC_E_LIT,          /* literal (i / f / s+slen by lt; is_null: null literal) */
    SC_E_NEG, SC_E_NOT,
    SC_E_ADD, SC_E_SUB, SC_E_MUL, SC_E_DIV, SC_E_FLOORDIV, SC_E_MOD, SC_E_POW,
    SC_E_EQ, SC_E_NE, SC_E_LT, SC_E_LE, SC_E_GT, SC_E_GE,
    SC_E_AND, SC_E_OR,
    SC_E_WHEN,         /* if a is valid and true then b else c */
    SC_E_IS_NULL, SC_E_IS_NOT_NULL,
    SC_E_FILL_NULL,    /* a if valid else b */
    SC_E_CAST,         /* a cast to node lt (row error on failure) */
    SC_E_IS_IN,        /* a in list (ilist/flist/slist by the operand's lt; list_has_null) */
    SC_E_ABS, SC_E_ROUND, /* round: b = decimals (int literal node) */
    SC_E_STR_CONTAINS, SC_E_STR_STARTS_WITH, SC_E_STR_ENDS_WITH, /* b = pattern */
    SC_E_STR_LOWER, SC_E_STR_UPPER, SC_E_STR_LEN_CHARS,
    SC_E_DT_YEAR, SC_E_DT_MONTH, SC_E_DT_DAY, SC_E_DT_HOUR, SC_E_DT_MINUTE, SC_E_DT_SECOND,
    SC_E_DT_WEEKDAY,   /* ISO: Monday = 1 */
    SC_E_DT_DATE, SC_E_DT_EPOCH_US,
    SC_E_UDF           /* native user function (see below) */
} sc_expr_op;

/* SC_E_UDF: a scalar user function compiled from Cython (kernel/streamcell/udf.py). Node
 * fields: i = address of the vectorized kernel (sc_udf_kernel), nlist = argument count,
 * ilist = the argument node indices, s / slen = one kind letter per argument ('d' double,
 * 'i' int64, 'b' bool as uint8), a = ilist[0]; lt = result type (FLOAT, INT or BOOL).
 * The kernel runs without the GIL on any worker thread: it sets out_ok[r] = 0 where an
 * argument is null and otherwise writes the function's value. Arguments' errors propagate;
 * a null-typed argument makes every row null. */
typedef void (*sc_udf_kernel)(int64_t n, const void **vals, const uint8_t **oks, void *out,
                              uint8_t *out_ok);

typedef struct sc_enode {
    int32_t op;           /* sc_expr_op */
    uint8_t lt;           /* result logical type (sc_ltype) */
    int32_t a, b, c;      /* child node indices, or the column index for SC_E_COL; -1: none */
    /* literal payload (SC_E_LIT) */
    bool is_null;
    int64_t i;
    double f;
    const char *s;
    int32_t slen;
    /* SC_E_IS_IN list */
    int32_t nlist;
    const int64_t *ilist;
    const double *flist;
    const char *const *slist;
    const int32_t *slens;
    bool list_has_null;
} sc_enode;

typedef struct sc_expr sc_expr;

/* Compile (copies nodes, literal strings and lists). `in` is the input schema the column
 * nodes refer to. SC_EINVAL on a malformed tree (bad index, type mismatch). */
int sc_expr_create(sc_expr **out, const sc_enode *nodes, int32_t nnodes, const sc_schema *in);
void sc_expr_destroy(sc_expr *e);
sc_ltype sc_expr_type(const sc_expr *e);
/* Evaluate over rows [0, in->nrows) of `in` into column `col` of `out`, rows [0, n) (out must
 * have capacity >= in->nrows and a column of the expression's physical type; `out`'s rows
 * of that column are overwritten, its nrows untouched). err[r] |= 1 for rows that fail. */
int sc_expr_eval(const sc_expr *e, const sc_batch *in, sc_batch *out, int32_t col, uint8_t *err);

/* ---- operators ----
 * Ownership: a *_create deep-copies *base (sc_op_base_copy); the caller keeps and frees its
 * base either way (exec.h).
 * Dead rows go to base->side with a fallback reason ("cannot cast value to int",
 * "integer ** negative exponent; ..."); the driver re-derives the reference's text. */

/* filter: keeps rows whose predicate is true; rows with errors go dead. Output schema =
 * input schema. Counts: filtered for false/null rows. */
int sc_op_filter_create(void **st, const sc_op_base *base, const sc_enode *pred, int32_t npred);
/* project (select / with_columns): output column k (k >= SC_NHIDDEN) is either input column
 * src[k] (src[k] >= 0) or expression -src[k]-1. Hidden columns are copied. Rows with an
 * error in any expression go dead (the reason names the first failing output column). */
int sc_op_project_create(void **st, const sc_op_base *base, const int32_t *src, int32_t nout,
                         const sc_enode *const *exprs, const int32_t *nnodes, int32_t nexprs);
int sc_op_filter_run(void *st, sc_batch *in, sc_batch **out);
int sc_op_project_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_filter_destroy(void *st);
void sc_op_project_destroy(void *st);

/* fused: consecutive filter / project steps as one stateless operator (see
 * ops_filter_project.c): parts[p] is a filter state (kinds[p] = 1) or a project state
 * (kinds[p] = 2) from the functions above, each part's input schema the previous part's
 * output schema. The fused operator owns the parts whatever it returns (on an error they are
 * freed; NULL parts are skipped). Every part keeps its own step, counters and side log, so
 * counts and dead letters are exactly those of the parts run one after another; rows leave
 * in input order, gathered once. *bases: the parts' bases (a malloc'd array of nparts
 * pointers into the state), for the program's side logs and gauges. */
int sc_op_fused_create(void **st, sc_op_base ***bases, void *const *parts, const uint8_t *kinds, int32_t nparts);
int sc_op_fused_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_fused_destroy(void *st);

#endif
