/*
 * jinja_json.c — cJSON trees into Jinja values (see jinja_json.h).
 */
#include "runtime/jinja_json.h"

#include <math.h>
#include <string.h>

static jv *conv(el_jctx *c, const cJSON *j, int depth, int content) {
    if (!j || depth > 512) return NULL;
    if (cJSON_IsNull(j)) return el_jv_none(c);
    if (cJSON_IsTrue(j)) return el_jv_bool(c, 1);
    if (cJSON_IsFalse(j)) return el_jv_bool(c, 0);
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (isfinite(d) && d == floor(d) && fabs(d) < 9007199254740992.0) return el_jv_int(c, (int64_t)d);
        return el_jv_float(c, d);
    }
    if (cJSON_IsString(j)) return (content ? el_jv_str_content : el_jv_str)(c, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j)) {
        jv *l = el_jv_list(c);
        if (!l) return NULL;
        for (const cJSON *x = j->child; x; x = x->next) {
            jv *v = conv(c, x, depth + 1, content);
            if (!v || el_jv_list_push(c, l, v) != 0) return NULL;
        }
        return l;
    }
    if (cJSON_IsObject(j)) {
        jv *d = el_jv_dict(c);
        if (!d) return NULL;
        for (const cJSON *x = j->child; x; x = x->next) {
            jv *v = conv(c, x, depth + 1, content);
            if (!v || !x->string) return NULL;
            jv *k = (content ? el_jv_str_content : el_jv_str)(c, x->string, strlen(x->string));
            if (el_jv_dict_put(c, d, k, v) != 0) return NULL;
        }
        return d;
    }
    return NULL;
}

jv *el_jinja_from_json(el_jctx *c, const cJSON *j) { return conv(c, j, 0, 0); }
jv *el_jinja_from_json_content(el_jctx *c, const cJSON *j) { return conv(c, j, 0, 1); }

int el_jctx_set_json(el_jctx *c, const cJSON *obj) {
    if (!cJSON_IsObject(obj)) return -1;
    for (const cJSON *x = obj->child; x; x = x->next) {
        jv *v = conv(c, x, 0, 0);
        if (!v || !x->string || el_jctx_set(c, x->string, v) != 0) return -1;
    }
    return 0;
}
