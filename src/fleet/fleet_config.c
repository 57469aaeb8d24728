/*
 * fleet_config.c — the fleet config and gate file parsers, stage sizes and
 * gate verdicts (fleet_config.h states the contract). Every refusal names
 * the file and the member; unknown members are refused so a misspelt gate
 * never silently falls back to nothing.
 */
#include "fleet/fleet_config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/textfile.h"

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int fail(char *msg, size_t cap, const char *label, const char *fmt, ...) {
    int n = snprintf(msg, cap, "%s: ", label);
    if (n < 0 || (size_t)n >= cap) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Only the named members may appear; a duplicate key is refused too. */
static int only_members(const cJSON *o, const char *const *names, const char *where, const char *label, char *msg,
                        size_t cap) {
    for (const cJSON *it = o->child; it; it = it->next) {
        bool known = false;
        for (int i = 0; names[i]; i++)
            if (it->string && !strcmp(it->string, names[i])) known = true;
        if (!known) return fail(msg, cap, label, "%s%s: unknown member", where, it->string ? it->string : "?");
        for (const cJSON *jt = it->next; jt; jt = jt->next)
            if (jt->string && !strcmp(jt->string, it->string))
                return fail(msg, cap, label, "%s%s: given twice", where, it->string);
    }
    return 0;
}

static int get_int(const cJSON *o, const char *key, const char *where, long lo, long hi, bool required, long dflt,
                   long *out, const char *label, char *msg, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (required) return fail(msg, cap, label, "%s%s: missing", where, key);
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return fail(msg, cap, label, "%s%s: expected an integer %ld..%ld", where, key, lo, hi);
    *out = (long)v->valuedouble;
    return 0;
}

static int get_num(const cJSON *o, const char *key, double lo, double hi, double *out, const char *label, char *msg,
                   size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return fail(msg, cap, label, "%s: missing", key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return fail(msg, cap, label, "%s: expected a number %g..%g", key, lo, hi);
    *out = v->valuedouble;
    return 0;
}

static int check_format(const cJSON *root, const char *want, const char *label, char *msg, size_t cap) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, want))
        return fail(msg, cap, label, "format: expected \"%s\"", want);
    return 0;
}

/* A printable string of 1..cap-1 bytes with no control byte. */
static int get_text(const cJSON *v, const char *where, char *out, size_t out_cap, const char *label, char *msg,
                    size_t cap) {
    if (!cJSON_IsString(v)) return fail(msg, cap, label, "%s: expected a string", where);
    size_t n = strlen(v->valuestring);
    if (n == 0 || n >= out_cap) return fail(msg, cap, label, "%s: expected 1..%zu bytes", where, out_cap - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v->valuestring[i] < 0x20) return fail(msg, cap, label, "%s: a control byte", where);
    memcpy(out, v->valuestring, n + 1);
    return 0;
}

static int get_prompts(const cJSON *o, const char *key, const char *where, char (*out)[EL_FLEET_PROMPT_CAP], int *n,
                       const char *label, char *msg, size_t cap) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a)) return fail(msg, cap, label, "%s%s: expected an array of strings", where, key);
    int k = cJSON_GetArraySize(a);
    if (k < 1 || k > EL_FLEET_MAX_PROMPTS)
        return fail(msg, cap, label, "%s%s: expected 1..%d prompts", where, key, EL_FLEET_MAX_PROMPTS);
    int i = 0;
    for (const cJSON *it = a->child; it; it = it->next, i++) {
        char w[96];
        snprintf(w, sizeof w, "%s%s[%d]", where, key, i);
        if (get_text(it, w, out[i], EL_FLEET_PROMPT_CAP, label, msg, cap)) return -1;
    }
    *n = k;
    return 0;
}

/* One JSON value filling text[0..len) (white space around it allowed), or NULL. */
static cJSON *parse_whole(const char *text, size_t len) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root) return NULL;
    for (const char *p = end; p < text + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            cJSON_Delete(root);
            return NULL;
        }
    return root;
}

static bool plain_name(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return false;
    return true;
}

static int parse_class(const cJSON *v, int i, el_fleet_class *k, const char *label, char *msg, size_t cap) {
    char where[48];
    snprintf(where, sizeof where, "classes[%d].", i);
    if (!cJSON_IsObject(v)) return fail(msg, cap, label, "classes[%d]: expected an object", i);
    static const char *const names[] = {"name", "count", "mem_budget_mib", "threads", "temp_mc", NULL};
    if (only_members(v, names, where, label, msg, cap)) return -1;
    char w[64];
    snprintf(w, sizeof w, "%sname", where);
    if (get_text(cJSON_GetObjectItemCaseSensitive(v, "name"), w, k->name, sizeof k->name, label, msg, cap)) return -1;
    if (!plain_name(k->name)) return fail(msg, cap, label, "%s: expected [A-Za-z0-9._-] only", w);
    long x;
    if (get_int(v, "count", where, 1, EL_FLEET_MAX_DEVICES, true, 0, &x, label, msg, cap)) return -1;
    k->count = (int)x;
    if (get_int(v, "mem_budget_mib", where, 0, 1L << 20, false, 0, &x, label, msg, cap)) return -1;
    k->mem_budget = (uint64_t)x << 20;
    if (get_int(v, "threads", where, 1, 64, false, 1, &x, label, msg, cap)) return -1;
    k->threads = (int)x;
    if (get_int(v, "temp_mc", where, -100000, 250000, false, 40000, &x, label, msg, cap)) return -1;
    k->temp_mc = (int)x;
    return 0;
}

static int parse_config(const cJSON *root, const char *label, el_fleet_config *c, char *msg, size_t cap) {
    if (!cJSON_IsObject(root)) return fail(msg, cap, label, "expected a JSON object");
    static const char *const names[] = {"format", "classes", "stages", "traffic", "canary", "ctx", "kill_switch", NULL};
    if (only_members(root, names, "", label, msg, cap)) return -1;
    if (check_format(root, "edgellm-fleet/1", label, msg, cap)) return -1;
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(root, "classes");
    if (!cJSON_IsArray(cl) || cJSON_GetArraySize(cl) < 1 || cJSON_GetArraySize(cl) > EL_FLEET_MAX_CLASSES)
        return fail(msg, cap, label, "classes: expected an array of 1..%d objects", EL_FLEET_MAX_CLASSES);
    int i = 0;
    for (const cJSON *it = cl->child; it; it = it->next, i++) {
        if (parse_class(it, i, &c->classes[i], label, msg, cap)) return -1;
        for (int j = 0; j < i; j++)
            if (!strcmp(c->classes[j].name, c->classes[i].name))
                return fail(msg, cap, label, "classes[%d].name: '%s' given twice", i, c->classes[i].name);
        c->n_devices += c->classes[i].count;
        if (c->n_devices > EL_FLEET_MAX_DEVICES)
            return fail(msg, cap, label, "classes: more than %d devices in all", EL_FLEET_MAX_DEVICES);
    }
    c->n_classes = i;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "stages");
    if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) < 1 || cJSON_GetArraySize(st) > EL_FLEET_MAX_STAGES)
        return fail(msg, cap, label, "stages: expected an array of 1..%d percentages", EL_FLEET_MAX_STAGES);
    i = 0;
    for (const cJSON *it = st->child; it; it = it->next, i++) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 1 ||
            it->valuedouble > 100)
            return fail(msg, cap, label, "stages[%d]: expected an integer percentage 1..100", i);
        c->stages[i] = (int)it->valuedouble;
        if (i > 0 && c->stages[i] <= c->stages[i - 1])
            return fail(msg, cap, label, "stages[%d]: %d is not above the stage before it", i, c->stages[i]);
    }
    c->n_stages = i;
    if (c->stages[i - 1] != 100) return fail(msg, cap, label, "stages: the last stage must be 100");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(root, "traffic");
    if (!cJSON_IsObject(tr)) return fail(msg, cap, label, "traffic: expected an object");
    static const char *const tnames[] = {"requests_per_device", "n_predict", "prompts", NULL};
    if (only_members(tr, tnames, "traffic.", label, msg, cap)) return -1;
    long x;
    if (get_int(tr, "requests_per_device", "traffic.", 1, 1000, true, 0, &x, label, msg, cap)) return -1;
    c->requests_per_device = (int)x;
    if (get_int(tr, "n_predict", "traffic.", 1, 256, false, 8, &x, label, msg, cap)) return -1;
    c->n_predict = (int)x;
    if (get_prompts(tr, "prompts", "traffic.", c->prompts, &c->n_prompts, label, msg, cap)) return -1;
    const cJSON *ca = cJSON_GetObjectItemCaseSensitive(root, "canary");
    if (!cJSON_IsObject(ca)) return fail(msg, cap, label, "canary: expected an object");
    static const char *const cnames[] = {"prompts", "n_predict", NULL};
    if (only_members(ca, cnames, "canary.", label, msg, cap)) return -1;
    if (get_prompts(ca, "prompts", "canary.", c->canary, &c->n_canary, label, msg, cap)) return -1;
    if (get_int(ca, "n_predict", "canary.", 1, 256, false, 8, &x, label, msg, cap)) return -1;
    c->canary_n_predict = (int)x;
    if (get_int(root, "ctx", "", 64, 8192, false, 256, &x, label, msg, cap)) return -1;
    c->ctx = (int)x;
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kill_switch");
    if (ks && get_text(ks, "kill_switch", c->kill_switch, sizeof c->kill_switch, label, msg, cap)) return -1;
    return 0;
}

int el_fleet_config_parse(const char *text, size_t len, const char *label, el_fleet_config *c, char *msg,
                          size_t cap) {
    memset(c, 0, sizeof *c);
    cJSON *root = parse_whole(text, len);
    if (!root) return fail(msg, cap, label, "not valid JSON");
    int rc = parse_config(root, label, c, msg, cap);
    cJSON_Delete(root);
    if (rc) memset(c, 0, sizeof *c);
    return rc;
}

static int parse_gates(const cJSON *root, const char *label, el_fleet_gates *g, char *msg, size_t cap) {
    if (!cJSON_IsObject(root)) return fail(msg, cap, label, "expected a JSON object");
    static const char *const names[] = {"format", "min_crash_free_rate", "max_p95_ttft_ms", "max_refusal_rate",
                                        "min_canary_agreement", "max_install_failures", NULL};
    if (only_members(root, names, "", label, msg, cap)) return -1;
    if (check_format(root, "edgellm-gates/1", label, msg, cap)) return -1;
    if (get_num(root, "min_crash_free_rate", 0, 1, &g->min_crash_free_rate, label, msg, cap)) return -1;
    if (get_num(root, "max_p95_ttft_ms", 1e-3, 3.6e6, &g->max_p95_ttft_ms, label, msg, cap)) return -1;
    if (get_num(root, "max_refusal_rate", 0, 1, &g->max_refusal_rate, label, msg, cap)) return -1;
    if (get_num(root, "min_canary_agreement", 0, 1, &g->min_canary_agreement, label, msg, cap)) return -1;
    long x;
    if (get_int(root, "max_install_failures", "", 0, EL_FLEET_MAX_DEVICES, true, 0, &x, label, msg, cap)) return -1;
    g->max_install_failures = (int)x;
    return 0;
}

int el_fleet_gates_parse(const char *text, size_t len, const char *label, el_fleet_gates *g, char *msg, size_t cap) {
    memset(g, 0, sizeof *g);
    cJSON *root = parse_whole(text, len);
    if (!root) return fail(msg, cap, label, "not valid JSON");
    int rc = parse_gates(root, label, g, msg, cap);
    cJSON_Delete(root);
    return rc;
}

int el_fleet_config_load(const char *path, el_fleet_config *c, char *msg, size_t cap) {
    size_t n;
    char *t = el_text_read_file(path, 1u << 20, &n, msg, cap);
    if (!t) return -1;
    int rc = el_fleet_config_parse(t, n, path, c, msg, cap);
    free(t);
    return rc;
}

int el_fleet_gates_load(const char *path, el_fleet_gates *g, char *msg, size_t cap) {
    size_t n;
    char *t = el_text_read_file(path, 1u << 20, &n, msg, cap);
    if (!t) return -1;
    int rc = el_fleet_gates_parse(t, n, path, g, msg, cap);
    free(t);
    return rc;
}

int el_fleet_stage_target(const int *stages, int k, int n_devices) {
    int prev = 0;
    for (int i = 0; i <= k; i++) {
        int n = (n_devices * stages[i] + 99) / 100;
        if (n < 1) n = 1;
        if (n < prev) n = prev;
        if (n > n_devices) n = n_devices;
        prev = n;
    }
    return prev;
}

const char *el_fleet_gate_name(int g) {
    static const char *const N[EL_GATE__N] = {"crash_free_rate", "p95_ttft_ms", "refusal_rate", "canary_agreement",
                                              "install_failures"};
    return g >= 0 && g < EL_GATE__N ? N[g] : "?";
}

bool el_fleet_gates_eval(const el_fleet_gates *g, const el_fleet_obs *o, bool pass[EL_GATE__N]) {
    pass[EL_GATE_CRASH_FREE] = o->crash_free_rate >= g->min_crash_free_rate;
    pass[EL_GATE_P95_TTFT] = o->p95_ttft_ms <= g->max_p95_ttft_ms;
    pass[EL_GATE_REFUSAL] = o->refusal_rate <= g->max_refusal_rate;
    pass[EL_GATE_CANARY] = o->canary_agreement >= g->min_canary_agreement;
    pass[EL_GATE_INSTALL] = o->install_failures <= g->max_install_failures;
    bool all = true;
    for (int i = 0; i < EL_GATE__N; i++) all = all && pass[i];
    return all;
}

const el_fleet_class *el_fleet_device_class(const el_fleet_config *c, int i) {
    for (int k = 0; k < c->n_classes; k++) {
        if (i < c->classes[k].count) return &c->classes[k];
        i -= c->classes[k].count;
    }
    return NULL;
}

char *el_fleet_gates_json(const el_fleet_gates *g) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "format", "edgellm-gates/1");
    cJSON_AddNumberToObject(o, "min_crash_free_rate", g->min_crash_free_rate);
    cJSON_AddNumberToObject(o, "max_p95_ttft_ms", g->max_p95_ttft_ms);
    cJSON_AddNumberToObject(o, "max_refusal_rate", g->max_refusal_rate);
    cJSON_AddNumberToObject(o, "min_canary_agreement", g->min_canary_agreement);
    cJSON_AddNumberToObject(o, "max_install_failures", g->max_install_failures);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}
