/* rowstore: copies of (some columns of) a row as a byte blob, read back cell by cell into an
 * output batch (see the building blocks in ops_state.h for the layout). Top-k keeps its rows
 * this way; windows keep the key columns of the row that opened them. */
#include "ops_state.h"

#include <string.h>

int sc_row_encode(sc_sbuf *dst, const sc_batch *b, int64_t row, const int32_t *cols, int32_t n) {
    size_t head = (size_t)(n + 7) / 8 + (size_t)n * 8, size = head;
    for (int32_t i = 0; i < n; i++) {
        const sc_column *c = &b->cols[cols[i]];
        if (c->type == SC_COL_UTF8 && sc_bit_get(c->validity, row))
            size += (size_t)(c->offsets[row + 1] - c->offsets[row]);
    }
    int rc = sc_sbuf_reserve(dst, size);
    if (rc) return rc;
    uint8_t *p = sc_sbuf_data(dst);
    memset(p, 0, (size_t)(n + 7) / 8);
    size_t tail = head;
    for (int32_t i = 0; i < n; i++) {
        const sc_column *c = &b->cols[cols[i]];
        uint8_t *cell = p + (size_t)(n + 7) / 8 + (size_t)i * 8;
        memset(cell, 0, 8);
        if (!sc_bit_get(c->validity, row)) continue;
        sc_bit_set(p, i, true);
        switch (c->type) {
        case SC_COL_INT64:
        case SC_COL_DOUBLE: memcpy(cell, (const int64_t *)c->values + row, 8); break;
        case SC_COL_BOOL: cell[0] = sc_bit_get(c->values, row); break;
        case SC_COL_UTF8: {
            uint32_t off = (uint32_t)tail, len = (uint32_t)(c->offsets[row + 1] - c->offsets[row]);
            memcpy(cell, &off, 4);
            memcpy(cell + 4, &len, 4);
            if (len) memcpy(p + tail, c->data + c->offsets[row], len);
            tail += len;
            break;
        }
        default: return SC_ETYPE;
        }
    }
    dst->len = (uint32_t)size;
    return SC_OK;
}

int sc_row_put(sc_batch *dst, int32_t dcol, int64_t drow, const uint8_t *blob, int32_t n, int32_t i) {
    if (!sc_row_valid(blob, i)) {
        sc_batch_set_null(dst, dcol, drow);
        return SC_OK;
    }
    const uint8_t *cell = sc_row_cell(blob, n, i);
    sc_column *c = &dst->cols[dcol];
    switch (c->type) {
    case SC_COL_INT64:
    case SC_COL_DOUBLE: memcpy((int64_t *)c->values + drow, cell, 8); break;
    case SC_COL_BOOL: sc_bit_set(c->values, drow, cell[0] != 0); break;
    case SC_COL_UTF8: {
        uint32_t off, len;
        memcpy(&off, cell, 4);
        memcpy(&len, cell + 4, 4);
        return sc_batch_put_utf8(dst, dcol, drow, (const char *)blob + off, (int32_t)len);
    }
    default: return SC_ETYPE;
    }
    sc_batch_set_valid(dst, dcol, drow);
    return SC_OK;
}
