/* arrow_columns: a source read as one Arrow C stream per column, the columns' chunks taken
 * in step, each step one hold (arrow_bridge.h) the driver cuts into deferred batches.
 *
 * A Polars frame exports each column on its own with its chunks as they are
 * (Series.__arrow_c_stream__), where the frame's own stream would first join every chunk
 * into one (a copy of every row). Reading those streams here, chunk by chunk, bundles the
 * i-th chunk of every column into one struct array without a Python object per chunk; the
 * bundle's schema is made once and shared, by reference, by every hold.
 *
 * Chunk i of every column must have the same length (the frame's columns share their chunk
 * boundaries; the caller checks, and a step that finds otherwise is SC_EFORMAT). Every column
 * ends on the same step. Single-threaded: the driver's thread.
 */
#ifndef SC_EXEC_ARROW_COLUMNS_H
#define SC_EXEC_ARROW_COLUMNS_H

#include "arrow_bridge.h"

typedef struct sc_arrow_columns sc_arrow_columns;

/* Take the k streams (moved: each source is marked released) for batches of `target`, every
 * hold shared (sc_extbuf.shared) when `shared`, `keep` as for sc_arrow_hold_defer. On an
 * error the streams are released. */
int sc_arrow_columns_create(sc_arrow_columns **out, struct ArrowArrayStream *streams, int32_t k,
                            const sc_schema *target, const uint8_t *keep, uint8_t shared);
/* The next step: *hold a new hold (one reference, the caller's) ready for sc_arrow_defer,
 * or NULL after the last. SC_ETYPE / SC_EINVAL as sc_arrow_hold_defer's checks (made on
 * every step); SC_EFORMAT for chunks of different lengths, columns that end apart or a
 * stream's own error (sc_arrow_columns_error says which). */
int sc_arrow_columns_next(sc_arrow_columns *c, sc_extbuf **hold);
/* A stream's last error message, or "". */
const char *sc_arrow_columns_error(const sc_arrow_columns *c);
void sc_arrow_columns_free(sc_arrow_columns *c);

#endif
