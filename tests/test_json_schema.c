/*
 * test_json_schema.c — JSON Schema → GBNF (src/structured/json_schema.c): for
 * each schema the generated grammar compiles and the matcher accepts the
 * listed valid documents and rejects the invalid ones (wrong types, missing
 * required, extra properties under additionalProperties false, out-of-range
 * integers, too many items, pattern / format / enum / const violations,
 * recursion through $ref); unsupported or malformed schemas fail with
 * EL_ERR_GRAMMAR naming the JSON path; hostile schemas (deep nesting, huge
 * counts, $ref cycles) fail cleanly. Random walks through each grammar (a
 * random accepted byte at each step until it can end) produce documents that
 * the grammar accepts and that parse as JSON with cJSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "runtime/grammar.h"
#include "structured/json_schema.h"
#include "testutil.h"

static int doc_ok(const el_grammar *g, const char *doc) {
    el_error e = {0};
    el_gmatch *m = el_gmatch_new(g, &e);
    if (!m) return -1;
    int r = el_gmatch_accept(m, doc, strlen(doc), &e) == 0 && el_gmatch_can_end(m);
    el_gmatch_free(m);
    return r;
}

static el_grammar *schema_grammar(const char *schema, char **text_out) {
    el_error e = {0};
    char *gb = el_json_schema_text_to_gbnf(schema, strlen(schema), &e);
    CHECKF(gb != NULL, "schema %s: %s", schema, e.msg);
    if (!gb) return NULL;
    el_grammar *g = el_grammar_parse(gb, strlen(gb), &e);
    CHECKF(g != NULL, "schema %s: grammar does not compile: %s\n%s", schema, e.msg, gb);
    if (text_out) *text_out = gb;
    else free(gb);
    return g;
}

/* random walk: printable ASCII + a few UTF-8 bytes, until the grammar can end */
static void random_docs(const el_grammar *g, const char *schema, int n) {
    unsigned seed = 7;
    el_error e = {0};
    for (int d = 0; d < n; d++) {
        el_gmatch *m = el_gmatch_new(g, &e);
        char doc[4096];
        int len = 0;
        bool ended = false;
        for (int step = 0; step < 3000 && len < (int)sizeof doc - 4; step++) {
            seed = seed * 1103515245u + 12345u;
            /* end as soon as possible once past a few steps, so documents stay small */
            if (el_gmatch_can_end(m) && (step > 40 || (seed >> 16) % 4 == 0)) { ended = true; break; }
            unsigned char opts[128];
            int no = 0;
            for (int c = 0x20; c < 0x7f; c++) {
                char ch = (char)c;
                if (el_gmatch_check(m, &ch, 1) == 1) opts[no++] = (unsigned char)c;
            }
            if (el_gmatch_check(m, "\n", 1) == 1) opts[no++] = '\n';
            if (no == 0) break;
            /* prefer closing characters after a while so walks terminate */
            unsigned char ch = opts[(seed >> 8) % (unsigned)no];
            if (step > 20)
                for (int k = 0; k < no; k++)
                    if (strchr("}]\"", opts[k])) { ch = opts[k]; if ((seed >> 4) % 2) break; }
            if (el_gmatch_accept(m, (const char *)&ch, 1, &e) != 0) break;
            doc[len++] = (char)ch;
        }
        doc[len] = 0;
        if (ended) {
            cJSON *j = cJSON_Parse(doc);
            CHECKF(j != NULL, "schema %s: random document does not parse: %s", schema, doc);
            cJSON_Delete(j);
        }
        el_gmatch_free(m);
    }
}

typedef struct {
    const char *schema;
    const char *good[8];
    const char *bad[10];
} case_t;

static const case_t CASES[] = {
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
     "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":2}},\"required\":[\"name\",\"age\"]}",
     {"{\"name\":\"Ada\",\"age\":36}", "{ \"name\": \"x\", \"age\": 150, \"tags\": [\"a\", \"b\"] }", "{\"name\":\"\",\"age\":0,\"tags\":[]}"},
     {"{\"name\":\"Ada\"}", "{\"name\":\"Ada\",\"age\":151}", "{\"name\":\"Ada\",\"age\":-1}", "{\"name\":\"Ada\",\"age\":3.5}",
      "{\"name\":\"Ada\",\"age\":1,\"tags\":[\"a\",\"b\",\"c\"]}", "{\"name\":\"Ada\",\"age\":1,\"x\":1}", "{\"age\":1,\"name\":\"Ada\"}",
      "{\"name\":\"Ada\",\"age\":01}"}},
    /* optional properties in any subset, in order */
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"},\"c\":{\"type\":\"null\"}}}",
     {"{}", "{\"a\":1}", "{\"b\":true}", "{\"c\":null}", "{\"a\":1,\"c\":null}", "{\"a\":-5,\"b\":false,\"c\":null}"},
     {"{,}", "{\"a\":1,}", "{\"b\":true,\"a\":1}", "{\"a\":1,\"a\":2}", "{\"d\":1}"}},
    /* additionalProperties: a schema; extra keys differ from declared ones */
    {"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"],\"additionalProperties\":{\"type\":\"string\"}}",
     {"{\"id\":1}", "{\"id\":1,\"x\":\"y\",\"ide\":\"z\",\"i\":\"\"}"},
     {"{\"id\":1,\"x\":2}", "{\"id\":1,\"id\":\"y\"}"}},
    {"{\"enum\":[\"red\",\"green\",3,null,{\"k\":[1]}]}", {"\"red\"", "3", "null", "{\"k\":[1]}"}, {"\"blue\"", "4", "\"Red\""}},
    {"{\"const\":\"a\\\"b\\\\c\"}", {"\"a\\\"b\\\\c\""}, {"\"ab\\\\c\"", "\"a\\\"bc\""}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":2,\"maxItems\":3}",
     {"[1,2]", "[1.5, -2e10, 0]"}, {"[]", "[1]", "[1,2,3,4]", "[1,\"a\"]"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}", {"\"ab\"", "\"abcd\"", "\"\\u00e9x\""}, {"\"a\"", "\"abcde\""}},
    {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}(x|yz)?$\"}", {"\"AB-123\"", "\"ZZ-000yz\""}, {"\"ab-123\"", "\"AB-12\"", "\"AB-123y\""}},
    {"{\"type\":\"string\",\"pattern\":\"ab+\"}", {"\"ab\"", "\"xxabbbyy\""}, {"\"a\"", "\"ba\""}},
    {"{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-29\""}, {"\"2024-13-01\"", "\"24-01-01\""}},
    {"{\"type\":\"string\",\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567\""}},
    {"{\"type\":\"integer\",\"minimum\":-20,\"exclusiveMaximum\":1000}", {"-20", "-1", "0", "7", "999"}, {"-21", "1000", "-0", "01", "1e2"}},
    {"{\"type\":\"integer\",\"minimum\":95,\"maximum\":1234}", {"95", "99", "100", "999", "1000", "1234"}, {"94", "1235", "9", "2000"}},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":5}", {"6", "10", "123456"}, {"5", "0", "-7"}},
    {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":3}", {"1", "3"}, {"0", "4", "-1"}},
    {"{\"anyOf\":[{\"type\":\"boolean\"},{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}]}", {"true", "[]", "[true,[false,[]]]"}, {"1", "[1]"}},
    {"{\"type\":[\"string\",\"null\"]}", {"\"x\"", "null"}, {"1", "true"}},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
     "\"required\":[\"v\",\"next\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
     {"{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"}, {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2}}"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", {"[1,\"a\"]"}, {"[1]", "[\"a\",1]"}},
    {"{}", {"1", "{\"a\":[null]}", "\"s\""}, {"", "{"}},
};

static void expect_fail(const char *schema, const char *want) {
    el_error e = {0};
    char *g = el_json_schema_text_to_gbnf(schema, strlen(schema), &e);
    CHECKF(!g && e.code == EL_ERR_GRAMMAR && strstr(e.msg, want), "schema %s: want '%s', got '%s'", schema, want, e.msg);
    free(g);
}

int main(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const case_t *c = &CASES[i];
        char *text = NULL;
        el_grammar *g = schema_grammar(c->schema, &text);
        if (!g) continue;
        for (int k = 0; k < 8 && c->good[k]; k++)
            CHECKF(doc_ok(g, c->good[k]) == 1, "schema %s: rejects %s\n%s", c->schema, c->good[k], text);
        for (int k = 0; k < 10 && c->bad[k]; k++)
            CHECKF(doc_ok(g, c->bad[k]) == 0, "schema %s: accepts %s\n%s", c->schema, c->bad[k], text);
        random_docs(g, c->schema, 20);
        el_grammar_free(g);
        free(text);
    }
    /* json_object */
    el_error e = {0};
    el_grammar *g = el_grammar_parse(el_json_object_gbnf(), strlen(el_json_object_gbnf()), &e);
    CHECKF(g != NULL, "%s", e.msg);
    CHECK(doc_ok(g, "{\"a\": [1, {\"b\": null}]}") == 1 && doc_ok(g, "[1]") == 0 && doc_ok(g, "\"x\"") == 0);
    random_docs(g, "json_object", 20);
    el_grammar_free(g);

    /* errors name the place */
    expect_fail("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"strin\"}}}", "at /a: unknown type 'strin'");
    expect_fail("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"b\"]}", "required property 'b'");
    expect_fail("{\"$ref\":\"http://x/y.json\"}", "only references within the schema");
    expect_fail("{\"$ref\":\"#/definitions/nope\"}", "does not resolve");
    expect_fail("{\"type\":\"string\",\"pattern\":\"(?=a)b\"}", "lookaround");
    expect_fail("{\"type\":\"string\",\"pattern\":\"a(b\"}", "missing ')'");
    expect_fail("{\"type\":\"string\",\"pattern\":\"\\\\1\"}", "not supported");
    expect_fail("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer");
    expect_fail("{\"type\":\"array\",\"maxItems\":1e9}", "above 4096");
    expect_fail("{\"type\":\"string\",\"format\":\"email\"}", "format 'email'");
    expect_fail("{\"allOf\":[{},{}]}", "allOf");
    expect_fail("{\"type\":", "not valid JSON");
    expect_fail("[1]", "expected a schema");
    expect_fail("false", "admits nothing");
    /* hostile: deep nesting, a reference cycle that cannot consume input */
    char deep[4096];
    int n = 0;
    for (int i = 0; i < 100; i++) n += snprintf(deep + n, sizeof deep - (size_t)n, "{\"type\":\"array\",\"items\":");
    n += snprintf(deep + n, sizeof deep - (size_t)n, "{}");
    for (int i = 0; i < 100; i++) deep[n++] = '}';
    deep[n] = 0;
    expect_fail(deep, "deeper than 64");
    char *cyc = el_json_schema_text_to_gbnf("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", 52, &e);
    if (cyc) { /* converts; the GBNF compiler refuses the cycle as left recursion */
        el_grammar *gc = el_grammar_parse(cyc, strlen(cyc), &e);
        CHECKF(!gc && strstr(e.msg, "left recursion"), "cycle: %s", e.msg);
        el_grammar_free(gc);
        free(cyc);
    }
    /* many optional properties: quadratic but bounded */
    char big[20000];
    n = snprintf(big, sizeof big, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 200; i++) n += snprintf(big + n, sizeof big - (size_t)n, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    snprintf(big + n, sizeof big - (size_t)n, "}}");
    char *gb = el_json_schema_text_to_gbnf(big, strlen(big), &e);
    if (gb) {
        el_grammar *gg = el_grammar_parse(gb, strlen(gb), &e);
        CHECKF(gg != NULL, "200 optional properties: %s", e.msg);
        CHECK(doc_ok(gg, "{\"p3\":1,\"p150\":2}") == 1 && doc_ok(gg, "{\"p150\":2,\"p3\":1}") == 0);
        el_grammar_free(gg);
        free(gb);
    } else {
        CHECKF(e.code == EL_ERR_GRAMMAR, "%s", e.msg);
    }
    /* an enum / const string whose GBNF literal is longer than the converter's
     * 512-byte format buffer (escaped control characters grow it 6x): the rule
     * must be written whole, never cut into malformed GBNF (a fuzz_grammar find) */
    {
        /* the JSON text of the string: 120 escaped control characters and 280 'x' */
        char lit[1200], sch[1400], doc[1300];
        int k = 0;
        for (int i = 0; i < 120; i++) k += snprintf(lit + k, sizeof lit - (size_t)k, "\\u0016");
        for (int i = 0; i < 280; i++) lit[k++] = 'x';
        lit[k] = 0;
        for (int kind = 0; kind < 2; kind++) {
            snprintf(sch, sizeof sch, kind ? "{\"const\":\"%s\"}" : "{\"enum\":[\"%s\",\"green\"]}", lit);
            char *t2 = NULL;
            el_grammar *gl = schema_grammar(sch, &t2);
            CHECKF(gl != NULL, "long %s literal", kind ? "const" : "enum");
            if (!gl) continue;
            snprintf(doc, sizeof doc, "\"%s\"", lit);
            CHECKF(doc_ok(gl, doc) == 1, "long %s literal: the whole string is refused", kind ? "const" : "enum");
            size_t dl = strlen(doc);
            doc[dl - 2] = '"'; /* one 'x' short */
            doc[dl - 1] = 0;
            CHECK(doc_ok(gl, doc) == 0);
            el_grammar_free(gl);
            free(t2);
        }
    }
    printf("test_json_schema: %d checks, %d failures\n", el_test_checks, el_test_failures);
    return el_test_failures ? 1 : 0;
}
