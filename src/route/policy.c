/*
 * policy.c — the strict routing-policy parser (contract in policy.h).
 *
 * The document is parsed with cJSON (syntax errors give the line and column
 * of the byte where parsing stopped), then walked by a schema of known keys:
 * every object is checked for keys outside its schema and for duplicate keys
 * (cJSON keeps both copies of a duplicate; a policy must not have two
 * meanings), every value for its type and range. The result is built in a
 * local and copied to *out only when everything passed.
 */
#include "route/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "util/error.h"
#include "util/textfile.h"

void el_policy_builtin(el_policy *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->version, sizeof p->version, "builtin-1");
    p->n_classes = 3;
    snprintf(p->classes[0].name, sizeof p->classes[0].name, "local_only");
    p->classes[0].cloud = EL_CLOUD_NEVER;
    snprintf(p->classes[1].name, sizeof p->classes[1].name, "cloud_with_consent");
    p->classes[1].cloud = EL_CLOUD_WITH_CONSENT;
    snprintf(p->classes[1].legal_basis, sizeof p->classes[1].legal_basis, "consent");
    snprintf(p->classes[2].name, sizeof p->classes[2].name, "cloud_allowed");
    p->classes[2].cloud = EL_CLOUD_ALLOWED;
    snprintf(p->classes[2].legal_basis, sizeof p->classes[2].legal_basis, "contract");
    p->prefer_cloud = false;
    p->derate_c = 80;
    p->hot_c = 95;
    p->hysteresis_c = 5;
    p->max_tokens_derated = 64;
    p->slots_derated = 1;
    p->sample_ms = 2000;
    p->battery_min_percent = 0;
    p->cloud_down_s = 30;
    p->cloud_timeout_s = 120;
}

const char *el_cloud_rule_name(el_cloud_rule r) {
    switch (r) {
    case EL_CLOUD_NEVER: return "never";
    case EL_CLOUD_WITH_CONSENT: return "with_consent";
    case EL_CLOUD_ALLOWED: return "allowed";
    }
    return "never";
}

const el_policy_class *el_policy_find(const el_policy *p, const char *name) {
    if (!p || !name) return NULL;
    for (int i = 0; i < p->n_classes; i++)
        if (!strcmp(p->classes[i].name, name)) return &p->classes[i];
    return NULL;
}

const el_policy_class *el_policy_strictest(const el_policy *p) {
    if (!p || p->n_classes <= 0) return NULL;
    const el_policy_class *best = &p->classes[0];
    for (int i = 1; i < p->n_classes; i++)
        if (p->classes[i].cloud < best->cloud) best = &p->classes[i];
    return best;
}

/* ---- schema helpers ------------------------------------------------------ */

/* Every key of obj must be one of keys[] and appear once. */
static int check_keys(const cJSON *obj, const char *path, const char *const *keys, char *err, size_t cap) {
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (el_text_key_check(path, c->string, keys, err, cap)) return -1;
        for (const cJSON *d = c->next; d; d = d->next)
            if (!strcmp(c->string, d->string))
                return el_errf(err, cap, "%s: duplicate key \"%.64s\"", path, c->string);
    }
    return 0;
}

static bool printable_ascii(const char *s, size_t min, size_t max) {
    size_t n = strlen(s);
    if (n < min || n > max) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return false;
    return true;
}

bool el_policy_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n >= EL_POLICY_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.')) return false;
    }
    return true;
}

/* A string of 1..EL_POLICY_TEXT_MAX-1 printable ASCII bytes (an escaped NUL
 * is refused before parsing: el_policy_parse). */
static int get_text(const cJSON *v, const char *path, char *dst, size_t dcap, char *err, size_t cap) {
    if (!cJSON_IsString(v) || !v->valuestring)
        return el_errf(err, cap, "%s: expected a string", path);
    if (!printable_ascii(v->valuestring, 1, dcap - 1))
        return el_errf(err, cap, "%s: expected 1..%zu printable ASCII characters", path, dcap - 1);
    snprintf(dst, dcap, "%s", v->valuestring);
    return 0;
}

static int get_num(const cJSON *v, const char *path, double lo, double hi, bool integer, double *out, char *err,
                   size_t cap) {
    if (!cJSON_IsNumber(v)) return el_errf(err, cap, "%s: expected a number", path);
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi)
        return el_errf(err, cap, "%s: %g is out of range (%g..%g)", path, d, lo, hi);
    if (integer && d != floor(d)) return el_errf(err, cap, "%s: expected an integer, got %g", path, d);
    *out = d;
    return 0;
}

static int get_obj(const cJSON *v, const char *path, char *err, size_t cap) {
    if (!cJSON_IsObject(v)) return el_errf(err, cap, "%s: expected an object", path);
    return 0;
}

/* ---- the document -------------------------------------------------------- */

static int parse_doc(const cJSON *root, el_policy *p, char *err, size_t cap) {
    static const char *const top_keys[] = {"format", "version", "classes", "prefer", "thermal", "battery", "cloud",
                                           "canary", NULL};
    if (get_obj(root, "policy", err, cap) || check_keys(root, "policy", top_keys, err, cap)) return -1;

    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!fmt) return el_errf(err, cap, "policy: missing \"format\" (\"%s\")", EL_POLICY_FORMAT);
    if (!cJSON_IsString(fmt) || !fmt->valuestring) return el_errf(err, cap, "format: expected a string");
    if (strcmp(fmt->valuestring, EL_POLICY_FORMAT))
        return el_errf(err, cap, "format: unsupported policy format \"%.64s\" (this edgellm reads \"%s\")",
                    fmt->valuestring, EL_POLICY_FORMAT);

    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!ver) return el_errf(err, cap, "policy: missing \"version\" (a string recorded with every decision)");
    if (get_text(ver, "version", p->version, sizeof p->version, err, cap)) return -1;

    const cJSON *classes = cJSON_GetObjectItemCaseSensitive(root, "classes");
    if (!classes) return el_errf(err, cap, "policy: missing \"classes\"");
    if (get_obj(classes, "classes", err, cap)) return -1;
    p->n_classes = 0;
    for (const cJSON *c = classes->child; c; c = c->next) {
        char path[160];
        snprintf(path, sizeof path, "classes.%.64s", c->string);
        if (!el_policy_name_ok(c->string))
            return el_errf(err, cap, "%s: a class name is 1..%d characters of a-z 0-9 _ - .", path, EL_POLICY_NAME_MAX - 1);
        for (const cJSON *d = c->next; d; d = d->next)
            if (!strcmp(c->string, d->string)) return el_errf(err, cap, "classes: duplicate class \"%s\"", c->string);
        if (p->n_classes >= EL_POLICY_MAX_CLASSES)
            return el_errf(err, cap, "classes: more than %d classes", EL_POLICY_MAX_CLASSES);
        static const char *const class_keys[] = {"cloud", "legal_basis", NULL};
        if (get_obj(c, path, err, cap) || check_keys(c, path, class_keys, err, cap)) return -1;
        el_policy_class *k = &p->classes[p->n_classes];
        memset(k, 0, sizeof *k);
        snprintf(k->name, sizeof k->name, "%s", c->string);
        const cJSON *rule = cJSON_GetObjectItemCaseSensitive(c, "cloud");
        char sub[200];
        snprintf(sub, sizeof sub, "%s.cloud", path);
        if (!rule) return el_errf(err, cap, "%s: missing (\"never\", \"with_consent\" or \"allowed\")", sub);
        if (!cJSON_IsString(rule) || !rule->valuestring) return el_errf(err, cap, "%s: expected a string", sub);
        if (!strcmp(rule->valuestring, "never")) k->cloud = EL_CLOUD_NEVER;
        else if (!strcmp(rule->valuestring, "with_consent")) k->cloud = EL_CLOUD_WITH_CONSENT;
        else if (!strcmp(rule->valuestring, "allowed")) k->cloud = EL_CLOUD_ALLOWED;
        else
            return el_errf(err, cap, "%s: unknown rule \"%.64s\" (\"never\", \"with_consent\" or \"allowed\")", sub,
                        rule->valuestring);
        const cJSON *basis = cJSON_GetObjectItemCaseSensitive(c, "legal_basis");
        snprintf(sub, sizeof sub, "%s.legal_basis", path);
        if (k->cloud != EL_CLOUD_NEVER && !basis)
            return el_errf(err, cap, "%s: missing: a class that may go to the cloud must state its legal basis", sub);
        if (basis && get_text(basis, sub, k->legal_basis, sizeof k->legal_basis, err, cap)) return -1;
        p->n_classes++;
    }
    if (p->n_classes == 0) return el_errf(err, cap, "classes: at least one class is needed");

    const cJSON *prefer = cJSON_GetObjectItemCaseSensitive(root, "prefer");
    if (prefer) {
        if (!cJSON_IsString(prefer) || !prefer->valuestring) return el_errf(err, cap, "prefer: expected a string");
        if (!strcmp(prefer->valuestring, "local")) p->prefer_cloud = false;
        else if (!strcmp(prefer->valuestring, "cloud")) p->prefer_cloud = true;
        else return el_errf(err, cap, "prefer: expected \"local\" or \"cloud\", got \"%.64s\"", prefer->valuestring);
    }

    double d;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "thermal");
    if (th) {
        static const char *const th_keys[] = {"derate_c", "hot_c", "hysteresis_c", "max_tokens_derated",
                                              "slots_derated", "sample_ms", NULL};
        if (get_obj(th, "thermal", err, cap) || check_keys(th, "thermal", th_keys, err, cap)) return -1;
        const cJSON *v;
        if ((v = cJSON_GetObjectItemCaseSensitive(th, "derate_c"))) {
            if (get_num(v, "thermal.derate_c", -50, 200, false, &d, err, cap)) return -1;
            p->derate_c = d;
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(th, "hot_c"))) {
            if (get_num(v, "thermal.hot_c", -50, 200, false, &d, err, cap)) return -1;
            p->hot_c = d;
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(th, "hysteresis_c"))) {
            if (get_num(v, "thermal.hysteresis_c", 0, 50, false, &d, err, cap)) return -1;
            p->hysteresis_c = d;
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(th, "max_tokens_derated"))) {
            if (get_num(v, "thermal.max_tokens_derated", 1, 1 << 20, true, &d, err, cap)) return -1;
            p->max_tokens_derated = (int)d;
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(th, "slots_derated"))) {
            if (get_num(v, "thermal.slots_derated", 1, 256, true, &d, err, cap)) return -1;
            p->slots_derated = (int)d;
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(th, "sample_ms"))) {
            if (get_num(v, "thermal.sample_ms", 50, 60000, true, &d, err, cap)) return -1;
            p->sample_ms = (int)d;
        }
    }
    if (!(p->derate_c < p->hot_c))
        return el_errf(err, cap, "thermal: derate_c (%g) must be below hot_c (%g)", p->derate_c, p->hot_c);

    const cJSON *bat = cJSON_GetObjectItemCaseSensitive(root, "battery");
    if (bat) {
        static const char *const bat_keys[] = {"min_percent", NULL};
        if (get_obj(bat, "battery", err, cap) || check_keys(bat, "battery", bat_keys, err, cap)) return -1;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(bat, "min_percent");
        if (v) {
            if (get_num(v, "battery.min_percent", 0, 100, true, &d, err, cap)) return -1;
            p->battery_min_percent = (int)d;
        }
    }

    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(root, "cloud");
    if (cl) {
        static const char *const cl_keys[] = {"down_for_s", "timeout_s", NULL};
        if (get_obj(cl, "cloud", err, cap) || check_keys(cl, "cloud", cl_keys, err, cap)) return -1;
        const cJSON *v;
        if ((v = cJSON_GetObjectItemCaseSensitive(cl, "down_for_s"))) {
            if (get_num(v, "cloud.down_for_s", 0, 3600, true, &d, err, cap)) return -1;
            p->cloud_down_s = (int)d;
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(cl, "timeout_s"))) {
            if (get_num(v, "cloud.timeout_s", 1, 3600, true, &d, err, cap)) return -1;
            p->cloud_timeout_s = (int)d;
        }
    }
    const cJSON *can = cJSON_GetObjectItemCaseSensitive(root, "canary");
    if (can) {
        static const char *const can_keys[] = {"ratio", NULL};
        if (get_obj(can, "canary", err, cap) || check_keys(can, "canary", can_keys, err, cap)) return -1;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(can, "ratio");
        if (v) {
            if (get_num(v, "canary.ratio", 0, 1, false, &d, err, cap)) return -1;
            p->canary_ratio = d;
        }
    }
    return 0;
}

int el_policy_parse(const char *text, size_t len, el_policy *out, char *err, size_t cap) {
    if (err && cap) err[0] = 0;
    if (!text || !out) return el_errf(err, cap, "no policy text");
    if (len > EL_POLICY_MAX_BYTES) return el_errf(err, cap, "policy is %zu bytes (at most %u)", len, EL_POLICY_MAX_BYTES);
    if (el_json_text_check(text, len, err, cap)) return -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (el_json_text_parsed(text, len, root != NULL, end, err, cap)) {
        cJSON_Delete(root);
        return -1;
    }
    el_policy *p = malloc(sizeof *p);
    if (!p) {
        cJSON_Delete(root);
        return el_errf(err, cap, "out of memory");
    }
    el_policy_builtin(p); /* defaults for the optional sections */
    p->n_classes = 0;
    memset(p->classes, 0, sizeof p->classes);
    int rc = parse_doc(root, p, err, cap);
    cJSON_Delete(root);
    if (rc == 0) *out = *p;
    free(p);
    return rc;
}

int el_policy_load(const char *path, el_policy *out, char *err, size_t cap) {
    size_t n;
    char *buf = el_text_read_file(path, EL_POLICY_MAX_BYTES, &n, err, cap);
    if (!buf) return -1;
    char e2[400];
    int rc = el_policy_parse(buf, n, out, e2, sizeof e2);
    free(buf);
    if (rc) return el_errf(err, cap, "%s: %s", path, e2);
    return 0;
}
