/*
 * accept_plot.c — bar charts as PNG for `edgellm accept` (contract in
 * accept_plot.h): an RGB canvas, filled rectangles, lines, a 5x7 bitmap font
 * (drawn here, glyph by glyph) and libpng to write it.
 */
#include "cli/accept_plot.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

typedef struct canvas { int w, h; uint8_t *px; } canvas;

static void put(canvas *c, int x, int y, unsigned rgb) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
    uint8_t *p = c->px + 3 * ((size_t)y * (size_t)c->w + (size_t)x);
    p[0] = (uint8_t)(rgb >> 16); p[1] = (uint8_t)(rgb >> 8); p[2] = (uint8_t)rgb;
}

static void rect(canvas *c, int x0, int y0, int x1, int y1, unsigned rgb) {
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) put(c, x, y, rgb);
}

/* 5x7 glyphs, one byte a row, bit 4 = leftmost column. */
typedef struct glyph { char ch; uint8_t row[7]; } glyph;
static const glyph k_font[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'A', {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}}, {'B', {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}},
    {'C', {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}}, {'D', {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}},
    {'E', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}}, {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}},
    {'G', {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}}, {'H', {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
    {'I', {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}}, {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}},
    {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}}, {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}},
    {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}}, {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}},
    {'O', {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'P', {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}},
    {'Q', {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}}, {'R', {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}},
    {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}}, {'T', {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
    {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}},
    {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}}, {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}},
    {'Y', {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}}, {'Z', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}}, {'-', {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}},
    {'/', {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10}}, {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
    {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}}, {':', {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}},
    {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}}, {'=', {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00}},
    {',', {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08}}, {'_', {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F}},
};

static const glyph *find_glyph(char ch) {
    ch = (char)toupper((unsigned char)ch);
    for (size_t i = 0; i < sizeof k_font / sizeof k_font[0]; i++)
        if (k_font[i].ch == ch) return &k_font[i];
    return NULL;
}

/* Text at (x, y) = its top-left corner, each font pixel scale x scale; returns its width. */
static int text(canvas *c, int x, int y, const char *s, int scale, unsigned rgb) {
    int x0 = x;
    for (; *s; s++, x += 6 * scale) {
        const glyph *g = find_glyph(*s);
        if (!g) continue;
        for (int r = 0; r < 7; r++)
            for (int b = 0; b < 5; b++)
                if (g->row[r] & (0x10 >> b)) rect(c, x + b * scale, y + r * scale, x + b * scale + scale - 1, y + r * scale + scale - 1, rgb);
    }
    return x - x0;
}

static int text_w(const char *s, int scale) { return (int)strlen(s) * 6 * scale; }

/* Text rotated 90 degrees counter-clockwise, its baseline along x = x, reading upwards from y. */
static void text_up(canvas *c, int x, int y, const char *s, int scale, unsigned rgb) {
    for (; *s; s++, y -= 6 * scale) {
        const glyph *g = find_glyph(*s);
        if (!g) continue;
        for (int r = 0; r < 7; r++)
            for (int b = 0; b < 5; b++)
                if (g->row[r] & (0x10 >> b)) rect(c, x + r * scale, y - b * scale - scale + 1, x + r * scale + scale - 1, y - b * scale, rgb);
    }
}

/* A "nice" tick step (1, 2, 5 x 10^k) for about 5 ticks up to top. */
static double nice_step(double top) {
    double raw = top / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static bool write_png(const char *path, const canvas *c, char *why, size_t cap) {
    FILE *f = fopen(path, "wb");
    if (!f) { snprintf(why, cap, "%s: cannot write", path); return false; }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        snprintf(why, cap, "%s: libpng failed", path);
        return false;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(png, 9);
    png_write_info(png, info);
    for (int y = 0; y < c->h; y++) png_write_row(png, c->px + 3 * (size_t)y * (size_t)c->w);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    if (fclose(f) != 0) { snprintf(why, cap, "%s: write failed", path); return false; }
    return true;
}

bool accept_plot_bars(const char *path, const char *title, const char *ylabel, int n, const accept_series *s,
                      int n_series, double limit, char *why, size_t cap) {
    const int left = 70, right = 20, top = 50, bottom = 50;
    int slot = n_series * 14 + 10;
    if (slot < 24) slot = 24;
    canvas c = {.w = left + right + (n > 0 ? n : 1) * slot, .h = 360};
    if (c.w < 480) c.w = 480;
    c.px = malloc((size_t)c.w * (size_t)c.h * 3);
    if (!c.px) { snprintf(why, cap, "out of memory"); return false; }
    memset(c.px, 0xFF, (size_t)c.w * (size_t)c.h * 3);
    const int x0 = left, y0 = c.h - bottom, x1 = c.w - right, y1 = top;
    double vmax = 0;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < n; i++)
            if (isfinite(s[k].v[i]) && s[k].v[i] > vmax) vmax = s[k].v[i];
    if (!(vmax > 0)) vmax = 1;
    /* the limit joins the scale only when it is near the data; else it is written, not drawn */
    bool limit_on_scale = isfinite(limit) && limit > 0 && limit <= 1.5 * vmax;
    if (limit_on_scale && limit > vmax) vmax = limit;
    double step = nice_step(vmax * 1.05), ytop = ceil(vmax * 1.05 / step) * step;
    /* grid and y ticks */
    for (double t = 0; t <= ytop + step / 2; t += step) {
        int y = y0 - (int)lround((y0 - y1) * t / ytop);
        rect(&c, x0, y, x1, y, t == 0 ? 0x000000 : 0xDDDDDD);
        char lab[32];
        snprintf(lab, sizeof lab, step >= 1 ? "%.0f" : step >= 0.1 ? "%.1f" : "%.2f", t);
        text(&c, x0 - 6 - text_w(lab, 1), y - 3, lab, 1, 0x333333);
    }
    rect(&c, x0, y1, x0, y0, 0x000000);
    /* bars */
    int gap = (slot - n_series * 14) / 2;
    for (int i = 0; i < n; i++) {
        int sx = x0 + i * slot;
        for (int k = 0; k < n_series; k++) {
            int bx = sx + gap + k * 14;
            double v = s[k].v[i];
            if (!isfinite(v)) { text(&c, bx + 3, y0 - 9, "X", 1, 0xAA0000); continue; }
            int h = (int)lround((y0 - y1) * (v > ytop ? ytop : v) / ytop);
            rect(&c, bx, y0 - h, bx + 11, y0 - 1, s[k].rgb);
        }
        char lab[16];
        snprintf(lab, sizeof lab, "%d", i + 1);
        text(&c, sx + slot / 2 - text_w(lab, 1) / 2, y0 + 6, lab, 1, 0x000000);
    }
    /* the threshold, dashed */
    if (isfinite(limit) && limit > 0 && !limit_on_scale) {
        char lab[64];
        snprintf(lab, sizeof lab, "LIMIT %g (ABOVE THE SCALE)", limit);
        text(&c, x1 - text_w(lab, 1), y1 - 12, lab, 1, 0xCC0000);
    }
    if (limit_on_scale) {
        int y = y0 - (int)lround((y0 - y1) * limit / ytop);
        for (int x = x0; x < x1; x += 8) rect(&c, x, y, x + 4, y, 0xCC0000);
        text(&c, x1 - text_w("LIMIT", 1), y - 10, "LIMIT", 1, 0xCC0000);
    }
    text(&c, x0, 14, title, 2, 0x000000);
    text_up(&c, 8, y0 - 10, ylabel, 1, 0x333333);
    text(&c, x0 + (x1 - x0) / 2 - text_w("CELL", 1) / 2, y0 + 22, "CELL", 1, 0x333333);
    int lx = x0;
    for (int k = 0; k < n_series; k++) {
        rect(&c, lx, c.h - 14, lx + 9, c.h - 6, s[k].rgb);
        lx += 14 + text(&c, lx + 14, c.h - 14, s[k].name, 1, 0x000000) + 16;
    }
    text(&c, lx, c.h - 14, "X: NO DATA (REFUSED)", 1, 0xAA0000);
    bool ok = write_png(path, &c, why, cap);
    free(c.px);
    return ok;
}
