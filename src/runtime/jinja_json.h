/*
 * jinja_json.h — JSON (cJSON) into Jinja values: how messages, tools and
 * chat_template_kwargs reach a chat template.
 *
 * Contract: el_jinja_from_json copies a cJSON tree into c's arena as Python's
 * json.loads would give it: objects → dicts (member order kept), arrays →
 * lists, strings, true/false, null → None, numbers → int when the value is
 * integral and |x| < 2^53, else float (cJSON keeps no "1.0" vs "1"
 * distinction). NULL when c's memory limit is reached or the tree nests
 * deeper than 512. el_jctx_set_json sets each member of a JSON object as a
 * global (later calls replace earlier names): -1 if obj is not an object.
 * Compiled into the service library (cJSON is not a core dependency).
 */
#ifndef EL_RUNTIME_JINJA_JSON_H
#define EL_RUNTIME_JINJA_JSON_H
#include <cjson/cJSON.h>

#include "runtime/jinja.h"

jv *el_jinja_from_json(el_jctx *c, const cJSON *j);
/* The same with every string (keys included) marked as message content. */
jv *el_jinja_from_json_content(el_jctx *c, const cJSON *j);
int el_jctx_set_json(el_jctx *c, const cJSON *obj);

#endif
