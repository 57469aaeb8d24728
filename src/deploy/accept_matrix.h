/*
 * accept_matrix.h — the acceptance matrix (`edgellm accept MATRIX.json`):
 * its strict parser and the cells it declares.
 *
 *   {"format": "edgellm-accept/1", "name": "...",
 *    "axes": {"backend": ["cpu", "opencl", "auto"], "kv_type": ["f16", "q8_0"],
 *             "load": ["mmap"], "start": ["cold", "warm"], "mem_budget": ["0", "512MiB"],
 *             "threads": [2], "thermal": ["nominal", "derated", "hot"], "concurrency": [1]},
 *    "cover": "all" | "pairwise",
 *    "reference": {"backend": "cpu", ...},        (optional: else the first value of every axis)
 *    "prompts": ["...", ...], "n_predict": 8,
 *    "expect_refused": {"thermal": ["hot"]},     (optional: cells with these values must refuse)
 *    "thresholds": {"ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms",
 *                   "min_tokens_per_s", "max_peak_rss_mib", "max_cpu_s_per_token",
 *                   "min_greedy_agreement", "max_mean_abs_dlogp", "max_fallbacks",
 *                   "max_refusals"}}                 (each optional)
 *
 * Contract: el_accept_matrix_parse reads bytes only (no file access; the
 * caller reads the file, el_accept_matrix_read refuses anything but a regular
 * file up to EL_ACCEPT_MATRIX_MAX_BYTES); every refusal names the JSON path
 * of the bad value (`axes.kv_type[2]: unknown KV type "q7"`), an unknown key
 * or a duplicate key is refused, nesting deeper than the format's own
 * (4 levels) is refused before cJSON sees it. Axis values are checked against
 * what the runtime knows (KV types, load strategies, backends, sizes). The
 * cells: "all" is the cartesian product (at most EL_ACCEPT_MAX_CELLS);
 * "pairwise" a covering subset where every pair of values of any two axes
 * appears in some cell (greedy, deterministic); the reference cell is always
 * a cell (index 0).
 */
#ifndef EL_DEPLOY_ACCEPT_MATRIX_H
#define EL_DEPLOY_ACCEPT_MATRIX_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EL_ACCEPT_FORMAT "edgellm-accept/1"
#define EL_ACCEPT_MATRIX_MAX_BYTES (256u << 10)
#define EL_ACCEPT_MAX_VALUES 8    /* values per axis */
#define EL_ACCEPT_MAX_CELLS 256
#define EL_ACCEPT_MAX_PROMPTS 16
#define EL_ACCEPT_MAX_PROMPT_BYTES 4096

typedef enum {
    EL_AX_BACKEND, EL_AX_KV, EL_AX_LOAD, EL_AX_START, EL_AX_MEM, EL_AX_THREADS, EL_AX_THERMAL, EL_AX_CONC,
    EL_AX_COUNT
} el_accept_axis;

/* Threshold slots; NAN = not declared. */
typedef enum {
    EL_TH_TTFT_P50, EL_TH_TTFT_P95, EL_TH_ITL_P50, EL_TH_ITL_P95, EL_TH_TPS, EL_TH_RSS, EL_TH_CPU_TOK,
    EL_TH_AGREE, EL_TH_DLOGP, EL_TH_FALLBACKS, EL_TH_REFUSALS, EL_TH_COUNT
} el_accept_th;

typedef struct el_accept_matrix {
    char name[64];
    int n_val[EL_AX_COUNT];
    char val[EL_AX_COUNT][EL_ACCEPT_MAX_VALUES][24]; /* normalized text of each value */
    int ref[EL_AX_COUNT];                             /* the reference cell's value index per axis */
    bool pairwise;
    bool refuse[EL_AX_COUNT][EL_ACCEPT_MAX_VALUES];   /* expect_refused */
    int n_prompts;
    char *prompts[EL_ACCEPT_MAX_PROMPTS];
    int n_predict;
    double th[EL_TH_COUNT];
    /* the cells: value index per axis; cell 0 is the reference */
    int n_cells;
    uint8_t cell[EL_ACCEPT_MAX_CELLS][EL_AX_COUNT];
} el_accept_matrix;

const char *el_accept_axis_name(el_accept_axis a);   /* "backend", "kv_type", ... */
const char *el_accept_th_name(el_accept_th t);       /* "ttft_p50_ms", ... */
bool el_accept_th_is_min(el_accept_th t);            /* a lower bound (tokens/s, agreement) */

/* Parses len bytes; on failure why[cap] names the JSON path. m is filled
 * (free with el_accept_matrix_free, also after a failure). */
bool el_accept_matrix_parse(const char *json, size_t len, el_accept_matrix *m, char *why, size_t cap);
/* Reads a regular file (no FIFO, device or directory; size capped) and parses it;
 * sha256 of its bytes out (may be NULL). */
bool el_accept_matrix_read(const char *path, el_accept_matrix *m, uint8_t sha256[32], char *why, size_t cap);
void el_accept_matrix_free(el_accept_matrix *m);

/* A cell's name: "backend=cpu,kv_type=f16,..." over the axes with more than one value
 * ("reference" when every axis has one). */
void el_accept_cell_name(const el_accept_matrix *m, int cell, char *out, size_t cap);
/* Whether cell is expected to refuse (expect_refused). */
bool el_accept_cell_expects_refusal(const el_accept_matrix *m, int cell);
/* How many (axis a value i, axis b value j) pairs no cell holds, counted by direct search
 * (independent of the cover's construction): 0 for "cover": "pairwise" and "all". */
int el_accept_matrix_pairs_missing(const el_accept_matrix *m);

#endif
