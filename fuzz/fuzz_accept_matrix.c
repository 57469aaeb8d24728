/*
 * fuzz_accept_matrix.c — libFuzzer target for the acceptance matrix parser
 * (src/deploy/accept_matrix.c).
 *
 * A refusal must carry a message naming where (a JSON path or "matrix:").
 * A matrix that parses must keep accept_matrix.h's promises: a name, 1..16
 * prompts, n_predict 2..512, 1..8 values on every axis, 1..256 cells with
 * every value index in range, cell 0 the reference, no cell twice, the
 * reference never expected to refuse, and with "pairwise" every pair of
 * values of any two axes in some cell; naming each cell must not overflow.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deploy/accept_matrix.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static el_accept_matrix m;
    char why[512];
    why[0] = 0;
    bool ok = el_accept_matrix_parse((const char *)data, size, &m, why, sizeof why);
    if (!ok) {
        REQUIRE(why[0] != 0);
        el_accept_matrix_free(&m);
        return 0;
    }
    REQUIRE(m.name[0]);
    REQUIRE(m.n_prompts >= 1 && m.n_prompts <= EL_ACCEPT_MAX_PROMPTS);
    for (int i = 0; i < m.n_prompts; i++) REQUIRE(m.prompts[i] && m.prompts[i][0]);
    REQUIRE(m.n_predict >= 2 && m.n_predict <= 512);
    REQUIRE(m.n_cells >= 1 && m.n_cells <= EL_ACCEPT_MAX_CELLS);
    for (int a = 0; a < EL_AX_COUNT; a++) {
        REQUIRE(m.n_val[a] >= 1 && m.n_val[a] <= EL_ACCEPT_MAX_VALUES);
        REQUIRE(m.cell[0][a] == m.ref[a]);
    }
    REQUIRE(!el_accept_cell_expects_refusal(&m, 0));
    for (int c = 0; c < m.n_cells; c++) {
        for (int a = 0; a < EL_AX_COUNT; a++) REQUIRE(m.cell[c][a] < m.n_val[a]);
        for (int d = 0; d < c; d++) REQUIRE(memcmp(m.cell[c], m.cell[d], EL_AX_COUNT) != 0);
        char name[256];
        el_accept_cell_name(&m, c, name, sizeof name);
        REQUIRE(name[0] && strlen(name) < sizeof name);
    }
    REQUIRE(el_accept_matrix_pairs_missing(&m) == 0); /* "all" holds every pair too */
    el_accept_matrix_free(&m);
    return 0;
}
