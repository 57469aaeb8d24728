/*
 * placement_report.c — the placement's evidence (placement.h:
 * el_placement_print, el_placement_print_json): seed 002's report, as text
 * for people and as one JSON object for tools.
 *
 * Contract: one walk (report_walk) visits the placement in the report's
 * order — the devices, the summary (parameters, estimates, decisions), the
 * weights each device holds, every op, the partitions, the fallbacks, every
 * copy, the costliest copies, the end (the alarm) — and hands each item to
 * a format (k_text, k_json), which writes that item and only it: no format
 * walks the placement itself, so both always report the same things.
 *   - text: per layer where each op ran (a run of layers placed alike is one
 *     row; * marks a fallback), the partitions with the bytes crossing each
 *     boundary and estimated vs measured time, the outputs read back, every
 *     fallback with its reason, the tax and its alarm; control bytes of a
 *     name print as '?'.
 *   - JSON: one object (no trailing newline): devices, params, estimate,
 *     placed, the counts, ops (with every device's estimate), partitions,
 *     fallbacks, boundaries, alarm (with the costliest boundaries); strings
 *     escaped (invalid UTF-8 as U+FFFD), times in ms (null: not run there).
 * Reads only; writes only to f.
 */
#include <math.h>
#include <string.h>

#include "sched/placement.h"
#include "util/utf8.h"

/* ---- the walk --------------------------------------------------------------- */

typedef struct report {
    FILE *f;
    const el_placement *p;
    const el_place_op *ops;
    const el_device_caps *devs;
    size_t out_bytes; /* the outputs read back to the host at the end of the pass */
    double out_t;
    int n;            /* items written in the current list (JSON's commas) */
    int row_end;      /* text: the ops of the open layer row end here */
    int row_skip;     /* text: ops before this one are shown by an earlier row */
    int col;          /* text: ops written in the open row */
} report;

/* The lists of the report, in order. */
typedef enum { LIST_OPS, LIST_PARTS, LIST_FALLBACKS, LIST_BOUNDS, LIST_TOP, LIST_END } report_list;

/* A format: one function per item (NULL: the format does not show it). */
typedef struct report_fmt {
    void (*head)(report *r);
    void (*device)(report *r, int d);
    void (*summary)(report *r);
    void (*weights)(report *r, int d);
    void (*list)(report *r, report_list which); /* a list begins (LIST_END: the report ends) */
    void (*op)(report *r, int i);
    void (*partition)(report *r, const el_partition *q);
    void (*fallback)(report *r, int i);
    void (*bound)(report *r, const el_boundary *b); /* in LIST_BOUNDS and LIST_TOP */
} report_fmt;

static void report_list_begin(const report_fmt *fmt, report *r, report_list which) {
    r->n = 0;
    fmt->list(r, which);
}

static void report_walk(const report_fmt *fmt, FILE *f, const el_placement *p, const el_place_op *ops,
                        const el_device_caps *devs) {
    report r = {.f = f, .p = p, .ops = ops, .devs = devs};
    for (int b = 0; b < p->n_bounds; b++)
        if (p->bounds[b].op >= p->n_ops) {
            r.out_t += p->bounds[b].t;
            r.out_bytes += p->bounds[b].bytes;
        }
    fmt->head(&r);
    for (int d = 0; d < p->n_dev; d++) fmt->device(&r, d);
    fmt->summary(&r);
    if (fmt->weights)
        for (int d = 0; d < p->n_dev; d++) fmt->weights(&r, d);
    report_list_begin(fmt, &r, LIST_OPS);
    for (int i = 0; i < p->n_ops; i++) fmt->op(&r, i);
    report_list_begin(fmt, &r, LIST_PARTS);
    for (int k = 0; k < p->n_parts; k++) fmt->partition(&r, &p->parts[k]);
    report_list_begin(fmt, &r, LIST_FALLBACKS);
    for (int i = 0; i < p->n_ops; i++)
        if (p->d[i].dev != p->d[i].wanted) fmt->fallback(&r, i);
    report_list_begin(fmt, &r, LIST_BOUNDS);
    if (fmt->bound)
        for (int b = 0; b < p->n_bounds; b++) fmt->bound(&r, &p->bounds[b]);
    report_list_begin(fmt, &r, LIST_TOP);
    if (fmt->bound)
        for (int k = 0; k < p->n_top; k++) fmt->bound(&r, &p->top[k]);
    report_list_begin(fmt, &r, LIST_END);
}

static const char *kind_word(el_dev_kind k) {
    switch (k) {
    case EL_DEV_CPU: return "cpu";
    case EL_DEV_GPU: return "gpu";
    case EL_DEV_NPU: return "npu";
    default: return "other";
    }
}

/* ---- text ------------------------------------------------------------------- */

static void fmt_bytes(char *b, size_t cap, double v) {
    if (v >= 1 << 30) snprintf(b, cap, "%.2f GiB", v / (1 << 30));
    else if (v >= 1 << 20) snprintf(b, cap, "%.2f MiB", v / (1 << 20));
    else if (v >= 1 << 10) snprintf(b, cap, "%.1f KiB", v / (1 << 10));
    else snprintf(b, cap, "%.0f B", v);
}

/* Text for the human report: control bytes as '?'. */
static void put_safe(FILE *f, const char *s) {
    for (; *s; s++) fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

static void text_head(report *r) {
    const int nd = r->p->n_dev;
    fprintf(r->f, "placement: %d ops on %d device%s", r->p->n_ops, nd, nd == 1 ? "" : "s");
}

static void text_device(report *r, int d) {
    const el_device_caps *c = &r->devs[d];
    fprintf(r->f, "%s %d=%s (%s%s)", d ? "," : ":", d, c->name, kind_word(c->kind), c->simulated ? ", simulated" : "");
}

static void text_summary(report *r) {
    FILE *f = r->f;
    const el_placement *p = r->p;
    const el_device_caps *devs = r->devs;
    fprintf(f, "\n");
    fprintf(f, "  prefer %s, tolerance %.2fx, tax budget %.0f%%%s%s\n",
            p->params.prefer >= 0 ? devs[p->params.prefer].name : "none", p->params.tolerance,
            100 * p->params.tax_budget, p->params.force >= 0 ? ", forced onto " : "",
            p->params.force >= 0 ? devs[p->params.force].name : "");
    fprintf(f, "  estimate: compute %.3f ms + tax %.3f ms = %.3f ms (tax %.1f%%); CPU alone %.3f ms\n",
            1e3 * p->t_compute, 1e3 * p->t_tax, 1e3 * p->t_total, p->t_total > 0 ? 100 * p->t_tax / p->t_total : 0,
            1e3 * p->t_cpu_only);
    if (p->placed_total != p->t_total || p->placed_tax != p->t_tax)
        fprintf(f, "  as first placed: compute %.3f ms + tax %.3f ms = %.3f ms (tax %.1f%%)\n", 1e3 * p->placed_compute,
                1e3 * p->placed_tax, 1e3 * p->placed_total,
                p->placed_total > 0 ? 100 * p->placed_tax / p->placed_total : 0);
    fprintf(f, "  decisions: %d shapes decided, %d ops reused a decision; %d fallbacks\n", p->n_shapes,
            p->n_cache_hits, p->n_fallbacks);
}

static void text_weights(report *r, int d) {
    const el_device_caps *c = &r->devs[d];
    if (!r->p->dev_weight_bytes[d]) return;
    char b[32];
    fmt_bytes(b, sizeof b, (double)r->p->dev_weight_bytes[d]);
    fprintf(r->f, "  weights on %s: %s%s", c->name, b, c->mem_bytes ? "" : "\n");
    if (c->mem_bytes) {
        fmt_bytes(b, sizeof b, (double)c->mem_bytes);
        fprintf(r->f, " of %s\n", b);
    }
}

static void text_list(report *r, report_list which) {
    FILE *f = r->f;
    const el_placement *p = r->p;
    switch (which) {
    case LIST_OPS: fprintf(f, "ops by layer (site:kind -> device; * = fallback):\n"); break;
    case LIST_PARTS:
        if (r->row_end > 0) fprintf(f, "\n"); /* the last layer row */
        fprintf(f, "partitions (%d):\n", p->n_parts);
        fprintf(f, "  %3s %-10s %-11s %10s %10s %12s %10s\n", "#", "device", "ops", "est ms", "meas ms", "bytes in",
                "tax ms");
        break;
    case LIST_FALLBACKS:
        if (r->out_bytes) {
            char b[32];
            fmt_bytes(b, sizeof b, (double)r->out_bytes);
            fprintf(f, "  outputs read back to the host: %s, %.3f ms\n", b, 1e3 * r->out_t);
        }
        fprintf(f, "fallbacks (%d):\n", p->n_fallbacks);
        break;
    case LIST_END:
        if (p->tax_alarm) fprintf(f, "TAX ALARM: %s\n", p->alarm);
        else
            fprintf(f, "tax: %.1f%% of the pass, within the %.0f%% budget\n",
                    p->t_total > 0 ? 100 * p->t_tax / p->t_total : 0, 100 * p->params.tax_budget);
        break;
    default: break;
    }
}

/* Whether ops [j, j + len) place as [i, i + len) do (site, kind, device, fallback). */
static bool same_row(const report *r, int i, int j, int len) {
    for (int m = 0; m < len; m++) {
        const el_place_op *a = &r->ops[i + m], *b = &r->ops[j + m];
        const el_place_decision *da = &r->p->d[i + m], *db = &r->p->d[j + m];
        if (!(a->kind == b->kind && da->dev == db->dev && da->wanted == db->wanted &&
              ((!a->site && !b->site) || (a->site && b->site && strcmp(a->site, b->site) == 0))))
            return false;
    }
    return true;
}

/* A layer's ops open a row, labelled with the run of following layers placed
 * alike (whose ops the row stands for); the row wraps after every 4 ops. */
static void text_op(report *r, int i) {
    FILE *f = r->f;
    const el_place_op *ops = r->ops;
    const int n = r->p->n_ops;
    if (i >= r->row_end) {
        if (i < r->row_skip) return;
        if (r->row_end > 0) fprintf(f, "\n");
        const int layer = ops[i].layer;
        int e = i;
        while (e < n && ops[e].layer == layer) e++;
        int last = layer, j = e;
        while (layer >= 0 && j < n && ops[j].layer == last + 1) {
            int k = j;
            while (k < n && ops[k].layer == last + 1) k++;
            if (k - j != e - i || !same_row(r, i, j, e - i)) break;
            last++;
            j = k;
        }
        char lab[32];
        if (layer < 0) snprintf(lab, sizeof lab, "-");
        else if (last > layer) snprintf(lab, sizeof lab, "L%d-%d", layer, last);
        else snprintf(lab, sizeof lab, "L%d", layer);
        fprintf(f, "  %-7s", lab);
        r->row_end = e;
        r->row_skip = j > e ? j : e;
        r->col = 0;
    }
    const el_place_decision *d = &r->p->d[i];
    if (r->col && r->col % 4 == 0) fprintf(f, "\n  %-7s", "");
    r->col++;
    fputc(' ', f);
    put_safe(f, ops[i].site ? ops[i].site : "-");
    fprintf(f, ":%s->%s%s", el_op_kind_name(ops[i].kind), r->devs[d->dev].name, d->dev != d->wanted ? "*" : "");
}

static void text_partition(report *r, const el_partition *q) {
    char rg[24], b[32], m[24];
    snprintf(rg, sizeof rg, "%d..%d", q->op_begin, q->op_end - 1);
    fmt_bytes(b, sizeof b, (double)q->bytes_in);
    if (q->t_meas > 0) snprintf(m, sizeof m, "%.3f", 1e3 * q->t_meas);
    else snprintf(m, sizeof m, "-");
    fprintf(r->f, "  %3d %-10s %-11s %10.3f %10s %12s %10.3f\n", r->n++, r->devs[q->dev].name, rg, 1e3 * q->t_est, m,
            b, 1e3 * q->tax_est);
}

static void text_fallback(report *r, int i) {
    FILE *f = r->f;
    const el_place_decision *d = &r->p->d[i];
    fprintf(f, "  op %d L%d ", i, r->ops[i].layer);
    put_safe(f, r->ops[i].site ? r->ops[i].site : "-");
    fprintf(f, " (%s): on %s, wanted %s: %s", el_op_kind_name(r->ops[i].kind), r->devs[d->dev].name,
            r->devs[d->wanted].name, el_place_why_name(d->why));
    if (d->t_est[d->wanted] >= 0)
        fprintf(f, " (%.4f ms there vs %.4f ms here)", 1e3 * d->t_est[d->wanted], 1e3 * d->t_est[d->dev]);
    fprintf(f, "\n");
}

static const report_fmt k_text = {
    .head = text_head,
    .device = text_device,
    .summary = text_summary,
    .weights = text_weights,
    .list = text_list,
    .op = text_op,
    .partition = text_partition,
    .fallback = text_fallback,
    .bound = NULL, /* the text shows copies as partition bytes, the read-back and the alarm */
};

void el_placement_print(FILE *f, const el_placement *p, const el_place_op *ops, const el_device_caps *devs) {
    if (!f || !p) return;
    report_walk(&k_text, f, p, ops, devs);
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    if (!s) s = "";
    const unsigned char *u = (const unsigned char *)s;
    const size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        const unsigned char ch = u[i];
        if (ch == '"' || ch == '\\') {
            fputc('\\', f);
            fputc(ch, f);
            i++;
        } else if (ch < 0x20 || ch == 0x7f) {
            fprintf(f, "\\u%04x", ch);
            i++;
        } else if (ch < 0x80) {
            fputc(ch, f);
            i++;
        } else {
            const size_t len = el_utf8_seq(u + i, n - i);
            if (len) {
                fwrite(u + i, 1, len, f);
                i += len;
            } else {
                fputs("\\ufffd", f);
                i++;
            }
        }
    }
    fputc('"', f);
}

static void json_ms(FILE *f, double s) {
    if (s < 0 || !isfinite(s)) fputs("null", f);
    else fprintf(f, "%.9g", 1e3 * s);
}

/* "," before every item of a list but the first. */
static void json_item(report *r) {
    if (r->n++) fputc(',', r->f);
}

static void json_head(report *r) { fputs("{\"devices\":[", r->f); }

static void json_device(report *r, int d) {
    FILE *f = r->f;
    const el_device_caps *c = &r->devs[d];
    fprintf(f, "%s{\"index\":%d,\"name\":", d ? "," : "", d);
    json_str(f, c->name);
    fputs(",\"kind\":", f);
    json_str(f, kind_word(c->kind));
    fprintf(f, ",\"simulated\":%s,\"weight_bytes\":%zu,\"mem_bytes\":%llu}", c->simulated ? "true" : "false",
            r->p->dev_weight_bytes[d], (unsigned long long)c->mem_bytes);
}

/* ,"<name>":{...}: a plan's estimated times and tax share (cpu_only: also the CPU-alone time). */
static void json_plan(FILE *f, const char *name, double compute, double tax, double total, const double *cpu_only) {
    fprintf(f, ",\"%s\":{\"compute_ms\":", name);
    json_ms(f, compute);
    fputs(",\"tax_ms\":", f);
    json_ms(f, tax);
    fputs(",\"total_ms\":", f);
    json_ms(f, total);
    if (cpu_only) {
        fputs(",\"cpu_only_ms\":", f);
        json_ms(f, *cpu_only);
    }
    fprintf(f, ",\"tax_share\":%.9g}", total > 0 ? tax / total : 0);
}

static void json_summary(report *r) {
    FILE *f = r->f;
    const el_placement *p = r->p;
    fputs("],\"params\":{\"prefer\":", f);
    if (p->params.prefer >= 0) json_str(f, r->devs[p->params.prefer].name);
    else fputs("null", f);
    fputs(",\"force\":", f);
    if (p->params.force >= 0) json_str(f, r->devs[p->params.force].name);
    else fputs("null", f);
    fprintf(f, ",\"tolerance\":%.9g,\"tax_budget\":%.9g}", p->params.tolerance, p->params.tax_budget);
    json_plan(f, "estimate", p->t_compute, p->t_tax, p->t_total, &p->t_cpu_only);
    json_plan(f, "placed", p->placed_compute, p->placed_tax, p->placed_total, NULL);
    fprintf(f, ",\"n_ops\":%d,\"n_shapes\":%d,\"n_cache_hits\":%d,\"n_fallbacks\":%d", p->n_ops, p->n_shapes,
            p->n_cache_hits, p->n_fallbacks);
}

static void json_list(report *r, report_list which) {
    FILE *f = r->f;
    switch (which) {
    case LIST_OPS: fputs(",\"ops\":[", f); break;
    case LIST_PARTS: fputs("],\"partitions\":[", f); break;
    case LIST_FALLBACKS: fputs("],\"fallbacks\":[", f); break;
    case LIST_BOUNDS: fputs("],\"boundaries\":[", f); break;
    case LIST_TOP:
        fprintf(f, "],\"alarm\":{\"fired\":%s,\"text\":", r->p->tax_alarm ? "true" : "false");
        json_str(f, r->p->tax_alarm ? r->p->alarm : "");
        fputs(",\"costliest\":[", f);
        break;
    case LIST_END: fputs("]}}", f); break;
    }
}

/* The fields an op's entry and a fallback's share: where op i ran and why. */
static void json_decision(report *r, int i) {
    FILE *f = r->f;
    const el_place_decision *d = &r->p->d[i];
    fprintf(f, "{\"op\":%d,\"layer\":%d,\"site\":", i, r->ops[i].layer);
    json_str(f, r->ops[i].site);
    fputs(",\"kind\":", f);
    json_str(f, el_op_kind_name(r->ops[i].kind));
    fputs(",\"device\":", f);
    json_str(f, r->devs[d->dev].name);
    fputs(",\"wanted\":", f);
    json_str(f, r->devs[d->wanted].name);
    fputs(",\"why\":", f);
    json_str(f, el_place_why_name(d->why));
}

static void json_op(report *r, int i) {
    FILE *f = r->f;
    json_item(r);
    json_decision(r, i);
    fputs(",\"est_ms\":[", f);
    for (int k = 0; k < r->p->n_dev; k++) {
        if (k) fputc(',', f);
        json_ms(f, r->p->d[i].t_est[k]);
    }
    fputs("]}", f);
}

static void json_partition(report *r, const el_partition *q) {
    FILE *f = r->f;
    json_item(r);
    fputs("{\"device\":", f);
    json_str(f, r->devs[q->dev].name);
    fprintf(f, ",\"op_begin\":%d,\"op_end\":%d,\"est_ms\":", q->op_begin, q->op_end);
    json_ms(f, q->t_est);
    fputs(",\"meas_ms\":", f);
    if (q->t_meas > 0) json_ms(f, q->t_meas);
    else fputs("null", f);
    fprintf(f, ",\"bytes_in\":%zu,\"tax_ms\":", q->bytes_in);
    json_ms(f, q->tax_est);
    fputc('}', f);
}

static void json_fallback(report *r, int i) {
    json_item(r);
    json_decision(r, i);
    fputc('}', r->f);
}

static void json_bound(report *r, const el_boundary *b) {
    FILE *f = r->f;
    const el_place_op *ops = r->ops;
    json_item(r);
    fprintf(f, "{\"op\":%d,", b->op);
    if (b->op < r->p->n_ops) {
        fprintf(f, "\"layer\":%d,\"site\":", ops[b->op].layer);
        json_str(f, ops[b->op].site);
        fputs(",\"kind\":", f);
        json_str(f, el_op_kind_name(ops[b->op].kind));
    } else {
        fputs("\"layer\":null,\"site\":\"(outputs)\",\"kind\":null", f);
    }
    fprintf(f, ",\"tensor\":%d,\"from\":", b->tensor);
    json_str(f, el_place_dev_name(r->devs, r->p->n_dev, b->from));
    fputs(",\"to\":", f);
    json_str(f, el_place_dev_name(r->devs, r->p->n_dev, b->to));
    fprintf(f, ",\"bytes\":%zu,\"ms\":", b->bytes);
    json_ms(f, b->t);
    fputc('}', f);
}

static const report_fmt k_json = {
    .head = json_head,
    .device = json_device,
    .summary = json_summary,
    .weights = NULL, /* in each device's entry */
    .list = json_list,
    .op = json_op,
    .partition = json_partition,
    .fallback = json_fallback,
    .bound = json_bound,
};

void el_placement_print_json(FILE *f, const el_placement *p, const el_place_op *ops, const el_device_caps *devs) {
    if (!f || !p) return;
    report_walk(&k_json, f, p, ops, devs);
}
