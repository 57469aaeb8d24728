/*
 * json_schema.h — JSON Schema → GBNF (the grammar el_generate_params.grammar
 * takes), so that constrained output always parses as JSON and validates.
 *
 * Supported: type (one or a list), object (properties in their order,
 * required / optional, additionalProperties false | true | schema — absent
 * means false, as llama.cpp's converter and OpenAI's strict mode), array
 * (items, prefixItems, minItems, maxItems), enum, const, string (minLength,
 * maxLength, pattern: a regex subset — literals, ., [classes], \d \w \s,
 * groups, |, * + ? {m,n}, ^ $; unanchored patterns match anywhere — and
 * format date, time, date-time, uuid), integer with minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum as exact digit ranges, number (bounds
 * given: integral values in the range, which always validate), boolean,
 * null, anyOf / oneOf (as alternatives), allOf with one member, $ref to
 * "#", "#/definitions/…", "#/$defs/…" (recursion allowed), {} / true (any
 * JSON value). Anything else in a schema — an unknown type, a remote $ref,
 * an unsupported pattern feature — is an error (EL_ERR_GRAMMAR naming the
 * JSON path), never a silently looser grammar.
 *
 * Limits: schema nesting 64, 4096 rules, 1 MiB of grammar text.
 */
#ifndef EL_SERVICE_JSON_SCHEMA_H
#define EL_SERVICE_JSON_SCHEMA_H
#include <stddef.h>

#include <cjson/cJSON.h>

#include "edgellm.h"

/* GBNF text (malloc'd, NUL-terminated) for the schema; NULL with err. */
char *el_json_schema_to_gbnf(const cJSON *schema, el_error *err);
/* The same from schema text (len bytes). */
char *el_json_schema_text_to_gbnf(const char *text, size_t len, el_error *err);
/* The grammar of any JSON object (response_format json_object). */
const char *el_json_object_gbnf(void);

#endif
