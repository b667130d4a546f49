/* select: selection vectors over a batch's rows, and the one gather that makes selected rows
 * contiguous.
 *
 * A fused stateless stage (ops_filter_project.c) evaluates its predicates into a keep mask
 * (one byte per row, 0 / 1), turns the mask into a selection vector (the ascending row
 * indices of the kept rows, int32) once, and gathers each output column through it once.
 * The idea is the selection vector of vectorized engines (P. Boncz, M. Zukowski, N. Nes,
 * "MonetDB/X100: Hyper-Pipelining Query Execution"): filters narrow a selection instead of
 * copying rows, and only the consumer that needs contiguous rows pays for a copy.
 *
 * Contract
 * - A selection vector holds k ascending, distinct row indices of the source, k <= rows.
 * - sc_sel_gather writes rows [d0, d0 + k) of dst from the selected rows of src: values,
 *   validity (dst->null_count kept exact) and, for UTF8, offsets and bytes (runs of
 *   consecutive selected rows are copied with one memcpy). dst may not alias src.
 * - Threads: pure functions over the buffers they are given; no shared state.
 */
#ifndef SC_EXEC_SELECT_H
#define SC_EXEC_SELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "../runtime/batch.h"

/* sel[0..k) = the rows r < n with keep[r] != 0; returns k. Branch-free. */
int64_t sc_sel_from_mask(const uint8_t *keep, int64_t n, int32_t *sel);

/* Rows [d0, d0 + k) of dst = src rows sel[0..k) (same physical type). A UTF8 dst grows its
 * byte buffer when `grow` (a standalone batch); otherwise SC_EFULL when the bytes do not fit.
 * dst must have room for d0 + k rows. */
int sc_sel_gather(sc_column *dst, int64_t d0, const sc_column *src, const int32_t *sel, int64_t k, bool grow);

/* Rows [0, k) of dst[c] = src[c] rows sel[0..k) for each of ncols columns (same physical
 * types), as sc_sel_gather does; int64 / double columns go through sel four at a time, so each
 * index is loaded once per four columns. */
int sc_sel_gather_cols(sc_column *dst, const sc_column *src, int32_t ncols, const int32_t *sel, int64_t k, bool grow);

/* The same result from the keep mask itself: rows [0, k) of dst[c] = src[c]'s rows r < n with
 * keep[r] != 0 (k of them). Int64 / double columns are compressed by the mask, four columns
 * per pass: eight rows per AVX-512 instruction, or four rows per AVX2 permutation, where the
 * CPU has them (checked once at run time). String views are compressed as 16-byte values
 * (AVX2: two rows per permutation); bool values and validity bitmaps 64 rows per pext where
 * the CPU has a fast one (BMI2, not AMD before Zen 3). The rest (strings in offsets / data,
 * and every bitmap on CPUs without those paths) is gathered through a selection vector, which
 * is then written to sel (room for n indices) from the mask: callers need not make one. Every
 * dst int64 / double column must have room for n rows (whole vector stores may write past row
 * k); a views dst gets room for n. */
int sc_sel_compress_cols(sc_column *dst, const sc_column *src, int32_t ncols, const uint8_t *keep, int64_t n,
                         int32_t *sel, int64_t k, bool grow);

/* Tests: restrict the vector paths to those in `allowed` (bits: 1 AVX2, 2 pext, 4 AVX-512;
 * -1 every one the CPU has); returns the previous restriction. */
int sc_sel_allow_paths(int allowed);

#endif
