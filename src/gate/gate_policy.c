/*
 * gate_policy.c — the host side of the proposal gate (contract in gate.h):
 * the action policy file (actions.json) and the JSON Schema of what the
 * model may fill in.
 *
 * The policy is read with cJSON at start-up and walked by a schema of known
 * keys: an unknown or duplicate key, a wrong type, a value out of range, a
 * name outside its character set or a key that is not 32 bytes is refused
 * with the JSON path (a syntax error with its line and column). The result
 * is built in a local and copied out only when everything passed, so a
 * malformed policy never half-configures a gate. Key files are read here
 * (64 hex digits, one optional newline); keys never appear in messages.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "gate/gate.h"
#include "util/error.h"
#include "util/file.h"
#include "util/textfile.h"

static int check_keys(const cJSON *obj, const char *path, const char *const *keys, char *err, size_t cap) {
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (el_text_key_check(path, c->string, keys, err, cap)) return -1;
        for (const cJSON *d = c->next; d; d = d->next)
            if (!strcmp(c->string, d->string)) return el_errf(err, cap, "%s: duplicate key \"%.64s\"", path, c->string);
    }
    return 0;
}

/* A member's names must be distinct (objects used as maps). */
static int check_distinct(const cJSON *obj, const char *path, char *err, size_t cap) {
    for (const cJSON *c = obj->child; c; c = c->next)
        for (const cJSON *d = c->next; d; d = d->next)
            if (!strcmp(c->string, d->string)) return el_errf(err, cap, "%s: duplicate key \"%.64s\"", path, c->string);
    return 0;
}

static bool value_text_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n >= EL_GATE_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e || s[i] == '"' || s[i] == '\\') return false;
    return true;
}

static int get_num(const cJSON *v, const char *path, bool integer, double *out, char *err, size_t cap) {
    if (!cJSON_IsNumber(v)) return el_errf(err, cap, "%s: expected a number", path);
    const double d = v->valuedouble;
    if (!isfinite(d) || fabs(d) > EL_GATE_INT_MAX) return el_errf(err, cap, "%s: out of range (|x| <= 2^53)", path);
    if (integer && d != floor(d)) return el_errf(err, cap, "%s: expected an integer, got %g", path, d);
    *out = d;
    return 0;
}

/* {"type": ..., "min", "max", "values"} */
static int parse_typedef(const cJSON *o, const char *path, const char *name, el_gate_typedef *t, char *err,
                         size_t cap) {
    static const char *const KEYS[] = {"type", "min", "max", "values", "description", NULL};
    char sub[200];
    if (!cJSON_IsObject(o)) return el_errf(err, cap, "%s: expected an object", path);
    if (check_keys(o, path, KEYS, err, cap)) return -1;
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
    snprintf(sub, sizeof sub, "%s.type", path);
    if (!cJSON_IsString(ty)) return el_errf(err, cap, "%s: expected \"integer\", \"number\", \"boolean\" or \"enum\"", sub);
    if (!strcmp(ty->valuestring, "integer")) t->type = EL_GT_INTEGER;
    else if (!strcmp(ty->valuestring, "number")) t->type = EL_GT_NUMBER;
    else if (!strcmp(ty->valuestring, "boolean")) t->type = EL_GT_BOOLEAN;
    else if (!strcmp(ty->valuestring, "enum")) t->type = EL_GT_ENUM;
    else return el_errf(err, cap, "%s: expected \"integer\", \"number\", \"boolean\" or \"enum\"", sub);
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(o, "min"), *mx = cJSON_GetObjectItemCaseSensitive(o, "max");
    const cJSON *vals = cJSON_GetObjectItemCaseSensitive(o, "values");
    if (t->type == EL_GT_INTEGER || t->type == EL_GT_NUMBER) {
        if (!mn || !mx) return el_errf(err, cap, "%s: a %s needs \"min\" and \"max\"", path, ty->valuestring);
        if (vals) return el_errf(err, cap, "%s.values: only for an enum", path);
        snprintf(sub, sizeof sub, "%s.min", path);
        if (get_num(mn, sub, t->type == EL_GT_INTEGER, &t->min, err, cap)) return -1;
        snprintf(sub, sizeof sub, "%s.max", path);
        if (get_num(mx, sub, t->type == EL_GT_INTEGER, &t->max, err, cap)) return -1;
        if (t->min > t->max) return el_errf(err, cap, "%s: min %g is above max %g", path, t->min, t->max);
    } else {
        if (mn || mx) return el_errf(err, cap, "%s: \"min\"/\"max\" only for integer and number", path);
        if (t->type == EL_GT_ENUM) {
            snprintf(sub, sizeof sub, "%s.values", path);
            const int n = cJSON_IsArray(vals) ? cJSON_GetArraySize(vals) : -1;
            if (n < 1 || n > EL_GATE_MAX_ENUM) return el_errf(err, cap, "%s: expected an array of 1..%d strings", sub, EL_GATE_MAX_ENUM);
            int i = 0;
            for (const cJSON *v = vals->child; v; v = v->next, i++) {
                if (!cJSON_IsString(v) || !value_text_ok(v->valuestring))
                    return el_errf(err, cap, "%s[%d]: expected 1..%d printable ASCII characters without '\"' or '\\'", sub,
                                i, EL_GATE_NAME_MAX - 1);
                for (int j = 0; j < i; j++)
                    if (!strcmp(t->values[j], v->valuestring)) return el_errf(err, cap, "%s[%d]: \"%s\" twice", sub, i, v->valuestring);
                snprintf(t->values[i], sizeof t->values[i], "%s", v->valuestring);
            }
            t->n_values = n;
        } else if (vals) {
            return el_errf(err, cap, "%s.values: only for an enum", path);
        }
    }
    return 0;
}

static int parse_key_hex(const char *s, uint8_t key[EL_GATE_KEY_BYTES]) {
    size_t n = strlen(s);
    if (n && s[n - 1] == '\n') n--;
    if (n != 2 * EL_GATE_KEY_BYTES) return -1;
    size_t bin_len = 0;
    if (sodium_hex2bin(key, EL_GATE_KEY_BYTES, s, n, NULL, &bin_len, NULL) != 0 || bin_len != EL_GATE_KEY_BYTES)
        return -1;
    return 0;
}

static int parse_devices(const cJSON *arr, const char *base_dir, el_gate_policy *p, char *err, size_t cap) {
    static const char *const KEYS[] = {"id", "key_hex", "key_file", NULL};
    const int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
    if (n < 1 || n > EL_GATE_MAX_DEVICES) return el_errf(err, cap, "devices: expected an array of 1..%d devices", EL_GATE_MAX_DEVICES);
    int i = 0;
    for (const cJSON *d = arr->child; d; d = d->next, i++) {
        char path[64];
        snprintf(path, sizeof path, "devices[%d]", i);
        if (!cJSON_IsObject(d)) return el_errf(err, cap, "%s: expected an object", path);
        if (check_keys(d, path, KEYS, err, cap)) return -1;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(d, "id");
        if (!cJSON_IsString(id) || !el_gate_id_ok(id->valuestring))
            return el_errf(err, cap, "%s.id: expected 1..63 characters of [A-Za-z0-9._:-]", path);
        if (el_gate_policy_device(p, id->valuestring) >= 0) return el_errf(err, cap, "%s.id: \"%s\" twice", path, id->valuestring);
        el_gate_device *dv = &p->devices[i];
        snprintf(dv->id, sizeof dv->id, "%s", id->valuestring);
        const cJSON *kh = cJSON_GetObjectItemCaseSensitive(d, "key_hex"), *kf = cJSON_GetObjectItemCaseSensitive(d, "key_file");
        if (!!kh == !!kf) return el_errf(err, cap, "%s: give exactly one of \"key_hex\" and \"key_file\"", path);
        if (kh) {
            if (!cJSON_IsString(kh) || parse_key_hex(kh->valuestring, dv->key))
                return el_errf(err, cap, "%s.key_hex: expected 64 hex digits (a 32-byte key)", path);
        } else {
            if (!cJSON_IsString(kf) || !kf->valuestring[0]) return el_errf(err, cap, "%s.key_file: expected a path", path);
            if (!base_dir && kf->valuestring[0] != '/')
                return el_errf(err, cap, "%s.key_file: a relative path needs the policy's directory", path);
            char fpath[4096], buf[160];
            if (kf->valuestring[0] == '/') snprintf(fpath, sizeof fpath, "%s", kf->valuestring);
            else snprintf(fpath, sizeof fpath, "%s/%s", base_dir, kf->valuestring);
            const int got = el_read_small(fpath, buf, sizeof buf);
            if (got < 0) return el_errf(err, cap, "%s.key_file: cannot read '%s': %s", path, fpath, strerror(errno));
            const int bad = parse_key_hex(buf, dv->key);
            sodium_memzero(buf, sizeof buf);
            if (bad) return el_errf(err, cap, "%s.key_file: '%s' must hold 64 hex digits (a 32-byte key)", path, fpath);
        }
        p->n_devices = i + 1;
    }
    return 0;
}

static const char *const OPNAMES[] = {"==", "!=", "<", "<=", ">", ">="};

static int parse_action(const cJSON *o, const char *name, el_gate_policy *p, el_gate_action *a, char *err, size_t cap) {
    static const char *const KEYS[] = {"description", "safe", "states", "params", "preconditions", NULL};
    char path[96], sub[200];
    snprintf(path, sizeof path, "actions.%s", name);
    if (!el_gate_name_ok(name)) return el_errf(err, cap, "%s: an action name is 1..31 characters of [a-z0-9_]", path);
    if (!cJSON_IsObject(o)) return el_errf(err, cap, "%s: expected an object", path);
    if (check_keys(o, path, KEYS, err, cap)) return -1;
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(o, "description");
    if (desc) {
        if (!cJSON_IsString(desc) || strlen(desc->valuestring) >= EL_GATE_DESC_MAX)
            return el_errf(err, cap, "%s.description: expected a string of at most %d bytes", path, EL_GATE_DESC_MAX - 1);
        for (const char *c = desc->valuestring; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) return el_errf(err, cap, "%s.description: printable ASCII only", path);
        snprintf(a->description, sizeof a->description, "%s", desc->valuestring);
    }
    const cJSON *safe = cJSON_GetObjectItemCaseSensitive(o, "safe");
    if (safe && !cJSON_IsBool(safe)) return el_errf(err, cap, "%s.safe: expected true or false", path);
    a->safe = safe && cJSON_IsTrue(safe);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "states");
    const int ns = cJSON_IsArray(st) ? cJSON_GetArraySize(st) : -1;
    if (ns < 1) return el_errf(err, cap, "%s.states: expected a non-empty array of state names", path);
    int i = 0;
    for (const cJSON *s = st->child; s; s = s->next, i++) {
        const int k = cJSON_IsString(s) ? el_gate_state_parse(s->valuestring) : -1;
        if (k < 0) return el_errf(err, cap, "%s.states[%d]: not a state name", path, i);
        if (k == EL_GS_LINK_DOWN || k == EL_GS_MODEL_FAILED)
            return el_errf(err, cap, "%s.states[%d]: no action is allowed in %s", path, i, el_gate_state_name(k));
        if (!a->safe && k != EL_GS_ONLINE && k != EL_GS_HOST_SLOW)
            return el_errf(err, cap, "%s.states[%d]: %s allows only actions marked \"safe\": true", path, i, el_gate_state_name(k));
        if (a->states & (1u << k)) return el_errf(err, cap, "%s.states[%d]: %s twice", path, i, el_gate_state_name(k));
        a->states |= 1u << k;
    }
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(o, "params");
    if (params) {
        snprintf(sub, sizeof sub, "%s.params", path);
        if (!cJSON_IsObject(params)) return el_errf(err, cap, "%s: expected an object", sub);
        if (check_distinct(params, sub, err, cap)) return -1;
        for (const cJSON *q = params->child; q; q = q->next) {
            if (a->n_params >= EL_GATE_MAX_PARAMS) return el_errf(err, cap, "%s: more than %d parameters", sub, EL_GATE_MAX_PARAMS);
            char qp[256];
            snprintf(qp, sizeof qp, "%s.%.40s", sub, q->string);
            if (!el_gate_name_ok(q->string)) return el_errf(err, cap, "%s: a parameter name is 1..31 characters of [a-z0-9_]", qp);
            if (parse_typedef(q, qp, q->string, &a->params[a->n_params], err, cap)) return -1;
            a->n_params++;
        }
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(o, "preconditions");
    if (pre) {
        static const char *const PKEYS[] = {"var", "op", "value", NULL};
        const int np = cJSON_IsArray(pre) ? cJSON_GetArraySize(pre) : -1;
        if (np < 0 || np > EL_GATE_MAX_PRECOND)
            return el_errf(err, cap, "%s.preconditions: expected an array of 0..%d conditions", path, EL_GATE_MAX_PRECOND);
        i = 0;
        for (const cJSON *c = pre->child; c; c = c->next, i++) {
            snprintf(sub, sizeof sub, "%s.preconditions[%d]", path, i);
            if (!cJSON_IsObject(c)) return el_errf(err, cap, "%s: expected an object", sub);
            if (check_keys(c, sub, PKEYS, err, cap)) return -1;
            el_gate_precond *pc = &a->pre[i];
            const cJSON *var = cJSON_GetObjectItemCaseSensitive(c, "var"), *op = cJSON_GetObjectItemCaseSensitive(c, "op");
            const cJSON *val = cJSON_GetObjectItemCaseSensitive(c, "value");
            pc->var = cJSON_IsString(var) ? el_gate_policy_var(p, var->valuestring) : -1;
            if (pc->var < 0) return el_errf(err, cap, "%s.var: not a variable of \"variables\"", sub);
            int opi = -1;
            for (int k = 0; k < 6 && cJSON_IsString(op); k++)
                if (!strcmp(op->valuestring, OPNAMES[k])) opi = k;
            if (opi < 0) return el_errf(err, cap, "%s.op: expected ==, !=, <, <=, > or >=", sub);
            pc->op = (el_gate_op)opi;
            const el_gate_typedef *t = &p->vars[pc->var];
            if ((t->type == EL_GT_BOOLEAN || t->type == EL_GT_ENUM) && opi > EL_GOP_NE)
                return el_errf(err, cap, "%s.op: a %s variable compares with == or != only", sub, el_gate_type_name(t->type));
            pc->value.type = t->type;
            if (!val) return el_errf(err, cap, "%s.value: missing", sub);
            switch (t->type) {
            case EL_GT_BOOLEAN:
                if (!cJSON_IsBool(val)) return el_errf(err, cap, "%s.value: expected true or false", sub);
                pc->value.b = cJSON_IsTrue(val);
                break;
            case EL_GT_ENUM: {
                pc->value.e = -1;
                for (int k = 0; cJSON_IsString(val) && k < t->n_values; k++)
                    if (!strcmp(t->values[k], val->valuestring)) pc->value.e = k;
                if (pc->value.e < 0) return el_errf(err, cap, "%s.value: not one of %s's values", sub, t->name);
                break;
            }
            case EL_GT_INTEGER:
            case EL_GT_NUMBER: {
                double d = 0;
                if (get_num(val, sub, t->type == EL_GT_INTEGER, &d, err, cap)) return -1;
                pc->value.n = d;
                pc->value.i = (int64_t)d;
                break;
            }
            }
            a->n_pre = i + 1;
        }
    }
    return 0;
}

static int get_uint(const cJSON *root, const char *key, double lo, double hi, double *out, char *err, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return 0;
    if (get_num(v, key, true, out, err, cap)) return -1;
    if (*out < lo || *out > hi) return el_errf(err, cap, "%s: %g is out of range (%g..%g)", key, *out, lo, hi);
    return 0;
}

static int parse_doc(const cJSON *root, const char *base_dir, el_gate_policy *p, char *err, size_t cap) {
    static const char *const KEYS[] = {"format", "version", "window", "max_deadline_ms", "slow_ms",
                                       "devices", "variables", "actions", NULL};
    if (!cJSON_IsObject(root)) return el_errf(err, cap, "the policy must be a JSON object");
    if (check_keys(root, "(top level)", KEYS, err, cap)) return -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, EL_GATE_POLICY_FORMAT))
        return el_errf(err, cap, "format: expected \"%s\"", EL_GATE_POLICY_FORMAT);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsString(ver) || !ver->valuestring[0] || strlen(ver->valuestring) >= EL_GATE_DESC_MAX)
        return el_errf(err, cap, "version: expected a string of 1..%d bytes", EL_GATE_DESC_MAX - 1);
    for (const char *c = ver->valuestring; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) return el_errf(err, cap, "version: printable ASCII only");
    snprintf(p->version, sizeof p->version, "%s", ver->valuestring);
    double w = 64, dl = 30000, slow = 2000;
    if (get_uint(root, "window", 1, EL_GATE_WINDOW_MAX, &w, err, cap) ||
        get_uint(root, "max_deadline_ms", 1, 86400000, &dl, err, cap) ||
        get_uint(root, "slow_ms", 1, 86400000, &slow, err, cap))
        return -1;
    p->window = (int)w;
    p->max_deadline_ms = (uint64_t)dl;
    p->slow_ms = (uint64_t)slow;
    if (parse_devices(cJSON_GetObjectItemCaseSensitive(root, "devices"), base_dir, p, err, cap)) return -1;
    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(root, "variables");
    if (vars) {
        if (!cJSON_IsObject(vars)) return el_errf(err, cap, "variables: expected an object");
        if (check_distinct(vars, "variables", err, cap)) return -1;
        for (const cJSON *v = vars->child; v; v = v->next) {
            char vp[96];
            snprintf(vp, sizeof vp, "variables.%.40s", v->string);
            if (p->n_vars >= EL_GATE_MAX_VARS) return el_errf(err, cap, "variables: more than %d", EL_GATE_MAX_VARS);
            if (!el_gate_name_ok(v->string)) return el_errf(err, cap, "%s: a variable name is 1..31 characters of [a-z0-9_]", vp);
            if (parse_typedef(v, vp, v->string, &p->vars[p->n_vars], err, cap)) return -1;
            p->n_vars++;
        }
    }
    const cJSON *acts = cJSON_GetObjectItemCaseSensitive(root, "actions");
    if (!cJSON_IsObject(acts) || !acts->child) return el_errf(err, cap, "actions: expected an object of 1..%d actions", EL_GATE_MAX_ACTIONS);
    if (check_distinct(acts, "actions", err, cap)) return -1;
    for (const cJSON *a = acts->child; a; a = a->next) {
        if (p->n_actions >= EL_GATE_MAX_ACTIONS) return el_errf(err, cap, "actions: more than %d", EL_GATE_MAX_ACTIONS);
        if (parse_action(a, a->string, p, &p->actions[p->n_actions], err, cap)) return -1;
        p->n_actions++;
    }
    return 0;
}

int el_gate_policy_parse(const char *text, size_t len, const char *base_dir, el_gate_policy *out, char *err,
                         size_t cap) {
    if (err && cap) err[0] = 0;
    if (!text || !out) return el_errf(err, cap, "no policy text");
    if (len > EL_GATE_POLICY_MAX_BYTES) return el_errf(err, cap, "the policy is %zu bytes (at most %u)", len, EL_GATE_POLICY_MAX_BYTES);
    if (el_json_text_check(text, len, err, cap)) return -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (el_json_text_parsed(text, len, root != NULL, end, err, cap)) {
        cJSON_Delete(root);
        return -1;
    }
    el_gate_policy *p = calloc(1, sizeof *p);
    if (!p) {
        cJSON_Delete(root);
        return el_errf(err, cap, "out of memory");
    }
    const int rc = parse_doc(root, base_dir, p, err, cap);
    cJSON_Delete(root);
    if (rc == 0) *out = *p;
    sodium_memzero(p, sizeof *p);
    free(p);
    return rc;
}

int el_gate_policy_load(const char *path, el_gate_policy *out, char *err, size_t cap) {
    size_t n;
    char *buf = el_text_read_file(path, EL_GATE_POLICY_MAX_BYTES, &n, err, cap);
    if (!buf) return -1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    char e2[400];
    const int rc = el_gate_policy_parse(buf, n, slash == dir ? "/" : dir, out, e2, sizeof e2);
    free(buf);
    if (rc) return el_errf(err, cap, "%s: %s", path, e2);
    return 0;
}

/* ---- the schema the model is held to ----------------------------------------------------- */

static cJSON *type_schema(const el_gate_typedef *t) {
    cJSON *s = cJSON_CreateObject();
    if (!s) return NULL;
    switch (t->type) {
    case EL_GT_INTEGER:
    case EL_GT_NUMBER:
        cJSON_AddStringToObject(s, "type", t->type == EL_GT_INTEGER ? "integer" : "number");
        cJSON_AddNumberToObject(s, "minimum", t->min);
        cJSON_AddNumberToObject(s, "maximum", t->max);
        break;
    case EL_GT_BOOLEAN: cJSON_AddStringToObject(s, "type", "boolean"); break;
    case EL_GT_ENUM: {
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        for (int i = 0; e && i < t->n_values; i++) cJSON_AddItemToArray(e, cJSON_CreateString(t->values[i]));
        break;
    }
    }
    return s;
}

char *el_gate_policy_schema(const el_gate_policy *p) {
    cJSON *root = cJSON_CreateObject();
    cJSON *any = root ? cJSON_AddArrayToObject(root, "anyOf") : NULL;
    for (int i = 0; any && i < p->n_actions; i++) {
        const el_gate_action *a = &p->actions[i];
        cJSON *alt = cJSON_CreateObject();
        cJSON_AddItemToArray(any, alt);
        cJSON_AddStringToObject(alt, "type", "object");
        cJSON *props = cJSON_AddObjectToObject(alt, "properties");
        cJSON *act = cJSON_AddObjectToObject(props, "action");
        cJSON_AddStringToObject(act, "const", a->name);
        cJSON *par = cJSON_AddObjectToObject(props, "params");
        cJSON_AddStringToObject(par, "type", "object");
        cJSON *pp = cJSON_AddObjectToObject(par, "properties");
        cJSON *req = cJSON_AddArrayToObject(par, "required");
        for (int j = 0; j < a->n_params; j++) {
            cJSON_AddItemToObject(pp, a->params[j].name, type_schema(&a->params[j]));
            cJSON_AddItemToArray(req, cJSON_CreateString(a->params[j].name));
        }
        cJSON_AddFalseToObject(par, "additionalProperties");
        cJSON *r2 = cJSON_AddArrayToObject(alt, "required");
        cJSON_AddItemToArray(r2, cJSON_CreateString("action"));
        cJSON_AddItemToArray(r2, cJSON_CreateString("params"));
        cJSON_AddFalseToObject(alt, "additionalProperties");
    }
    char *txt = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return txt;
}

int el_gate_value_parse(const el_gate_policy *p, int var, const char *text, el_gate_value *out, char *err, size_t cap) {
    if (var < 0 || var >= p->n_vars || !text) return el_errf(err, cap, "no such variable");
    const el_gate_typedef *t = &p->vars[var];
    memset(out, 0, sizeof *out);
    out->type = t->type;
    char *end;
    errno = 0;
    switch (t->type) {
    case EL_GT_BOOLEAN:
        if (!strcmp(text, "true")) out->b = true;
        else if (strcmp(text, "false")) return el_errf(err, cap, "%s: expected true or false, got '%s'", t->name, text);
        return 0;
    case EL_GT_ENUM:
        for (int i = 0; i < t->n_values; i++)
            if (!strcmp(t->values[i], text)) {
                out->e = i;
                return 0;
            }
        return el_errf(err, cap, "%s: '%s' is not one of its values", t->name, text);
    case EL_GT_INTEGER: {
        const long long v = strtoll(text, &end, 10);
        if (errno || end == text || *end) return el_errf(err, cap, "%s: expected an integer, got '%s'", t->name, text);
        if ((double)v < t->min || (double)v > t->max) return el_errf(err, cap, "%s: %lld is outside %g..%g", t->name, v, t->min, t->max);
        out->i = v;
        out->n = (double)v;
        return 0;
    }
    case EL_GT_NUMBER: {
        const double v = strtod(text, &end);
        if (errno || end == text || *end || !isfinite(v)) return el_errf(err, cap, "%s: expected a number, got '%s'", t->name, text);
        if (v < t->min || v > t->max) return el_errf(err, cap, "%s: %g is outside %g..%g", t->name, v, t->min, t->max);
        out->n = v;
        return 0;
    }
    }
    return el_errf(err, cap, "bad type");
}
