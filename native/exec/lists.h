/* lists: list[T] columns in runtime batches, and the explode operator.
 *
 * Encoding. A list value is stored in a UTF8-layout column (offsets + bytes), one encoded
 * value per row; a null list is a null row, an empty list is zero bytes. Each element is one
 * tag byte (0 null, 1 valid) followed, for a valid element, by its value: INT, FLOAT,
 * DATETIME (microseconds) and DATE (days) as 8 little-endian bytes, BOOL as 1 byte, STR as a
 * 4-byte length and the UTF-8 bytes, a nested list as a 4-byte length and its own encoding;
 * a list[null] element is the tag alone. Types: list[T] is SC_LT_LIST + T, so a list of lists
 * of T is 2 * SC_LT_LIST + T (the depth times SC_LT_LIST plus the scalar leaf). Operators that
 * copy rows (filter, project pass-through, keyed outputs, windows' input columns, the joins
 * of the driver) move the bytes without decoding them.
 *
 * Import reads an Arrow list ("+l") or large list ("+L") array whose child has the format
 * the inner type takes on import (see arrow_bridge.h); export decodes a column back into
 * large-list buffers that the Python layer wraps without copying again.
 *
 * Thread safety: functions touch only the batches / buffers passed in.
 */
#ifndef SC_EXEC_LISTS_H
#define SC_EXEC_LISTS_H

#include "arrow_abi.h"
#include "exec.h"

/* rows [start, start + n) of an Arrow list array (its `offset` already added by the caller
 * to start) into rows [0, n) of column `col` of `out` (list of `inner`). */
int sc_list_import(sc_batch *out, int32_t col, uint8_t inner, const struct ArrowSchema *schema,
                   const struct ArrowArray *a, int64_t start, int64_t n);

/* Decoded column: `n` lists. offsets[n + 1] index the elements; elements have a validity
 * bitmap and values: int64/double (8 bytes), bool (bitmap) or strings (int64 offsets[m + 1]
 * and bytes). Every buffer is malloc'd; sc_list_decoded_free frees them. */
typedef struct sc_list_decoded {
    int64_t n, m;      /* lists, elements */
    int64_t *offsets;  /* n + 1 */
    uint8_t *validity; /* elements, 1 = valid */
    void *values;      /* fixed-width values, or the bool bitmap */
    int64_t *str_offsets;
    char *str_data;
    int64_t str_bytes;
} sc_list_decoded;

int sc_list_decode(const sc_column *c, int64_t n, uint8_t inner, sc_list_decoded *out);
void sc_list_decoded_free(sc_list_decoded *d);

/* Elements in one encoded list (SC_EINVAL for malformed bytes). */
int sc_list_count(const char *p, int32_t len, uint8_t inner, int64_t *count);

/* Step over the element at *p (the list ends at e): its tag (0 null, 1 valid) and its value
 * bytes (val, vlen: 8 for numbers and temporals, 1 for bool, the UTF-8 bytes for str).
 * SC_EINVAL for malformed bytes. */
int sc_list_next(const char **p, const char *e, uint8_t inner, uint8_t *tag, const char **val,
                 int32_t *vlen);

/* Python's comparison of two lists (`a OP b`, op one of SC_LCMP_*), the elements typed
 * `ia` / `ib` (INT and FLOAT compare exactly, as Python does): == and != compare lengths
 * first, then elements (null equals null; NaN equals nothing, as two distinct float
 * objects); the ordering operators order by the first differing element, or by length when
 * one list is a prefix of the other. A null element where the lists first differ has no
 * order (Python raises TypeError): returns SC_LCMP_ERR. Else 0 / 1. */
enum { SC_LCMP_EQ, SC_LCMP_NE, SC_LCMP_LT, SC_LCMP_LE, SC_LCMP_GT, SC_LCMP_GE, SC_LCMP_ERR = -1 };
int sc_list_compare(const char *a, int32_t la, uint8_t ia, const char *b, int32_t lb, uint8_t ib, int op);

/* A list value whose leaves are ints (elements typed `inner`: INT, or lists of them) re-encoded
 * with float leaves (same length: each valid leaf's 8 bytes become the double of the int).
 * `out` has room for len bytes. */
void sc_list_ints_to_floats(const char *p, int32_t len, uint8_t inner, char *out);

/* Normalize a list value with float leaves (elements typed `inner`) in place for key
 * equality: every NaN one NaN, -0.0 as 0.0 (the reference's keys do the same in lists). */
void sc_list_norm_floats(char *p, int32_t len, uint8_t inner);

/* The scalar type at the bottom of a (possibly nested) list type. */
static inline uint8_t sc_list_leaf(uint8_t lt) { return (uint8_t)(lt % SC_LT_LIST); }

/* explode: each input row becomes one row per element of the exploded list columns (in
 * lockstep); a row whose exploded lists are all null or empty becomes one row with nulls
 * there; lists of different lengths (null and empty ones aside) send the row to the
 * dead-letter log with `reason`. Output columns: the input's, the exploded ones typed by
 * their element type. Stateless. */
int sc_op_explode_create(void **st, const sc_op_base *base, const int32_t *cols, int32_t ncols,
                         const char *reason);
int sc_op_explode_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_explode_destroy(void *st);

#endif
