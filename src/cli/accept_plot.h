/*
 * accept_plot.h — the acceptance report's PNG plots: a bar chart (one or
 * two series per category, y axis from 0 with ticks, a title, category
 * numbers under the bars, a legend) drawn by a small own rasterizer with a
 * 5x7 bitmap font and written with libpng. CLI-only: the core library never
 * links libpng.
 *
 * Contract: values that are not finite are drawn as no bar (a small "x"
 * marks the slot); labels are printed in upper case (the font has digits,
 * A-Z and a few signs; other characters print as a blank); returns false
 * with why[] when the file cannot be written.
 */
#ifndef EL_CLI_ACCEPT_PLOT_H
#define EL_CLI_ACCEPT_PLOT_H
#include <stdbool.h>
#include <stddef.h>

typedef struct accept_series {
    const char *name;      /* legend text */
    const double *v;       /* n values */
    unsigned rgb;          /* 0xRRGGBB */
} accept_series;

bool accept_plot_bars(const char *path, const char *title, const char *ylabel, int n, const accept_series *s,
                      int n_series, double limit, char *why, size_t cap);

#endif
