/*
 * json_schema_object.c — "object" and "array" schemas as GBNF (contract in
 * json_schema_internal.h).
 *
 * Objects put required properties first in property order, then the
 * optional ones in property order, each optional one free to be skipped:
 * rest(i) ::= kv(i) ("," space rest(i+1))? | kv(i+1) … chains (quadratic in
 * the number of optional properties, bounded by the limits). Extra
 * properties (additionalProperties true / a schema) come last with keys that
 * differ from every declared key (a code-point trie of the declared keys
 * turned into "not one of these strings"; a key spelled with \u escapes is
 * treated as different). Arrays: items (a schema, or any value) with
 * minItems / maxItems as a bounded repeat; prefixItems (or an items list) as
 * a tuple of exactly those items.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "structured/json_schema_internal.h"

/* ---- objects -------------------------------------------------------------------------- */

typedef struct ktrie {
    uint32_t cp;
    bool end;
    struct ktrie *kid, *next;
} ktrie;

static void ktrie_free(ktrie *t) {
    while (t) {
        ktrie *n = t->next;
        ktrie_free(t->kid);
        free(t);
        t = n;
    }
}

/* strings not in the trie (the text between the quotes) */
static const char *not_keys(gen *g, ktrie *node, bool is_end, const char *base) {
    sbuf b = {0};
    bool alt = false;
    if (!is_end) sb_puts(&b, "| "); /* the key may end here (an empty first alternative) */
    for (ktrie *k = node; k; k = k->next) {
        const char *sub = not_keys(g, k->kid, k->end, base);
        if (!sub) { free(b.p); return NULL; }
        if (alt) sb_puts(&b, " | ");
        el_js_sb_printf(&b, "[\\U%08X] %s", k->cp, sub);
        alt = true;
    }
    if (alt) sb_puts(&b, " | ");
    sb_puts(&b, "[^\"\\\\\\x7F\\x00-\\x1F");
    for (ktrie *k = node; k; k = k->next) el_js_sb_printf(&b, "\\U%08X", k->cp);
    sb_puts(&b, "] char* | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) char*");
    if (b.oom) { el_js_fail(g, "", "out of memory"); free(b.p); return NULL; }
    const char *r = el_js_add_rule(g, base, b.p);
    free(b.p);
    return r;
}

static bool ktrie_add(ktrie **root, const char *s) {
    ktrie **lvl = root, *node = NULL;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp = *p++;
        if (cp >= 0x80) { /* decode (keys come from cJSON: valid UTF-8 or passed through) */
            int need = (cp & 0xe0) == 0xc0 ? 1 : (cp & 0xf0) == 0xe0 ? 2 : (cp & 0xf8) == 0xf0 ? 3 : 0;
            cp &= need == 1 ? 0x1f : need == 2 ? 0x0f : 0x07;
            for (int k = 0; k < need && (*p & 0xc0) == 0x80; k++) cp = cp << 6 | (*p++ & 0x3fu);
        }
        node = *lvl;
        while (node && node->cp != cp) node = node->next;
        if (!node) {
            node = calloc(1, sizeof *node);
            if (!node) return false;
            node->cp = cp;
            node->next = *lvl;
            *lvl = node;
        }
        lvl = &node->kid;
    }
    if (node) node->end = true;
    return true;
}

const char *el_js_visit_object(gen *g, const cJSON *s, const char *name, const char *path) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    char cp[300];
    if (props && !cJSON_IsObject(props)) { el_js_fail(g, path, "properties: expected an object"); return NULL; }
    if (req && !cJSON_IsArray(req)) { el_js_fail(g, path, "required: expected an array"); return NULL; }
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) { el_js_fail(g, path, "required: expected strings"); return NULL; }
        if (!props || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
            el_js_fail(g, path, "required property '%.60s' is not among the properties", r->valuestring);
            return NULL;
        }
    }
    bool extras = addl && !cJSON_IsFalse(addl);
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl)) { el_js_fail(g, path, "additionalProperties: expected a boolean or a schema"); return NULL; }
    el_js_prim(g, "space");
    int n = props ? cJSON_GetArraySize(props) : 0;
    if (n > 256) { el_js_fail(g, path, "more than 256 properties"); return NULL; }
    const char **kv = calloc((size_t)n + 1, sizeof *kv);
    bool *isreq = calloc((size_t)n + 1, sizeof *isreq);
    const char **rest = calloc((size_t)n + 2, sizeof *rest);
    sbuf b = {0};
    const char *result = NULL;
    if (!kv || !isreq || !rest) { el_js_fail(g, path, "out of memory"); goto out; }
    int i = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, i++) {
        if (!p->string) { el_js_fail(g, path, "properties: a member without a name"); goto out; }
        for (const cJSON *q = props->child; q != p; q = q->next)
            if (!strcmp(q->string, p->string)) { el_js_fail(g, path, "property '%.60s' appears twice", p->string); goto out; }
        child_path(cp, sizeof cp, path, p->string);
        char nm[160];
        snprintf(nm, sizeof nm, "%s-%s", name, p->string);
        const char *v = el_js_visit(g, p, nm, cp);
        if (!v) goto out;
        sbuf kb = {0};
        char *key = cJSON_PrintUnformatted(&(cJSON){.type = cJSON_String, .valuestring = p->string});
        if (!key) { el_js_fail(g, path, "out of memory"); goto out; }
        bool kok = el_js_gbnf_literal(&kb, key, strlen(key));
        free(key);
        if (!kok) { free(kb.p); el_js_fail(g, path, "a property name that is not valid UTF-8"); goto out; }
        el_js_sb_printf(&kb, " space \":\" space %s", v);
        snprintf(nm, sizeof nm, "%s-%s-kv", name, p->string);
        kv[i] = kb.oom ? NULL : el_js_add_rule(g, nm, kb.p);
        free(kb.p);
        if (!kv[i]) { el_js_fail(g, path, "out of memory"); goto out; }
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (!strcmp(r->valuestring, p->string)) isreq[i] = true;
    }
    /* extras */
    const char *extra = NULL;
    if (extras) {
        ktrie *kt = NULL;
        for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
            if (!ktrie_add(&kt, p->string)) { ktrie_free(kt); el_js_fail(g, path, "out of memory"); goto out; }
        char nm[160];
        snprintf(nm, sizeof nm, "%s-additional-key", name);
        el_js_prim(g, "char");
        const char *nk = not_keys(g, kt, false, nm);
        ktrie_free(kt);
        if (!nk) goto out;
        const char *av;
        child_path(cp, sizeof cp, path, "additionalProperties");
        snprintf(nm, sizeof nm, "%s-additional-value", name);
        if (cJSON_IsObject(addl)) av = el_js_visit(g, addl, nm, cp);
        else av = el_js_prim(g, "value");
        if (!av) goto out;
        sbuf eb = {0};
        el_js_sb_printf(&eb, "\"\\\"\" %s \"\\\"\" space \":\" space %s", nk, av);
        snprintf(nm, sizeof nm, "%s-additional-kv", name);
        const char *ekv = eb.oom ? NULL : el_js_add_rule(g, nm, eb.p);
        free(eb.p);
        if (!ekv) goto out;
        eb = (sbuf){0};
        el_js_sb_printf(&eb, "%s (\",\" space %s)*", ekv, ekv);
        snprintf(nm, sizeof nm, "%s-additional", name);
        extra = eb.oom ? NULL : el_js_add_rule(g, nm, eb.p);
        free(eb.p);
        if (!extra) goto out;
    }
    /* optional chain: rest[j] for the j-th optional (in order) */
    int opt[257], nopt = 0;
    for (int k = 0; k < n; k++)
        if (!isreq[k]) opt[nopt++] = k;
    rest[nopt] = extra;
    for (int j = nopt - 1; j >= 0; j--) {
        sbuf rb = {0};
        for (int k = j; k < nopt; k++) {
            if (k > j) sb_puts(&rb, " | ");
            sb_puts(&rb, kv[opt[k]]);
            if (rest[k + 1]) el_js_sb_printf(&rb, " (\",\" space %s)?", rest[k + 1]);
        }
        if (extra) el_js_sb_printf(&rb, " | %s", extra);
        char nm[160];
        snprintf(nm, sizeof nm, "%s-rest-%d", name, j);
        rest[j] = rb.oom ? NULL : el_js_add_rule(g, nm, rb.p);
        free(rb.p);
        if (!rest[j]) goto out;
    }
    sb_puts(&b, "\"{\" space");
    bool anyreq = false;
    for (int k = 0; k < n; k++)
        if (isreq[k]) {
            el_js_sb_printf(&b, anyreq ? " \",\" space %s" : " %s", kv[k]);
            anyreq = true;
        }
    if (rest[0]) el_js_sb_printf(&b, anyreq ? " (\",\" space %s)?" : " (%s)?", rest[0]);
    sb_puts(&b, " \"}\" space");
    if (b.oom) { el_js_fail(g, path, "out of memory"); goto out; }
    result = el_js_add_rule(g, name, b.p);
out:
    free(b.p);
    free(kv);
    free(isreq);
    free(rest);
    return result;
}

/* ---- arrays ---------------------------------------------------------------------------- */

const char *el_js_visit_array(gen *g, const cJSON *s, const char *name, const char *path) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    char cp[300], nm[160];
    long mn = 0, mx = -1;
    if (!el_js_count_kw(g, s, "minItems", path, &mn) || !el_js_count_kw(g, s, "maxItems", path, &mx)) return NULL;
    if (mx >= 0 && mx < mn) { el_js_fail(g, path, "maxItems below minItems"); return NULL; }
    el_js_prim(g, "space");
    sbuf b = {0};
    const char *res = NULL;
    if (prefix || cJSON_IsArray(items)) { /* a tuple: exactly these items */
        const cJSON *arr = prefix ? prefix : items;
        if (!cJSON_IsArray(arr)) { el_js_fail(g, path, "prefixItems: expected an array"); return NULL; }
        int n = cJSON_GetArraySize(arr);
        if (n < mn || (mx >= 0 && n > mx)) { el_js_fail(g, path, "a tuple of %d items outside minItems/maxItems", n); return NULL; }
        sb_puts(&b, "\"[\" space");
        int i = 0;
        for (const cJSON *it = arr->child; it; it = it->next, i++) {
            snprintf(cp, sizeof cp, "%s/prefixItems/%d", path, i);
            snprintf(nm, sizeof nm, "%s-%d", name, i);
            const char *v = el_js_visit(g, it, nm, cp);
            if (!v) { free(b.p); return NULL; }
            el_js_sb_printf(&b, i ? " \",\" space %s" : " %s", v);
        }
        sb_puts(&b, " \"]\" space");
    } else {
        const char *item;
        if (!items || cJSON_IsTrue(items)) item = el_js_prim(g, "value");
        else if (cJSON_IsObject(items)) {
            child_path(cp, sizeof cp, path, "items");
            snprintf(nm, sizeof nm, "%s-item", name);
            item = el_js_visit(g, items, nm, cp);
        } else { el_js_fail(g, path, "items: expected a schema"); return NULL; }
        if (!item) return NULL;
        if (mx == 0) sb_puts(&b, "\"[\" space \"]\" space");
        else if (mn == 0) {
            if (mx < 0) el_js_sb_printf(&b, "\"[\" space ( %s (\",\" space %s)* )? \"]\" space", item, item);
            else el_js_sb_printf(&b, "\"[\" space ( %s (\",\" space %s){0,%ld} )? \"]\" space", item, item, mx - 1);
        } else {
            if (mx < 0) el_js_sb_printf(&b, "\"[\" space %s (\",\" space %s){%ld,} \"]\" space", item, item, mn - 1);
            else el_js_sb_printf(&b, "\"[\" space %s (\",\" space %s){%ld,%ld} \"]\" space", item, item, mn - 1, mx - 1);
        }
    }
    if (b.oom) el_js_fail(g, path, "out of memory");
    else res = el_js_add_rule(g, name, b.p);
    free(b.p);
    return res;
}

