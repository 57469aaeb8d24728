/*
 * test_api.c — request validation and response building (src/server/api*.c),
 * embeddings bodies and replies included.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "util/utf8.h"
#include "testutil.h"

/* ---- helpers ---- */

#define SL(lit) (sizeof(lit) - 1)

static int parse_n(el_api_kind kind, const char *body, size_t len, el_api_request *r, el_api_error *e) {
    memset(e, 0, sizeof *e);
    if (kind == EL_API_NATIVE) return el_api_parse_native(body, len, r, e);
    return el_api_parse(kind, body, len, r, e);
}

/* Parses and expects success; the caller frees r. */
static int ok_(int line, el_api_kind kind, const char *body, el_api_request *r) {
    el_api_error e;
    int rc = parse_n(kind, body, strlen(body), r, &e);
    CHECKF(rc == 0, "line %d: expected success for %s, got %d %s", line, body, e.status, e.message);
    return rc;
}
#define OK(kind, body, r) ok_(__LINE__, kind, body, r)

/* Parses and expects failure with status, param (NULL: must be NULL) and a message containing sub. */
static void bad_(int line, el_api_kind kind, const char *body, size_t len, int status, const char *param,
                 const char *sub) {
    el_api_request r;
    el_api_error e;
    int rc = parse_n(kind, body, len, &r, &e);
    CHECKF(rc == -1, "line %d: expected failure for %.80s", line, body);
    if (rc == 0) { el_api_request_free(&r); return; }
    CHECKF(e.status == status, "line %d: status %d, want %d (%s)", line, e.status, status, e.message);
    CHECKF(e.type && !strcmp(e.type, status >= 500 ? "server_error" : "invalid_request_error"), "line %d: type %s",
           line, e.type ? e.type : "(null)");
    if (param) CHECKF(e.param && !strcmp(e.param, param), "line %d: param %s, want %s", line,
                      e.param ? e.param : "(null)", param);
    else CHECKF(e.param == NULL, "line %d: param %s, want NULL", line, e.param);
    if (sub) CHECKF(strstr(e.message, sub) != NULL, "line %d: message '%s' lacks '%s'", line, e.message, sub);
    /* after a failed parse the struct is reset: freeing again is safe */
    CHECK(r.msgs == NULL && r.prompt == NULL && r.model == NULL && r.stop[0] == NULL && r.n_msgs == 0);
    el_api_request_free(&r);
}
#define BAD(kind, body, status, param, sub) bad_(__LINE__, kind, body, strlen(body), status, param, sub)
#define BADN(kind, body, len, status, param, sub) bad_(__LINE__, kind, body, len, status, param, sub)
#define CHAT EL_API_CHAT
#define COMP EL_API_COMPLETION
#define NAT EL_API_NATIVE

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

/* {MSG, <field>} chat body in a static buffer */
static const char *chat_with(const char *field) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "{" MSG ",%s}", field);
    return buf;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static int str_is(const cJSON *o, const char *k, const char *v) {
    const cJSON *it = get(o, k);
    return cJSON_IsString(it) && !strcmp(it->valuestring, v);
}
static int num_is(const cJSON *o, const char *k, double v) {
    const cJSON *it = get(o, k);
    return cJSON_IsNumber(it) && it->valuedouble == v;
}
static int is_null(const cJSON *o, const char *k) { return cJSON_IsNull(get(o, k)); }
static int n_keys(const cJSON *o) { return cJSON_GetArraySize(o); }

/* ---- chat messages ---- */

static void test_chat_minimal_defaults(void) {
    el_api_request r;
    if (OK(CHAT, "{" MSG "}", &r)) return;
    CHECK(r.kind == EL_API_CHAT);
    CHECK(r.n_msgs == 1 && !strcmp(r.msgs[0].role, "user") && !strcmp(r.msgs[0].content, "hi"));
    CHECK(r.model == NULL && r.prompt == NULL);
    CHECK(r.max_tokens == -1 && r.temperature == 1.0f && r.top_p == 1.0f);
    CHECK(r.presence_penalty == 0 && r.frequency_penalty == 0 && !r.has_seed);
    CHECK(r.n_stop == 0 && r.stop[0] == NULL && !r.stream && !r.include_usage);
    el_api_request_free(&r);
    el_api_request_free(&r); /* idempotent */
}

static void test_chat_full(void) {
    el_api_request r;
    const char *body =
        "{\"model\":\"gemma-3\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":\"Hello \\u00e9\\ud83d\\ude00\"},{\"role\":\"assistant\",\"content\":\"\"},"
        "{\"role\":\"user\",\"content\":\"again\",\"name\":\"bob\"}],"
        "\"max_tokens\":64,\"temperature\":0.7,\"top_p\":0.9,\"presence_penalty\":-1.5,\"frequency_penalty\":2,"
        "\"seed\":42,\"stop\":[\"\\n\\n\",\"END\"],\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"n\":1,\"user\":\"u-1\",\"logprobs\":false,\"tools\":[],\"response_format\":{\"type\":\"text\"}}";
    if (OK(CHAT, body, &r)) return;
    CHECK(r.n_msgs == 4);
    CHECK(!strcmp(r.msgs[0].role, "system") && !strcmp(r.msgs[0].content, "Be brief."));
    CHECK(!strcmp(r.msgs[1].content, "Hello \xC3\xA9\xF0\x9F\x98\x80"));
    CHECK(!strcmp(r.msgs[2].role, "assistant") && r.msgs[2].content[0] == 0);
    CHECK(!strcmp(r.model, "gemma-3"));
    CHECK(r.max_tokens == 64 && fabsf(r.temperature - 0.7f) < 1e-6f && fabsf(r.top_p - 0.9f) < 1e-6f);
    CHECK(r.presence_penalty == -1.5f && r.frequency_penalty == 2.0f);
    CHECK(r.has_seed && r.seed == 42);
    CHECK(r.n_stop == 2 && !strcmp(r.stop[0], "\n\n") && !strcmp(r.stop[1], "END") && r.stop[2] == NULL);
    CHECK(r.stream && r.include_usage);
    el_api_request_free(&r);
    CHECK(r.msgs == NULL && r.model == NULL && r.stop[0] == NULL);
}

static void test_chat_messages_errors(void) {
    BAD(CHAT, "{}", 400, "messages", "missing required parameter: 'messages'");
    BAD(CHAT, "{\"messages\":null}", 400, "messages", "expected an array, got null");
    BAD(CHAT, "{\"messages\":[]}", 400, "messages", "at least one");
    BAD(CHAT, "{\"messages\":\"hi\"}", 400, "messages", "expected an array");
    BAD(CHAT, "{\"messages\":{\"role\":\"user\"}}", 400, "messages", "expected an array");
    BAD(CHAT, "{\"messages\":[\"hi\"]}", 400, "messages", "messages[0]: expected an object");
    BAD(CHAT, "{\"messages\":[{\"content\":\"hi\"}]}", 400, "messages", "messages[0].role: missing");
    BAD(CHAT, "{\"messages\":[{\"role\":1,\"content\":\"hi\"}]}", 400, "messages", "messages[0].role: expected a string");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\"}]}", 400, "messages", "messages[0].content: missing");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":null}]}", 400, "messages", "messages[0].content");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages", "messages[0].content");
    BAD(CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
        "{\"role\":\"critic\",\"content\":\"c\"}]}",
        400, "messages", "messages[2].role: unknown role 'critic'");
    BAD(CHAT, "{\"messages\":[{\"role\":\"User\",\"content\":\"a\"}]}", 400, "messages", "unknown role 'User'");
    BAD(CHAT, "{\"messages\":[{\"role\":\"\",\"content\":\"a\"}]}", 400, "messages", "unknown role ''");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"role\":\"system\",\"content\":\"a\"}]}", 400, "messages",
        "duplicate key 'role'");
    /* a very long unknown role is quoted truncated on a character boundary */
    {
        char body[2048];
        int n = snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"");
        for (int i = 0; i < 300; i++) n += snprintf(body + n, sizeof body - (size_t)n, "\xC3\xA9");
        snprintf(body + n, sizeof body - (size_t)n, "\",\"content\":\"x\"}]}");
        el_api_request r;
        el_api_error e;
        CHECK(parse_n(CHAT, body, strlen(body), &r, &e) == -1);
        CHECK(strstr(e.message, "...'") != NULL && strlen(e.message) < 120);
        char *j = el_api_error_json(&e);
        cJSON *p = j ? cJSON_Parse(j) : NULL;
        CHECK(p != NULL);
        cJSON_Delete(p);
        free(j);
    }
}

static void test_chat_content_parts(void) {
    el_api_request r;
    if (!OK(CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello, \"},"
            "{\"type\":\"text\",\"text\":\"world\"},{\"text\":\"!\",\"type\":\"text\"}]}]}",
            &r)) {
        CHECK(!strcmp(r.msgs[0].content, "Hello, world!"));
        el_api_request_free(&r);
    }
    if (!OK(CHAT, "{\"messages\":[{\"role\":\"system\",\"content\":[]}]}", &r)) {
        CHECK(r.msgs[0].content && r.msgs[0].content[0] == 0);
        el_api_request_free(&r);
    }
    BAD(CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}",
        400, "messages", "messages[0].content[1]: unsupported content part type 'image_url'");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[\"a\"]}]}", 400, "messages",
        "content[0]: expected an object");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"a\"}]}]}", 400, "messages",
        "content[0].type");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", 400, "messages",
        "content[0].text");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":3}]}]}", 400,
        "messages", "content[0].text: expected a string, got number");
}

/* ---- completion prompt ---- */

static void test_completion_prompt(void) {
    el_api_request r;
    if (!OK(COMP, "{\"model\":\"m\",\"prompt\":\"Once upon\",\"max_tokens\":16,\"echo\":true}", &r)) {
        CHECK(r.kind == EL_API_COMPLETION && r.msgs == NULL && r.n_msgs == 0);
        CHECK(!strcmp(r.prompt, "Once upon") && !strcmp(r.model, "m") && r.max_tokens == 16);
        el_api_request_free(&r);
    }
    if (!OK(COMP, "{\"prompt\":[\"one\"]}", &r)) {
        CHECK(!strcmp(r.prompt, "one"));
        el_api_request_free(&r);
    }
    if (!OK(COMP, "{\"prompt\":\"\"}", &r)) { /* allowed: the server decides */
        CHECK(r.prompt && r.prompt[0] == 0);
        el_api_request_free(&r);
    }
    /* messages is not a completion field: ignored; prompt is not a chat field */
    if (!OK(COMP, "{\"prompt\":\"p\",\"messages\":5,\"max_completion_tokens\":\"x\"}", &r))
        el_api_request_free(&r);
    BAD(CHAT, "{\"prompt\":\"p\"}", 400, "messages", "missing");
    BAD(COMP, "{}", 400, "prompt", "missing required parameter: 'prompt'");
    BAD(COMP, "{\"prompt\":null}", 400, "prompt", "got null");
    BAD(COMP, "{\"prompt\":7}", 400, "prompt", "expected a string, got number");
    BAD(COMP, "{\"prompt\":[]}", 400, "prompt", "exactly one string");
    BAD(COMP, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt", "exactly one string");
    BAD(COMP, "{\"prompt\":[1,2,3]}", 400, "prompt", "token-id prompts are not supported");
    BAD(COMP, "{\"prompt\":[[1,2]]}", 400, "prompt", "exactly one string");
    BAD(COMP, "{\"prompt\":{\"text\":\"a\"}}", 400, "prompt", "expected a string, got object");
}

/* ---- optional fields ---- */

static void test_max_tokens(void) {
    el_api_request r;
    if (!OK(CHAT, chat_with("\"max_tokens\":1"), &r)) { CHECK(r.max_tokens == 1); el_api_request_free(&r); }
    if (!OK(CHAT, chat_with("\"max_tokens\":1048576"), &r)) {
        CHECK(r.max_tokens == 1 << 20);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"max_completion_tokens\":77"), &r)) {
        CHECK(r.max_tokens == 77);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"max_tokens\":10,\"max_completion_tokens\":20"), &r)) {
        CHECK(r.max_tokens == 20);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"max_tokens\":null"), &r)) { CHECK(r.max_tokens == -1); el_api_request_free(&r); }
    BAD(CHAT, chat_with("\"max_tokens\":0"), 400, "max_tokens", "between 1 and 1048576");
    BAD(CHAT, chat_with("\"max_tokens\":-5"), 400, "max_tokens", "got -5");
    BAD(CHAT, chat_with("\"max_tokens\":1048577"), 400, "max_tokens", NULL);
    BAD(CHAT, chat_with("\"max_tokens\":1e300"), 400, "max_tokens", NULL);
    BAD(CHAT, chat_with("\"max_tokens\":1e999"), 400, "max_tokens", NULL); /* strtod -> inf */
    BAD(CHAT, chat_with("\"max_tokens\":-1e999"), 400, "max_tokens", NULL);
    BAD(CHAT, chat_with("\"max_tokens\":12.5"), 400, "max_tokens", "expected an integer");
    BAD(CHAT, chat_with("\"max_tokens\":\"12\""), 400, "max_tokens", "expected an integer, got string");
    BAD(CHAT, chat_with("\"max_tokens\":true"), 400, "max_tokens", "got boolean");
    BAD(CHAT, chat_with("\"max_completion_tokens\":0"), 400, "max_completion_tokens", NULL);
    BAD(COMP, "{\"prompt\":\"p\",\"max_tokens\":[1]}", 400, "max_tokens", "got array");
}

static void test_sampling_ranges(void) {
    el_api_request r;
    if (!OK(CHAT, chat_with("\"temperature\":0,\"top_p\":1,\"presence_penalty\":2,\"frequency_penalty\":-2"), &r)) {
        CHECK(r.temperature == 0 && r.top_p == 1 && r.presence_penalty == 2 && r.frequency_penalty == -2);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"temperature\":2,\"top_p\":1e-9"), &r)) {
        CHECK(r.temperature == 2 && r.top_p > 0);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"temperature\":null,\"top_p\":null"), &r)) {
        CHECK(r.temperature == 1.0f && r.top_p == 1.0f);
        el_api_request_free(&r);
    }
    BAD(CHAT, chat_with("\"temperature\":-0.1"), 400, "temperature", "at least 0");
    BAD(CHAT, chat_with("\"temperature\":2.0001"), 400, "temperature", "at most 2");
    BAD(CHAT, chat_with("\"temperature\":1e999"), 400, "temperature", "finite");
    BAD(CHAT, chat_with("\"temperature\":\"0.5\""), 400, "temperature", "expected a number, got string");
    BAD(CHAT, chat_with("\"top_p\":0"), 400, "top_p", "greater than 0");
    BAD(CHAT, chat_with("\"top_p\":1.01"), 400, "top_p", NULL);
    BAD(CHAT, chat_with("\"top_p\":false"), 400, "top_p", NULL);
    BAD(CHAT, chat_with("\"presence_penalty\":2.5"), 400, "presence_penalty", NULL);
    BAD(CHAT, chat_with("\"presence_penalty\":-2.5"), 400, "presence_penalty", NULL);
    BAD(COMP, "{\"prompt\":\"p\",\"frequency_penalty\":-3}", 400, "frequency_penalty", NULL);
    BAD(COMP, "{\"prompt\":\"p\",\"frequency_penalty\":{}}", 400, "frequency_penalty", "got object");
    /* malformed numbers cJSON must not accept */
    BAD(CHAT, chat_with("\"temperature\":NaN"), 400, NULL, "not valid JSON");
    BAD(CHAT, chat_with("\"temperature\":Infinity"), 400, NULL, "not valid JSON");
    BAD(CHAT, chat_with("\"temperature\":-nan"), 400, NULL, "not valid JSON");
    BAD(CHAT, chat_with("\"temperature\":1.5.5"), 400, NULL, "not valid JSON");
}

static void test_seed(void) {
    el_api_request r;
    if (!OK(CHAT, chat_with("\"seed\":-1"), &r)) {
        CHECK(r.has_seed && r.seed == UINT64_MAX);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"seed\":0"), &r)) { CHECK(r.has_seed && r.seed == 0); el_api_request_free(&r); }
    if (!OK(CHAT, chat_with("\"seed\":9007199254740992"), &r)) {
        CHECK(r.seed == 9007199254740992ull);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"seed\":-9223372036854775808"), &r)) {
        CHECK(r.seed == 0x8000000000000000ull);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"seed\":null"), &r)) { CHECK(!r.has_seed); el_api_request_free(&r); }
    BAD(CHAT, chat_with("\"seed\":1.5"), 400, "seed", "expected an integer");
    BAD(CHAT, chat_with("\"seed\":\"42\""), 400, "seed", "got string");
    BAD(CHAT, chat_with("\"seed\":1e30"), 400, "seed", NULL);
    BAD(CHAT, chat_with("\"seed\":18446744073709551615"), 400, "seed", NULL); /* rounds to 2^64 */
    BAD(CHAT, chat_with("\"seed\":-1e19"), 400, "seed", NULL);
}

static void test_stop(void) {
    el_api_request r;
    if (!OK(CHAT, chat_with("\"stop\":\"###\""), &r)) {
        CHECK(r.n_stop == 1 && !strcmp(r.stop[0], "###") && r.stop[1] == NULL);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"stop\":[]"), &r)) { CHECK(r.n_stop == 0); el_api_request_free(&r); }
    if (!OK(CHAT, chat_with("\"stop\":null"), &r)) { CHECK(r.n_stop == 0); el_api_request_free(&r); }
    if (!OK(CHAT, chat_with("\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\"]"), &r)) {
        CHECK(r.n_stop == 8 && !strcmp(r.stop[7], "8") && r.stop[8] == NULL);
        el_api_request_free(&r);
    }
    char big[600];
    char *p = big + sprintf(big, "\"stop\":\"");
    memset(p, 'x', 256);
    strcpy(p + 256, "\"");
    if (!OK(CHAT, chat_with(big), &r)) { CHECK(strlen(r.stop[0]) == 256); el_api_request_free(&r); }
    p = big + sprintf(big, "\"stop\":[\"a\",\"");
    memset(p, 'x', 257);
    strcpy(p + 257, "\"]");
    BAD(CHAT, chat_with(big), 400, "stop", "1..256 bytes");
    BAD(CHAT, chat_with("\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]"), 400, "stop", "at most 8");
    BAD(CHAT, chat_with("\"stop\":\"\""), 400, "stop", "1..256 bytes");
    BAD(CHAT, chat_with("\"stop\":[\"a\",\"\"]"), 400, "stop", NULL);
    BAD(CHAT, chat_with("\"stop\":[\"a\",3]"), 400, "stop", "stop[1]: expected a string, got number");
    BAD(CHAT, chat_with("\"stop\":[null]"), 400, "stop", "stop[0]");
    BAD(CHAT, chat_with("\"stop\":5"), 400, "stop", "expected a string or an array of strings");
    BAD(CHAT, chat_with("\"stop\":{\"a\":1}"), 400, "stop", NULL);
}

static void test_stream_n_user_model(void) {
    el_api_request r;
    if (!OK(CHAT, chat_with("\"stream\":false,\"stream_options\":null,\"n\":1,\"user\":null,\"model\":null"), &r)) {
        CHECK(!r.stream && !r.include_usage && r.model == NULL);
        el_api_request_free(&r);
    }
    if (!OK(COMP, "{\"prompt\":\"p\",\"stream\":true,\"stream_options\":{\"include_usage\":false,\"x\":1}}", &r)) {
        CHECK(r.stream && !r.include_usage);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"stream_options\":{}"), &r)) el_api_request_free(&r);
    BAD(CHAT, chat_with("\"stream\":\"true\""), 400, "stream", "expected a boolean, got string");
    BAD(CHAT, chat_with("\"stream\":1"), 400, "stream", NULL);
    BAD(CHAT, chat_with("\"stream_options\":true"), 400, "stream_options", "expected an object");
    BAD(CHAT, chat_with("\"stream_options\":{\"include_usage\":1}"), 400, "stream_options.include_usage", NULL);
    BAD(CHAT, chat_with("\"n\":2"), 400, "n", "n must be 1");
    BAD(CHAT, chat_with("\"n\":0"), 400, "n", "n must be 1");
    BAD(CHAT, chat_with("\"n\":\"1\""), 400, "n", NULL);
    BAD(CHAT, chat_with("\"n\":1.5"), 400, "n", NULL);
    BAD(CHAT, chat_with("\"user\":5"), 400, "user", "expected a string");
    BAD(CHAT, chat_with("\"model\":5"), 400, "model", "expected a string, got number");
    BAD(CHAT, chat_with("\"model\":[\"m\"]"), 400, "model", NULL);
}

static void test_unknown_and_duplicates(void) {
    el_api_request r;
    if (!OK(CHAT, chat_with("\"tool_choice_x\":\"weird\",\"Logprobs\":[],\"Temperature\":\"x\",\"\":null"), &r))
        el_api_request_free(&r);
    BAD(CHAT, chat_with("\"temperature\":0.5,\"temperature\":1"), 400, "temperature", "duplicate key 'temperature'");
    BAD(CHAT, "{" MSG "," MSG "}", 400, "messages", "duplicate key 'messages'");
    BAD(CHAT, chat_with("\"stream_options\":{\"include_usage\":true,\"include_usage\":false}"), 400,
        "stream_options", "duplicate key");
    /* an error in a later message frees the earlier ones (checked by ASan) */
    BAD(CHAT,
        "{\"model\":\"m\",\"stop\":[\"a\"],\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"bad\",\"content\":\"c\"}]}",
        400, "messages", "messages[2].role");
    /* an error in a field parsed after messages/model/stop frees them */
    BAD(CHAT, "{\"model\":\"m\",\"stop\":[\"a\",\"b\"]," MSG ",\"n\":3}", 400, "n", NULL);
}

/* ---- body level: size, UTF-8, JSON ---- */

static void test_body_json(void) {
    BAD(CHAT, "", 400, NULL, "not valid JSON");
    BADN(CHAT, NULL, 0, 400, NULL, "not valid JSON");
    BAD(CHAT, "   ", 400, NULL, "not valid JSON");
    BAD(CHAT, "[]", 400, NULL, "must be a JSON object");
    BAD(CHAT, "\"str\"", 400, NULL, "must be a JSON object");
    BAD(CHAT, "42", 400, NULL, "must be a JSON object");
    BAD(CHAT, "null", 400, NULL, "must be a JSON object");
    BAD(CHAT, "{" MSG, 400, NULL, "not valid JSON");
    BAD(CHAT, "{" MSG "}}", 400, NULL, "not valid JSON");
    BAD(CHAT, "{" MSG "} x", 400, NULL, "not valid JSON");
    BAD(CHAT, "{" MSG "}{}", 400, NULL, "not valid JSON");
    BAD(CHAT, "{" MSG ",}", 400, NULL, "not valid JSON");
    BAD(CHAT, "{'messages':[]}", 400, NULL, "not valid JSON");
    /* raw control characters in strings and NUL bytes / \u0000 anywhere */
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\nb\"}]}", 400, NULL, "control character");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\tb\"}]}", 400, NULL, "control character");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", 400, NULL, "\\u0000");
    {
        static const char b[] = "{" MSG "}\0garbage";
        BADN(CHAT, b, sizeof b - 1, 400, NULL, "NUL byte");
        static const char c[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\0b\"}]}";
        BADN(CHAT, c, sizeof c - 1, 400, NULL, "NUL byte");
    }
    /* escaped quotes/backslashes do not confuse the lexical pre-check */
    el_api_request r;
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\\\"\\\\\\n\\u0001\\u00000\"}]}", 400, NULL,
        "\\u0000"); /* \u0000 followed by '0' */
    if (!OK(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\\\"\\\\\\n\\u0001\\\\u0000\"}]}", &r)) {
        CHECK(!strcmp(r.msgs[0].content, "q\"\\\n\x01\\u0000")); /* escaped backslash, then literal u0000 */
        el_api_request_free(&r);
    }
    /* lone surrogate escapes: cJSON rejects them */
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\"}]}", 400, NULL, "not valid JSON");
    BAD(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\\udc00x\"}]}", 400, NULL, "not valid JSON");
    /* whitespace around and a UTF-8 BOM are fine */
    if (!OK(CHAT, " \r\n\t{" MSG "}\n ", &r)) el_api_request_free(&r);
    if (!OK(CHAT, "\xEF\xBB\xBF{" MSG "}", &r)) el_api_request_free(&r);
    /* the length is honoured: bytes beyond len are never read */
    const char *body = "{" MSG "}GARBAGE";
    el_api_error e;
    CHECK(parse_n(CHAT, body, strlen(body) - 7, &r, &e) == 0);
    el_api_request_free(&r);
}

static void test_body_utf8(void) {
    struct { const char *bytes; const char *what; } bad[] = {
        {"\xC0\xAF", "overlong 2-byte '/'"},
        {"\xC1\xBF", "overlong 2-byte"},
        {"\xE0\x80\xAF", "overlong 3-byte"},
        {"\xE0\x9F\xBF", "overlong 3-byte (max)"},
        {"\xF0\x80\x80\xAF", "overlong 4-byte"},
        {"\xF0\x8F\xBF\xBF", "overlong 4-byte (max)"},
        {"\xED\xA0\x80", "surrogate D800"},
        {"\xED\xBF\xBF", "surrogate DFFF"},
        {"\xED\xA0\xBD\xED\xB8\x80", "CESU-8 surrogate pair"},
        {"\xF4\x90\x80\x80", "above U+10FFFF"},
        {"\xF5\x80\x80\x80", "F5 lead"},
        {"\xFF", "FF"},
        {"\xFE", "FE"},
        {"\x80", "stray continuation"},
        {"a\xBF", "stray continuation after ASCII"},
        {"\xC3", "truncated 2-byte"},
        {"\xE2\x82", "truncated 3-byte"},
        {"\xF0\x9F\x98", "truncated 4-byte"},
        {"\xC3\x28", "bad continuation"},
        {"\xE2\x28\xA1", "bad 2nd continuation"},
        {"\xF0\x9F\x98\x28", "bad 4th continuation"},
    };
    char body[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x%sy\"}]}", bad[i].bytes);
        el_api_request r;
        el_api_error e;
        int rc = parse_n(CHAT, body, strlen(body), &r, &e);
        CHECKF(rc == -1 && e.status == 400 && !strcmp(e.message, "invalid UTF-8 in request body") && !e.param,
               "%s: rc %d status %d %s", bad[i].what, rc, e.status, e.message);
        if (rc == 0) el_api_request_free(&r);
    }
    /* invalid UTF-8 outside strings and truncated at the very end of the body */
    BAD(CHAT, "{" MSG ",\"x\xC3\":1}", 400, NULL, "invalid UTF-8");
    BAD(COMP, "{\"prompt\":\"p\"}\xE2\x82", 400, NULL, "invalid UTF-8");
    BADN(COMP, "{\"prompt\":\"\xE2\x82\xAC\"}", 12, 400, NULL, "invalid UTF-8"); /* cut inside the euro sign */
    /* boundaries that are valid */
    const char *good[] = {"\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF",
                          "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "\x7F"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        snprintf(body, sizeof body, "{\"prompt\":\"%s\"}", good[i]);
        el_api_request r;
        if (!OK(COMP, body, &r)) {
            CHECKF(!strcmp(r.prompt, good[i]), "good[%zu]", i);
            el_api_request_free(&r);
        }
    }
}

static void test_body_size_and_nesting(void) {
    /* 2 MB -> 413 before anything else is looked at */
    size_t n = 2u << 20;
    char *big = malloc(n + 1);
    if (!big) return;
    memset(big, ' ', n);
    memcpy(big, "{\"prompt\":\"", 11);
    big[n - 2] = '"';
    big[n - 1] = '}';
    big[n] = 0;
    el_api_request r;
    el_api_error e;
    CHECK(parse_n(COMP, big, n, &r, &e) == -1 && e.status == 413 && e.code && !strcmp(e.code, "request_too_large"));
    CHECK(parse_n(COMP, big, EL_API_MAX_BODY + 1, &r, &e) == -1 && e.status == 413);
    /* exactly EL_API_MAX_BODY is allowed: a ~1 MB prompt */
    size_t m = EL_API_MAX_BODY;
    memset(big, 'a', m);
    memcpy(big, "{\"prompt\":\"", 11);
    big[m - 2] = '"';
    big[m - 1] = '}';
    CHECK(parse_n(COMP, big, m, &r, &e) == 0 && r.prompt && strlen(r.prompt) == m - 13);
    el_api_request_free(&r);
    /* many messages */
    size_t off = (size_t)sprintf(big, "{\"messages\":[");
    int count = 20000;
    for (int i = 0; i < count; i++)
        off += (size_t)sprintf(big + off, "%s{\"role\":\"%s\",\"content\":\"m%d\"}", i ? "," : "",
                               i % 2 ? "assistant" : "user", i);
    off += (size_t)sprintf(big + off, "]}");
    CHECK(parse_n(CHAT, big, off, &r, &e) == 0 && r.n_msgs == count && !strcmp(r.msgs[count - 1].content, "m19999"));
    el_api_request_free(&r);
    /* deep nesting in an ignored field: within cJSON's limit it is fine, beyond it 400 */
    for (int depth = 500; depth <= 5000; depth += 4500) {
        off = (size_t)sprintf(big, "{\"prompt\":\"p\",\"x\":");
        for (int i = 0; i < depth; i++) big[off++] = '[';
        for (int i = 0; i < depth; i++) big[off++] = ']';
        big[off++] = '}';
        int rc = parse_n(COMP, big, off, &r, &e);
        if (depth < 1000) CHECK(rc == 0);
        else CHECK(rc == -1 && e.status == 400);
        if (rc == 0) el_api_request_free(&r);
    }
    /* an 800k-element ignored array of numbers */
    off = (size_t)sprintf(big, "{\"prompt\":\"p\",\"x\":[");
    for (int i = 0; i < 400000; i++) { big[off++] = '0'; big[off++] = ','; }
    big[off - 1] = ']';
    big[off++] = '}';
    CHECK(parse_n(COMP, big, off, &r, &e) == 0);
    el_api_request_free(&r);
    free(big);
}

static void test_null_args(void) {
    el_api_request r;
    el_api_request_free(NULL);
    memset(&r, 0, sizeof r);
    el_api_request_free(&r); /* zeroed struct */
    CHECK(el_api_parse(CHAT, "{" MSG "}", strlen("{" MSG "}"), &r, NULL) == 0); /* err may be NULL */
    el_api_request_free(&r);
    CHECK(el_api_parse(CHAT, "{}", 2, &r, NULL) == -1);
    el_api_error e;
    CHECK(el_api_parse(CHAT, "{}", 2, NULL, &e) == -1 && e.status == 500);
}

/* ---- errors ---- */

static void test_error_json(void) {
    el_api_error e;
    el_api_set_error(&e, 400, "invalid_request_error", "temperature", "invalid_value", "bad %s %d \"q\"", "x", 3);
    CHECK(e.status == 400 && !strcmp(e.message, "bad x 3 \"q\""));
    char *j = el_api_error_json(&e);
    cJSON *p = j ? cJSON_Parse(j) : NULL;
    CHECK(p && n_keys(p) == 1);
    const cJSON *er = get(p, "error");
    CHECK(cJSON_IsObject(er) && n_keys(er) == 4);
    CHECK(str_is(er, "message", "bad x 3 \"q\"") && str_is(er, "type", "invalid_request_error"));
    CHECK(str_is(er, "param", "temperature") && str_is(er, "code", "invalid_value"));
    cJSON_Delete(p);
    free(j);

    el_api_set_error(&e, 503, "server_error", NULL, NULL, "busy");
    j = el_api_error_json(&e);
    p = j ? cJSON_Parse(j) : NULL;
    er = get(p, "error");
    CHECK(str_is(er, "message", "busy") && str_is(er, "type", "server_error"));
    CHECK(is_null(er, "param") && is_null(er, "code"));
    CHECK(j && strstr(j, "\"param\":null") && strstr(j, "\"code\":null"));
    cJSON_Delete(p);
    free(j);

    /* a message cut by the 320-byte buffer in the middle of a character stays valid UTF-8 */
    char longmsg[400];
    for (int i = 0; i < 170; i++) memcpy(longmsg + 2 * i, "\xC3\xA9", 2);
    longmsg[340] = 0;
    el_api_set_error(&e, 400, "invalid_request_error", NULL, NULL, "%s", longmsg);
    CHECK(strlen(e.message) == sizeof e.message - 1 && (unsigned char)e.message[318] == 0xC3); /* cut mid-char */
    j = el_api_error_json(&e);
    p = j ? cJSON_Parse(j) : NULL;
    CHECK(p != NULL);
    CHECK(j && !strstr(j, "\xC3\"") && strstr(j, "\xC3\xA9\xEF\xBF\xBD\"")); /* dangling lead -> U+FFFD */
    cJSON_Delete(p);
    free(j);
    el_api_set_error(NULL, 400, "x", NULL, NULL, "y"); /* no-op */
    CHECK(el_api_error_json(NULL) == NULL);

    /* real parse errors serialise */
    el_api_request r;
    CHECK(parse_n(CHAT, chat_with("\"n\":4"), strlen(chat_with("\"n\":4")), &r, &e) == -1);
    j = el_api_error_json(&e);
    p = j ? cJSON_Parse(j) : NULL;
    er = get(p, "error");
    CHECK(str_is(er, "message", "n must be 1") && str_is(er, "param", "n") && str_is(er, "code", "invalid_value"));
    cJSON_Delete(p);
    free(j);
}

/* ---- builders ---- */

static cJSON *parse_free(char *s) {
    CHECK(s != NULL);
    cJSON *p = s ? cJSON_Parse(s) : NULL;
    CHECKF(p != NULL, "not JSON: %s", s ? s : "(null)");
    free(s);
    return p;
}

static int check_head(const cJSON *p, const char *object, const char *fp) {
    int ok = str_is(p, "id", "chatcmpl-1") && str_is(p, "object", object) && num_is(p, "created", 1700000000) &&
             str_is(p, "model", "gemma") && (fp ? str_is(p, "system_fingerprint", fp) : is_null(p, "system_fingerprint"));
    CHECKF(ok, "head of %s", object);
    return ok;
}

static void check_usage_cached(const cJSON *p, int pt, int ct, int cached) {
    const cJSON *u = get(p, "usage");
    CHECK(cJSON_IsObject(u) && n_keys(u) == 4 && num_is(u, "prompt_tokens", pt) && num_is(u, "completion_tokens", ct) &&
          num_is(u, "total_tokens", pt + ct));
    const cJSON *d = get(u, "prompt_tokens_details"); /* OpenAI's: the prompt tokens reused from the cache */
    CHECK(cJSON_IsObject(d) && n_keys(d) == 1 && num_is(d, "cached_tokens", cached));
}

static void check_usage(const cJSON *p, int pt, int ct) { check_usage_cached(p, pt, ct, 0); }

static void test_chat_response(void) {
    el_api_usage u = {12, 5, 4};
    cJSON *p = parse_free(el_api_chat_response("chatcmpl-1", "gemma", 1700000000L, "fp_el", "Hi \"there\"\n\xF0\x9F\x98\x80",
                                               SL("Hi \"there\"\n\xF0\x9F\x98\x80"), "stop", u, NULL));
    if (!p) return;
    check_head(p, "chat.completion", "fp_el");
    CHECK(n_keys(p) == 7);
    const cJSON *ch = get(p, "choices");
    CHECK(cJSON_IsArray(ch) && cJSON_GetArraySize(ch) == 1);
    const cJSON *c = cJSON_GetArrayItem(ch, 0);
    CHECK(n_keys(c) == 4 && num_is(c, "index", 0) && str_is(c, "finish_reason", "stop") && is_null(c, "logprobs"));
    const cJSON *m = get(c, "message");
    CHECK(n_keys(m) == 2 && str_is(m, "role", "assistant") && str_is(m, "content", "Hi \"there\"\n\xF0\x9F\x98\x80"));
    check_usage_cached(p, 12, 5, 4);
    cJSON_Delete(p);

    /* NULL fingerprint -> null; invalid UTF-8 in generated text -> U+FFFD */
    p = parse_free(el_api_chat_response("chatcmpl-1", "gemma", 1700000000L, NULL, "ab\xF0\x9F", 4, "length", u, NULL));
    if (!p) return;
    check_head(p, "chat.completion", NULL);
    c = cJSON_GetArrayItem(get(p, "choices"), 0);
    CHECK(str_is(c, "finish_reason", "length"));
    /* an incomplete character is one maximal ill-formed subpart: one U+FFFD */
    CHECK(str_is(get(c, "message"), "content", "ab\xEF\xBF\xBD"));
    cJSON_Delete(p);
}

static void test_completion_response(void) {
    el_api_usage u = {3, 16, 0};
    cJSON *p = parse_free(el_api_completion_response("chatcmpl-1", "gemma", 1700000000L, "fp", " there was", 10, "length", u, NULL));
    if (!p) return;
    check_head(p, "text_completion", "fp");
    const cJSON *c = cJSON_GetArrayItem(get(p, "choices"), 0);
    CHECK(cJSON_GetArraySize(get(p, "choices")) == 1);
    CHECK(n_keys(c) == 4 && str_is(c, "text", " there was") && num_is(c, "index", 0) &&
          str_is(c, "finish_reason", "length") && is_null(c, "logprobs"));
    check_usage(p, 3, 16);
    cJSON_Delete(p);
}

static void test_chat_chunks(void) {
    /* first chunk: role + content */
    cJSON *p = parse_free(el_api_chat_chunk("chatcmpl-1", "gemma", 1700000000L, "fp", "Hel", 3, true, NULL, NULL, NULL));
    if (!p) return;
    check_head(p, "chat.completion.chunk", "fp");
    CHECK(get(p, "usage") == NULL && n_keys(p) == 6);
    const cJSON *c = cJSON_GetArrayItem(get(p, "choices"), 0);
    CHECK(n_keys(c) == 4 && num_is(c, "index", 0) && is_null(c, "finish_reason") && is_null(c, "logprobs"));
    const cJSON *d = get(c, "delta");
    CHECK(n_keys(d) == 2 && str_is(d, "role", "assistant") && str_is(d, "content", "Hel"));
    cJSON_Delete(p);
    /* first chunk without text: content "" */
    p = parse_free(el_api_chat_chunk("chatcmpl-1", "gemma", 1700000000L, "fp", NULL, 0, true, NULL, NULL, NULL));
    d = get(cJSON_GetArrayItem(get(p, "choices"), 0), "delta");
    CHECK(n_keys(d) == 2 && str_is(d, "role", "assistant") && str_is(d, "content", ""));
    cJSON_Delete(p);
    /* middle chunk: content only */
    p = parse_free(el_api_chat_chunk("chatcmpl-1", "gemma", 1700000000L, "fp", "lo", 2, false, NULL, NULL, NULL));
    d = get(cJSON_GetArrayItem(get(p, "choices"), 0), "delta");
    CHECK(n_keys(d) == 1 && str_is(d, "content", "lo"));
    cJSON_Delete(p);
    /* last chunk: empty delta, finish_reason */
    p = parse_free(el_api_chat_chunk("chatcmpl-1", "gemma", 1700000000L, "fp", NULL, 0, false, "stop", NULL, NULL));
    c = cJSON_GetArrayItem(get(p, "choices"), 0);
    CHECK(cJSON_IsObject(get(c, "delta")) && n_keys(get(c, "delta")) == 0 && str_is(c, "finish_reason", "stop"));
    cJSON_Delete(p);
    /* usage chunk: choices [] and usage */
    el_api_usage u = {7, 9, 0};
    p = parse_free(el_api_chat_chunk("chatcmpl-1", "gemma", 1700000000L, "fp", NULL, 0, false, NULL, &u, NULL));
    check_head(p, "chat.completion.chunk", "fp");
    CHECK(cJSON_IsArray(get(p, "choices")) && cJSON_GetArraySize(get(p, "choices")) == 0);
    check_usage(p, 7, 9);
    cJSON_Delete(p);
    /* a piece ending mid-character never yields invalid JSON text */
    char *s = el_api_chat_chunk("chatcmpl-1", "gemma", 1700000000L, "fp", "\xE2\x82", 2, false, NULL, NULL, NULL);
    CHECK(s && strstr(s, "\xEF\xBF\xBD\"") && !strstr(s, "\xEF\xBF\xBD\xEF\xBF\xBD") && !strstr(s, "\xE2\x82\""));
    free(s);
    /* NULL id/model become "" */
    p = parse_free(el_api_chat_chunk(NULL, NULL, 0, NULL, "x", 1, false, NULL, NULL, NULL));
    CHECK(str_is(p, "id", "") && str_is(p, "model", "") && num_is(p, "created", 0));
    cJSON_Delete(p);
}

static void test_completion_chunks(void) {
    cJSON *p = parse_free(el_api_completion_chunk("chatcmpl-1", "gemma", 1700000000L, NULL, " the", 4, NULL, NULL, NULL));
    if (!p) return;
    check_head(p, "text_completion", NULL);
    const cJSON *c = cJSON_GetArrayItem(get(p, "choices"), 0);
    CHECK(n_keys(c) == 4 && str_is(c, "text", " the") && num_is(c, "index", 0) && is_null(c, "finish_reason") &&
          is_null(c, "logprobs"));
    cJSON_Delete(p);
    p = parse_free(el_api_completion_chunk("chatcmpl-1", "gemma", 1700000000L, NULL, NULL, 0, "length", NULL, NULL));
    c = cJSON_GetArrayItem(get(p, "choices"), 0);
    CHECK(str_is(c, "text", "") && str_is(c, "finish_reason", "length"));
    cJSON_Delete(p);
    el_api_usage u = {1, 2, 0};
    p = parse_free(el_api_completion_chunk("chatcmpl-1", "gemma", 1700000000L, NULL, NULL, 0, NULL, &u, NULL));
    check_head(p, "text_completion", NULL);
    CHECK(cJSON_GetArraySize(get(p, "choices")) == 0);
    check_usage(p, 1, 2);
    cJSON_Delete(p);
    /* control characters and quotes are escaped: one line, SSE-safe */
    char *s = el_api_completion_chunk("a\"b", "m\n", 5, "f", "x\r\ny\x01\"\\", 7, NULL, NULL, NULL);
    CHECK(s && !strchr(s, '\n') && !strchr(s, '\r'));
    p = parse_free(s);
    CHECK(str_is(p, "id", "a\"b") && str_is(p, "model", "m\n") &&
          str_is(cJSON_GetArrayItem(get(p, "choices"), 0), "text", "x\r\ny\x01\"\\"));
    cJSON_Delete(p);
    /* large created values and token counts survive */
    el_api_usage big = {1 << 30, 1 << 30, 0};
    p = parse_free(el_api_completion_response("i", "m", 4102444800L, "f", "t", 1, "stop", big, NULL));
    CHECK(num_is(p, "created", 4102444800.0) && num_is(get(p, "usage"), "total_tokens", 2147483648.0));
    cJSON_Delete(p);
}

/* parse -> build -> parse back, with the parsed strings */
static void test_round_trip(void) {
    el_api_request r;
    if (OK(CHAT, "{\"model\":\"m\\u00e9\\\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"\\u2028q\\t\"}]}", &r)) return;
    cJSON *p = parse_free(el_api_chat_response("id", r.model, 1, "fp", r.msgs[0].content, strlen(r.msgs[0].content), "stop", (el_api_usage){1, 1, 0}, NULL));
    CHECK(str_is(p, "model", "m\xC3\xA9\"x"));
    CHECK(str_is(get(cJSON_GetArrayItem(get(p, "choices"), 0), "message"), "content", "\xE2\x80\xA8q\t"));
    cJSON_Delete(p);
    el_api_request_free(&r);
}

/* ---- /tokenize and /detokenize bodies go through the same pipeline ---- */

static void tok_bad_(int line, bool detok, const char *body, size_t len, int status, const char *param, const char *sub) {
    el_api_tok_request q;
    el_api_error e;
    memset(&e, 0, sizeof e);
    int rc = detok ? el_api_parse_detokenize(body, len, &q, &e) : el_api_parse_tokenize(body, len, &q, &e);
    CHECKF(rc == -1, "line %d: expected failure for %.80s", line, body);
    if (rc == 0) { el_api_tok_request_free(&q); return; }
    CHECKF(q.content == NULL && q.tokens == NULL, "line %d: output not cleared", line);
    CHECKF(e.status == status, "line %d: status %d, want %d (%s)", line, e.status, status, e.message);
    CHECKF(param ? (e.param && !strcmp(e.param, param)) : e.param == NULL, "line %d: param %s", line,
           e.param ? e.param : "(null)");
    CHECKF(!sub || strstr(e.message, sub), "line %d: message '%s' lacks '%s'", line, e.message, sub);
}
#define TOK_BAD(body, status, param, sub) tok_bad_(__LINE__, false, body, strlen(body), status, param, sub)
#define DETOK_BAD(body, status, param, sub) tok_bad_(__LINE__, true, body, strlen(body), status, param, sub)

static void test_tokenize_bodies(void) {
    el_api_tok_request q;
    el_api_error e;
    /* the strict steps el_api_parse has: NUL escapes, bad UTF-8, trailing garbage, size */
    TOK_BAD("{\"content\":\"ab\\u0000cd\"}", 400, NULL, "NUL");
    TOK_BAD("{\"content\":\"ab\xC3\"}", 400, NULL, "UTF-8");
    TOK_BAD("{\"content\":\"ab\"} x", 400, NULL, "not valid JSON");
    TOK_BAD("{\"content\":\"ab\"}{}", 400, NULL, "not valid JSON");
    TOK_BAD("{\"content\":\"a\tb\"}", 400, NULL, "control character");
    tok_bad_(__LINE__, false, "{\"content\":\"a\0\"}", 15, 400, NULL, "NUL byte");
    TOK_BAD("[1]", 400, NULL, "JSON object");
    TOK_BAD("{}", 400, "content", "missing");
    TOK_BAD("{\"content\":5}", 400, "content", "expected a string");
    TOK_BAD("{\"content\":\"a\",\"content\":\"b\"}", 400, "content", "duplicate");
    TOK_BAD("{\"content\":\"a\",\"add_special\":1}", 400, "add_special", "boolean");
    TOK_BAD("{\"content\":\"a\",\"parse_special\":\"no\"}", 400, "parse_special", "boolean");
    TOK_BAD("{\"content\":\"a\",\"with_pieces\":1}", 400, "with_pieces", "boolean");
    TOK_BAD("{\"content\":\"a\",\"with_pieces\":true,\"with_pieces\":false}", 400, "with_pieces", "duplicate");
    size_t big = EL_API_MAX_BODY + 1;
    char *huge = malloc(big);
    if (huge) {
        memset(huge, ' ', big);
        memset(&e, 0, sizeof e);
        CHECK(el_api_parse_tokenize(huge, big, &q, &e) == -1 && e.status == 413);
        CHECK(el_api_parse_detokenize(huge, big, &q, &e) == -1 && e.status == 413);
        free(huge);
    }
    /* accepted: a BOM, null as "not given", the flags */
    const char *ok = "\xEF\xBB\xBF{\"content\":\"h\\u00e9llo\",\"add_special\":true,\"parse_special\":false,\"x\":null}";
    memset(&e, 0, sizeof e);
    CHECK(el_api_parse_tokenize(ok, strlen(ok), &q, &e) == 0);
    CHECK(q.content && q.content_len == 6 && !memcmp(q.content, "h\xC3\xA9llo", 6) && q.add_special && !q.parse_special);
    el_api_tok_request_free(&q);
    CHECK(el_api_parse_tokenize("{\"content\":\"\",\"add_special\":null}", 33, &q, &e) == 0);
    CHECK(q.content && q.content_len == 0 && !q.add_special && q.parse_special && !q.with_pieces);
    el_api_tok_request_free(&q);
    CHECK(el_api_parse_tokenize("{\"content\":\"x\",\"with_pieces\":true}", 34, &q, &e) == 0);
    CHECK(q.content && q.with_pieces);
    el_api_tok_request_free(&q);

    DETOK_BAD("{\"tokens\":[1,2]} x", 400, NULL, "not valid JSON");
    DETOK_BAD("{\"tokens\":[1,2],\"s\":\"\\u0000\"}", 400, NULL, "NUL");
    DETOK_BAD("{\"tokens\":\"1\"}", 400, "tokens", "expected an array");
    DETOK_BAD("{}", 400, "tokens", "missing");
    DETOK_BAD("{\"tokens\":[1,-1]}", 400, "tokens", "tokens[1]");
    DETOK_BAD("{\"tokens\":[1.5]}", 400, "tokens", "tokens[0]");
    DETOK_BAD("{\"tokens\":[\"1\"]}", 400, "tokens", "tokens[0]");
    DETOK_BAD("{\"tokens\":[2147483648]}", 400, "tokens", "tokens[0]");
    CHECK(el_api_parse_detokenize("{\"tokens\":[300,3,2147483647]}", 29, &q, &e) == 0);
    CHECK(q.n_tokens == 3 && q.tokens[0] == 300 && q.tokens[1] == 3 && q.tokens[2] == 2147483647);
    el_api_tok_request_free(&q);
    CHECK(el_api_parse_detokenize("{\"tokens\":[]}", 13, &q, &e) == 0 && q.n_tokens == 0);
    el_api_tok_request_free(&q);
}

/* ---- text goes by length: NUL bytes survive as \u0000 ---- */

static void test_nul_in_text(void) {
    el_api_usage u = {1, 3, 0};
    char *s = el_api_completion_response("i", "m", 1, "f", "et\0ab", 5, "length", u, NULL);
    CHECK(s && strstr(s, "\"text\":\"et\\u0000ab\""));
    free(s);
    s = el_api_chat_response("i", "m", 1, "f", "\0x", 2, "stop", u, NULL);
    CHECK(s && strstr(s, "\"content\":\"\\u0000x\""));
    free(s);
    s = el_api_chat_chunk("i", "m", 1, "f", "a\0", 2, false, NULL, NULL, NULL);
    CHECK(s && strstr(s, "\"content\":\"a\\u0000\""));
    free(s);
    s = el_api_completion_chunk("i", "m", 1, "f", "\0\0", 2, NULL, NULL, NULL);
    CHECK(s && strstr(s, "\"text\":\"\\u0000\\u0000\""));
    free(s);
    s = el_api_detokenize_response("et\0\xE2\x82", 5);
    CHECK(s && !strcmp(s, "{\"content\":\"et\\u0000\xEF\xBF\xBD\"}"));
    free(s);
    s = el_api_tokenize_response((const int32_t[]){1, 300, 0}, 3);
    CHECK(s && !strcmp(s, "{\"tokens\":[1,300,0]}"));
    free(s);
    s = el_api_tokenize_response(NULL, 0);
    CHECK(s && !strcmp(s, "{\"tokens\":[]}"));
    free(s);
    /* with_pieces: a whole character is a string (a NUL byte as \u0000), part of one its bytes */
    {
        const char pieces[] = "He\0\xE2\x82\xAC\xF0\x9F";
        const size_t off[] = {0, 2, 3, 3, 6, 8};
        s = el_api_tokenize_pieces_response((const int32_t[]){7, 0, 5, 9, 300}, 5, pieces, off);
        CHECK(s && !strcmp(s, "{\"tokens\":[{\"id\":7,\"piece\":\"He\"},{\"id\":0,\"piece\":\"\\u0000\"},"
                              "{\"id\":5,\"piece\":\"\"},{\"id\":9,\"piece\":\"\xE2\x82\xAC\"},"
                              "{\"id\":300,\"piece\":[240,159]}]}"));
        free(s);
        s = el_api_tokenize_pieces_response(NULL, 0, "", (const size_t[]){0});
        CHECK(s && !strcmp(s, "{\"tokens\":[]}"));
        free(s);
    }
    /* every byte value through the escaper parses back (except NUL, which cJSON cannot hold) */
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)(i == 0 ? 1 : i);
    s = el_api_completion_response("i", "m", 1, "f", all, 128, "stop", u, NULL);
    cJSON *p = parse_free(s);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(get(p, "choices"), 0), "text");
    CHECK(cJSON_IsString(t) && strlen(t->valuestring) == 128 && !memcmp(t->valuestring, all, 128));
    cJSON_Delete(p);
}

/* ---- UTF-8: maximal subparts, the incomplete tail ---- */

static void test_utf8_tail(void) {
    el_buf b = {0};
    CHECK(el_utf8_sanitize("ab\xF0\x9F\x98", 5, &b) && b.len == 5 && !memcmp(b.p, "ab\xEF\xBF\xBD", 5));
    el_buf_free(&b);
    /* C0 80 (overlong) is two subparts; E0 80 too (80 is not allowed after E0); ED A0 (surrogate) too */
    CHECK(el_utf8_sanitize("\xC0\x80|\xE0\x80|\xED\xA0|\xF4\x90", 11, &b));
    CHECK(b.len == 8 * 3 + 3);
    el_buf_free(&b);
    CHECK(el_utf8_sanitize("\xE2\x82" "A\xE2\x82\xAC", 6, &b) && b.len == 7 &&
          !memcmp(b.p, "\xEF\xBF\xBD" "A\xE2\x82\xAC", 7));
    el_buf_free(&b);
    CHECK(el_utf8_sanitize("a\0b", 3, &b) && b.len == 3 && b.p[1] == 0);
    el_buf_free(&b);
    CHECK(el_utf8_incomplete_tail("ab\xE2\x82", 4) == 2);
    CHECK(el_utf8_incomplete_tail("ab\xF0\x9F\x98", 5) == 3);
    CHECK(el_utf8_incomplete_tail("ab\xF0", 3) == 1);
    CHECK(el_utf8_incomplete_tail("ab\xE2\x82\xAC", 5) == 0);
    CHECK(el_utf8_incomplete_tail("ab\x82", 3) == 0);       /* a stray continuation: not a prefix */
    CHECK(el_utf8_incomplete_tail("ab\xE0\x80", 4) == 0);   /* can never complete */
    CHECK(el_utf8_incomplete_tail("ab\xC0", 3) == 0);
    CHECK(el_utf8_incomplete_tail("", 0) == 0);
}

/* ---- logprobs, logit_bias, echo, best_of, suffix, default max_tokens ---- */

static void test_sampling_fields(void) {
    el_api_request r;
    if (!OK(COMP, "{\"prompt\":\"a\"}", &r)) { CHECK(r.max_tokens == 16); el_api_request_free(&r); }
    if (!OK(CHAT, chat_with("\"logprobs\":true,\"top_logprobs\":3"), &r)) {
        CHECK(r.logprobs && r.top_logprobs == 3);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"logprobs\":false"), &r)) { CHECK(!r.logprobs); el_api_request_free(&r); }
    BAD(CHAT, chat_with("\"top_logprobs\":2"), 400, "top_logprobs", "needs 'logprobs'");
    BAD(CHAT, chat_with("\"logprobs\":true,\"top_logprobs\":21"), 400, "top_logprobs", NULL);
    BAD(CHAT, chat_with("\"logprobs\":1"), 400, "logprobs", "boolean");
    if (!OK(COMP, "{\"prompt\":\"a\",\"logprobs\":0}", &r)) {
        CHECK(r.logprobs && r.top_logprobs == 0);
        el_api_request_free(&r);
    }
    if (!OK(COMP, "{\"prompt\":\"a\",\"logprobs\":5,\"max_tokens\":3}", &r)) {
        CHECK(r.logprobs && r.top_logprobs == 5 && r.max_tokens == 3);
        el_api_request_free(&r);
    }
    BAD(COMP, "{\"prompt\":\"a\",\"logprobs\":6}", 400, "logprobs", NULL);
    BAD(COMP, "{\"prompt\":\"a\",\"logprobs\":true}", 400, "logprobs", NULL);
    if (!OK(COMP, "{\"prompt\":\"a\",\"top_logprobs\":2}", &r)) { /* a chat field: unknown here, ignored */
        CHECK(!r.logprobs);
        el_api_request_free(&r);
    }
    if (!OK(COMP, "{\"prompt\":\"a\",\"echo\":true}", &r)) { CHECK(r.echo); el_api_request_free(&r); }
    BAD(COMP, "{\"prompt\":\"a\",\"echo\":true,\"logprobs\":1}", 400, "echo", "not supported");
    BAD(COMP, "{\"prompt\":\"a\",\"echo\":1}", 400, "echo", NULL);
    BAD(COMP, "{\"prompt\":\"a\",\"best_of\":2}", 400, "best_of", NULL);
    if (!OK(COMP, "{\"prompt\":\"a\",\"best_of\":1,\"suffix\":\"\"}", &r)) el_api_request_free(&r);
    BAD(COMP, "{\"prompt\":\"a\",\"suffix\":\"x\"}", 400, "suffix", "not supported");
    BAD(CHAT, chat_with("\"n\":2"), 400, "n", NULL);
    if (!OK(CHAT, chat_with("\"logit_bias\":{\"12\":5,\"0\":-100,\"7\":100.0}"), &r)) {
        CHECK(r.n_logit_bias == 3 && r.logit_bias_id[0] == 12 && r.logit_bias[0] == 5.0f && r.logit_bias_id[1] == 0 &&
              r.logit_bias[1] == -100.0f && r.logit_bias[2] == 100.0f);
        el_api_request_free(&r);
    }
    /* OpenAI's object: a key of digits is an id (and must be one); any other key is text (llama-server's) */
    if (!OK(CHAT, chat_with("\"logit_bias\":{\"x\":1,\"5\":-2,\" The\":-100}"), &r)) {
        CHECK(r.n_logit_bias == 1 && r.logit_bias_id[0] == 5 && r.logit_bias[0] == -2.0f);
        CHECK(r.n_logit_bias_text == 2 && !strcmp(r.logit_bias_text[0], "x") && r.logit_bias_text_bias[0] == 1.0f &&
              !strcmp(r.logit_bias_text[1], " The") && r.logit_bias_text_bias[1] == -100.0f);
        el_api_request_free(&r);
    }
    BAD(CHAT, chat_with("\"logit_bias\":{\"\":1}"), 400, "logit_bias", "text key");
    BAD(CHAT, chat_with("\"logit_bias\":{\"99999999999\":1}"), 400, "logit_bias", "not a token id");
    BAD(CHAT, chat_with("\"logit_bias\":{\"x\":101}"), 400, "logit_bias", NULL);
    BAD(CHAT, chat_with("\"logit_bias\":{\"-1\":1}"), 400, "logit_bias", NULL);
    BAD(CHAT, chat_with("\"logit_bias\":{\"1\":101}"), 400, "logit_bias", NULL);
    BAD(CHAT, chat_with("\"logit_bias\":{\"1\":\"5\"}"), 400, "logit_bias", NULL);
    BAD(CHAT, chat_with("\"logit_bias\":{\"1\":1,\"01\":2}"), 400, "logit_bias", "twice");
    BAD(CHAT, chat_with("\"logit_bias\":[1]"), 400, "logit_bias", NULL);
}

/* llama-server's chat fields: verbose, timings_per_token, add_generation_prompt / continue_final_message
 * (parsed here; the chat route refuses the two it does not do), and the member splice of its replies. */
static void test_llama_fields(void) {
    el_api_request r;
    if (!OK(CHAT, chat_with("\"verbose\":true,\"timings_per_token\":true,\"add_generation_prompt\":true"), &r)) {
        CHECK(r.verbose && r.timings_per_token && !r.no_generation_prompt && !r.continue_final);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"add_generation_prompt\":false,\"continue_final_message\":true"), &r)) {
        CHECK(r.no_generation_prompt && r.continue_final);
        el_api_request_free(&r);
    }
    if (!OK(COMP, "{\"prompt\":\"a\",\"verbose\":true}", &r)) { CHECK(r.verbose); el_api_request_free(&r); }
    BAD(CHAT, chat_with("\"add_generation_prompt\":true,\"continue_final_message\":true"), 400,
        "continue_final_message", "cannot set both");
    BAD(CHAT, chat_with("\"continue_final_message\":1"), 400, "continue_final_message", NULL);
    BAD(CHAT, chat_with("\"add_generation_prompt\":\"no\""), 400, "add_generation_prompt", NULL);
    BAD(CHAT, chat_with("\"verbose\":1"), 400, "verbose", NULL);
    BAD(COMP, "{\"prompt\":\"a\",\"timings_per_token\":\"yes\"}", 400, "timings_per_token", NULL);
    char *j = el_api_with_member(strdup("{\"a\":\"x\\u0000y\"}\n"), "__verbose", strdup("{\"prompt\":\"p\"}"));
    CHECK(j && !strcmp(j, "{\"a\":\"x\\u0000y\",\"__verbose\":{\"prompt\":\"p\"}}"));
    free(j);
    j = el_api_with_member(strdup("{}"), "timings", strdup("[1]"));
    CHECK(j && !strcmp(j, "{\"timings\":[1]}"));
    free(j);
    CHECK(el_api_with_member(strdup("{}"), "k", strdup("{bad")) == NULL);
    CHECK(el_api_with_member(strdup("[1]"), "k", strdup("1")) == NULL);
    CHECK(el_api_with_member(NULL, "k", strdup("1")) == NULL);
}

static void test_logprobs_json(void) {
    const el_api_top_lp top[2] = {{"\xE2\x96\x81the", 6, -0.5f, 0}, {"\xE2", 1, -1.25f, 0}};
    const el_api_token_lp t[2] = {{"\xE2\x96\x81the", 6, -0.5f, 2, top, 0}, {"\0", 1, -2.0f, 0, NULL, 0}};
    char *s = el_api_logprobs_json(EL_API_CHAT, t, 2, NULL);
    cJSON *p = s ? cJSON_Parse(s) : NULL;
    free(s);
    const cJSON *c = get(p, "content");
    CHECK(cJSON_IsArray(c) && cJSON_GetArraySize(c) == 2 && is_null(p, "refusal"));
    const cJSON *e0 = cJSON_GetArrayItem(c, 0);
    CHECK(str_is(e0, "token", "\xE2\x96\x81the") && num_is(e0, "logprob", -0.5));
    CHECK(cJSON_GetArraySize(get(e0, "bytes")) == 6 && cJSON_GetArrayItem(get(e0, "bytes"), 0)->valueint == 0xE2);
    const cJSON *tl = get(e0, "top_logprobs");
    CHECK(cJSON_GetArraySize(tl) == 2 && str_is(cJSON_GetArrayItem(tl, 1), "token", "\xEF\xBF\xBD") &&
          num_is(cJSON_GetArrayItem(tl, 1), "logprob", -1.25));
    CHECK(cJSON_GetArraySize(get(cJSON_GetArrayItem(c, 1), "top_logprobs")) == 0);
    cJSON_Delete(p);

    size_t off = 3;
    s = el_api_logprobs_json(EL_API_COMPLETION, t, 2, &off);
    p = s ? cJSON_Parse(s) : NULL;
    free(s);
    CHECK(cJSON_GetArraySize(get(p, "tokens")) == 2 &&
          cJSON_IsString(cJSON_GetArrayItem(get(p, "tokens"), 1)));
    CHECK(cJSON_GetArrayItem(get(p, "token_logprobs"), 1)->valuedouble == -2.0);
    const cJSON *tops = get(p, "top_logprobs");
    CHECK(cJSON_GetArraySize(tops) == 2 && num_is(cJSON_GetArrayItem(tops, 0), "\xE2\x96\x81the", -0.5) &&
          cJSON_GetArraySize(cJSON_GetArrayItem(tops, 1)) == 0);
    const cJSON *to = get(p, "text_offset");
    CHECK(cJSON_GetArraySize(to) == 2 && cJSON_GetArrayItem(to, 0)->valuedouble == 3 &&
          cJSON_GetArrayItem(to, 1)->valuedouble == 7 && off == 8); /* "▁the" is 4 code points, NUL 1 */
    cJSON_Delete(p);
    /* chunks with logprobs carry them in place of null */
    s = el_api_chat_chunk("i", "m", 1, "f", "x", 1, false, NULL, NULL, "{\"content\":[],\"refusal\":null}");
    p = parse_free(s);
    CHECK(cJSON_IsObject(get(cJSON_GetArrayItem(get(p, "choices"), 0), "logprobs")));
    cJSON_Delete(p);
}

/* ---- llama-server /completion ---- */

static void test_native_defaults_and_prompts(void) {
    el_api_request r;
    if (!OK(NAT, "{\"prompt\":\"Once\"}", &r)) {
        CHECK(r.kind == NAT && r.n_parts == 1 && !strcmp(r.parts[0].text, "Once"));
        /* llama-server's defaults */
        CHECK(r.max_tokens == -1 && !r.has_max_tokens && fabsf(r.temperature - 0.8f) < 1e-6f && !r.has_temperature);
        CHECK(r.top_k == 40 && fabsf(r.top_p - 0.95f) < 1e-6f && fabsf(r.min_p - 0.05f) < 1e-6f);
        CHECK(r.repeat_penalty == 1.0f && r.repeat_last_n == 64 && r.cache_prompt && !r.ignore_eos);
        CHECK(r.n_probs == 0 && r.id_slot == -1 && !r.return_tokens && !r.has_seed && r.n_resp_fields == 0);
        el_api_request_free(&r);
    }
    if (!OK(NAT, "{\"prompt\":[1, \"a b\", 2, 0]}", &r)) {
        CHECK(r.n_parts == 4 && !r.parts[0].text && r.parts[0].tok == 1 && !strcmp(r.parts[1].text, "a b"));
        CHECK(!r.parts[2].text && r.parts[2].tok == 2 && !r.parts[3].text && r.parts[3].tok == 0);
        el_api_request_free(&r);
    }
    if (!OK(NAT, "{\"prompt\":[[5, 6]]}", &r)) { /* one prompt given as a list of one */
        CHECK(r.n_parts == 2 && r.parts[1].tok == 6);
        el_api_request_free(&r);
    }
    if (!OK(NAT, "{\"prompt\":[\"only\"]}", &r)) {
        CHECK(r.n_parts == 1 && !strcmp(r.parts[0].text, "only"));
        el_api_request_free(&r);
    }
    BAD(NAT, "{}", 400, "prompt", "missing");
    BAD(NAT, "{\"prompt\":null}", 400, "prompt", "missing");
    BAD(NAT, "{\"prompt\":[]}", 400, "prompt", "empty");
    BAD(NAT, "{\"prompt\":[-1]}", 400, "prompt", "token id");
    BAD(NAT, "{\"prompt\":[2147483648]}", 400, "prompt", "token id");
    BAD(NAT, "{\"prompt\":[1.5]}", 400, "prompt", "token id");
    BAD(NAT, "{\"prompt\":[true]}", 400, "prompt", "prompt[0]");
    BAD(NAT, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt", "several prompts");
    BAD(NAT, "{\"prompt\":[[1],[2]]}", 400, "prompt", "several prompts");
    BAD(NAT, "{\"prompt\":[{\"prompt_string\":\"x\"}]}", 400, "prompt", "several prompts");
    BAD(NAT, "{\"prompt\":{}}", 400, "prompt", NULL);
    BAD(NAT, "{\"prompt\":5}", 400, "prompt", NULL);
    BAD(NAT, "{\"prompt\":\"a\",\"prompt\":\"b\"}", 400, "prompt", "duplicate");
    /* too many parts */
    size_t cap = 16 + 2 * (size_t)(EL_API_MAX_PROMPT_PARTS + 1);
    char *big = malloc(cap);
    if (big) {
        size_t o = (size_t)snprintf(big, cap, "{\"prompt\":[");
        for (int i = 0; i <= EL_API_MAX_PROMPT_PARTS; i++) { big[o++] = '1'; big[o++] = ','; }
        big[o - 1] = ']';
        big[o++] = '}';
        big[o] = 0;
        BAD(NAT, big, 400, "prompt", "at most");
        free(big);
    }
}

static void test_native_fields(void) {
    el_api_request r;
    const char *full = "{\"prompt\":\"x\",\"n_predict\":7,\"temperature\":0.3,\"top_k\":5,\"top_p\":0.5,"
                       "\"min_p\":0.2,\"repeat_penalty\":1.3,\"repeat_last_n\":-1,\"presence_penalty\":1,"
                       "\"frequency_penalty\":-1,\"seed\":42,\"stop\":[\"\\n\",\"END\"],\"n_probs\":3,"
                       "\"ignore_eos\":true,\"cache_prompt\":false,\"return_tokens\":true,\"stream\":true,"
                       "\"id_slot\":1,\"model\":\"m\",\"response_fields\":[\"content\",\"generation_settings/n_predict\"],"
                       "\"logit_bias\":[[15,false],[16,-2.5]],\"mirostat\":0,\"typical_p\":1,\"grammar\":\"\","
                       "\"samplers\":null,\"lora\":[],\"unknown_field\":{\"x\":1}}";
    if (!OK(NAT, full, &r)) {
        CHECK(r.max_tokens == 7 && r.has_max_tokens && fabsf(r.temperature - 0.3f) < 1e-6f && r.has_temperature);
        CHECK(r.top_k == 5 && fabsf(r.top_p - 0.5f) < 1e-6f && fabsf(r.min_p - 0.2f) < 1e-6f);
        CHECK(fabsf(r.repeat_penalty - 1.3f) < 1e-6f && r.repeat_last_n == -1);
        CHECK(r.presence_penalty == 1 && r.frequency_penalty == -1 && r.has_seed && r.seed == 42);
        CHECK(r.n_stop == 2 && !strcmp(r.stop[1], "END") && r.n_probs == 3 && r.ignore_eos && !r.cache_prompt);
        CHECK(r.return_tokens && r.stream && r.id_slot == 1 && !strcmp(r.model, "m"));
        CHECK(r.n_resp_fields == 2 && !strcmp(r.resp_fields[1], "generation_settings/n_predict"));
        CHECK(r.n_logit_bias == 2 && r.logit_bias_id[0] == 15 && r.logit_bias[0] < -1e29f &&
              r.logit_bias_id[1] == 16 && r.logit_bias[1] == -2.5f);
        el_api_request_free(&r);
    }
    /* max_tokens is n_predict's other name; n_predict wins */
    if (!OK(NAT, "{\"prompt\":\"x\",\"max_tokens\":4}", &r)) { CHECK(r.max_tokens == 4); el_api_request_free(&r); }
    if (!OK(NAT, "{\"prompt\":\"x\",\"max_tokens\":4,\"n_predict\":9}", &r)) {
        CHECK(r.max_tokens == 9);
        el_api_request_free(&r);
    }
    /* llama-server's conventions: negative temperature is greedy, seed -1 / 0xFFFFFFFF random, top_k < 0 off */
    if (!OK(NAT, "{\"prompt\":\"x\",\"temperature\":-1,\"seed\":-1,\"top_k\":-1,\"n_predict\":-1}", &r)) {
        CHECK(r.temperature == 0 && !r.has_seed && r.top_k == 0 && r.max_tokens == -1);
        el_api_request_free(&r);
    }
    if (!OK(NAT, "{\"prompt\":\"x\",\"seed\":4294967295}", &r)) { CHECK(!r.has_seed); el_api_request_free(&r); }
    if (!OK(NAT, "{\"prompt\":\"x\",\"stop\":\"###\",\"logit_bias\":{\"3\":-5}}", &r)) {
        CHECK(r.n_stop == 1 && r.n_logit_bias == 1 && r.logit_bias_id[0] == 3 && r.logit_bias[0] == -5);
        el_api_request_free(&r);
    }
    BAD(NAT, "{\"prompt\":\"x\",\"n_predict\":0}", 400, "n_predict", "not supported");
    BAD(NAT, "{\"prompt\":\"x\",\"n_predict\":-2}", 400, "n_predict", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"max_tokens\":0}", 400, "max_tokens", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"n_predict\":1.5}", 400, "n_predict", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"temperature\":3}", 400, "temperature", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"top_k\":\"5\"}", 400, "top_k", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"top_p\":1.5}", 400, "top_p", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"min_p\":-0.5}", 400, "min_p", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"repeat_penalty\":11}", 400, "repeat_penalty", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"repeat_last_n\":-2}", 400, "repeat_last_n", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"seed\":-2}", 400, "seed", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"n_probs\":-1}", 400, "n_probs", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"n_probs\":true}", 400, "n_probs", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"id_slot\":-2}", 400, "id_slot", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"ignore_eos\":1}", 400, "ignore_eos", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"cache_prompt\":\"yes\"}", 400, "cache_prompt", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"return_tokens\":null,\"stream\":0}", 400, "stream", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"stop\":[1]}", 400, "stop", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"logit_bias\":[[1]]}", 400, "logit_bias", "pair");
    BAD(NAT, "{\"prompt\":\"x\",\"logit_bias\":[[\"\",1]]}", 400, "logit_bias", "text key");
    BAD(NAT, "{\"prompt\":\"x\",\"logit_bias\":[[{},1]]}", 400, "logit_bias", "nor a text");
    BAD(NAT, "{\"prompt\":\"x\",\"logit_bias\":[[1.5,1]]}", 400, "logit_bias", "nor a text");
    BAD(NAT, "{\"prompt\":\"x\",\"logit_bias\":[[-1,1]]}", 400, "logit_bias", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"logit_bias\":[[1,true]]}", 400, "logit_bias", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"logit_bias\":[[1,1e7]]}", 400, "logit_bias", NULL);
    /* llama-server's: an id given again adds up; text keys are kept for the server to tokenize */
    if (!OK(NAT, "{\"prompt\":\"x\",\"logit_bias\":[[1,1],[\" the\",-3],[1,2],[\"é\",false]]}", &r)) {
        CHECK(r.n_logit_bias == 1 && r.logit_bias_id[0] == 1 && r.logit_bias[0] == 3.0f);
        CHECK(r.n_logit_bias_text == 2 && !strcmp(r.logit_bias_text[0], " the") && r.logit_bias_text_bias[0] == -3.0f &&
              !strcmp(r.logit_bias_text[1], "\xc3\xa9") && r.logit_bias_text_bias[1] < -1e29f);
        el_api_request_free(&r);
    }
    {
        char big[400];
        snprintf(big, sizeof big, "{\"prompt\":\"x\",\"logit_bias\":[[\"%0300d\",1]]}", 0);
        BAD(NAT, big, 400, "logit_bias", "1..256 bytes");
    }
    BAD(NAT, "{\"prompt\":\"x\",\"logit_bias\":\"x\"}", 400, "logit_bias", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"response_fields\":\"content\"}", 400, "response_fields", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"response_fields\":[null]}", 400, "response_fields", NULL);
    /* samplers edgellm lacks: 400 naming them, unless off */
    BAD(NAT, "{\"prompt\":\"x\",\"mirostat\":2}", 400, "mirostat", "not supported");
    BAD(NAT, "{\"prompt\":\"x\",\"typical_p\":0.5}", 400, "typical_p", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"dry_multiplier\":0.8}", 400, "dry_multiplier", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"xtc_probability\":0.2}", 400, "xtc_probability", NULL);
    /* grammar / json_schema are supported (docs/STRUCTURED.md): invalid ones are 400 with the place */
    BAD(NAT, "{\"prompt\":\"x\",\"grammar\":\"root ::= x\"}", 400, "grammar", "line 1, column 10: undefined rule 'x'");
    BAD(NAT, "{\"prompt\":\"x\",\"json_schema\":{\"type\":\"nope\"}}", 400, "json_schema", "unknown type 'nope'");
    BAD(NAT, "{\"prompt\":\"x\",\"json_schema\":{},\"grammar\":\"root ::= \\\"a\\\"\"}", 400, "grammar", "not both");
    BAD(CHAT, "{" MSG ",\"response_format\":{\"type\":\"yaml\"}}", 400, "response_format", "not supported");
    BAD(CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\"}}", 400, "response_format", "expected an object");
    BAD(COMP, "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
              "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":2,\"maximum\":1}}}}}}",
        400, "response_format", "at /a: no integer");
    {
        el_api_request rq;
        el_api_error ae;
        const char *b = "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"strict\":true,"
                        "\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"required\":[\"a\"]}}}}";
        CHECK(el_api_parse(CHAT, b, strlen(b), &rq, &ae) == 0 && rq.grammar && strstr(rq.grammar, "root ::="));
        el_api_request_free(&rq);
        b = "{" MSG ",\"response_format\":{\"type\":\"text\"}}";
        CHECK(el_api_parse(CHAT, b, strlen(b), &rq, &ae) == 0 && !rq.grammar);
        el_api_request_free(&rq);
        b = "{" MSG ",\"response_format\":{\"type\":\"json_object\"}}";
        CHECK(el_api_parse(CHAT, b, strlen(b), &rq, &ae) == 0 && rq.grammar && strstr(rq.grammar, "root ::= object"));
        el_api_request_free(&rq);
    }
    BAD(NAT, "{\"prompt\":\"x\",\"samplers\":[\"top_k\"]}", 400, "samplers", NULL);
    /* "lora" (serve --lora; ids checked against the registry by the server): the list's own shape here */
    BAD(NAT, "{\"prompt\":\"x\",\"lora\":[{\"id\":32,\"scale\":1}]}", 400, "lora.id", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"lora\":[{\"id\":0,\"scale\":-1}]}", 400, "lora.scale", NULL);
    BAD(CHAT, "{" MSG ",\"lora\":{\"id\":0}}", 400, "lora", NULL);
    BAD(COMP, "{\"prompt\":\"x\",\"lora\":[{\"scale\":1}]}", 400, "lora", NULL);
    {
        el_api_request rq;
        el_api_error ae;
        const char *b = "{\"prompt\":\"x\",\"lora\":[{\"id\":3,\"scale\":0.5},{\"id\":1},{\"id\":3,\"scale\":2}]}";
        CHECK(el_api_parse_native(b, strlen(b), &rq, &ae) == 0 && rq.has_lora && rq.n_lora == 2 && rq.lora_id[0] == 3 &&
              rq.lora_scale[0] == 2.0f && rq.lora_id[1] == 1 && rq.lora_scale[1] == 0.0f);
        el_api_request_free(&rq);
        b = "{" MSG ",\"lora\":[]}";
        CHECK(el_api_parse(CHAT, b, strlen(b), &rq, &ae) == 0 && !rq.has_lora);
        el_api_request_free(&rq);
    }
    BAD(NAT, "{\"prompt\":\"x\",\"n_keep\":-1}", 400, "n_keep", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"post_sampling_probs\":true}", 400, "post_sampling_probs", NULL);
    BAD(NAT, "{\"prompt\":\"x\",\"mirostat\":\"0\"}", 400, "mirostat", NULL);
    /* the shared pipeline */
    BAD(NAT, "{\"prompt\":\"x\",}", 400, NULL, "not valid JSON");
    BAD(NAT, "[\"prompt\"]", 400, NULL, "object");
    BADN(NAT, "{\"prompt\":\"\xC0\xAF\"}", SL("{\"prompt\":\"\xC0\xAF\"}"), 400, NULL, "UTF-8");
    /* the OpenAI parsers do not take the native kind */
    el_api_error e;
    CHECK(el_api_parse(NAT, "{\"prompt\":\"x\"}", 14, &r, &e) == -1 && e.status == 500);
}

static void test_native_builders(void) {
    const el_api_top_lp top[1] = {{"ab", 2, -0.25f, 9}};
    const el_api_token_lp t[1] = {{"a\0b", 3, -0.5f, 1, top, 8}};
    cJSON *p = parse_free(el_api_native_probs_json(t, 1));
    const cJSON *e0 = cJSON_GetArrayItem(p, 0);
    CHECK(cJSON_GetArraySize(p) == 1 && num_is(e0, "id", 8) && num_is(e0, "logprob", -0.5));
    CHECK(cJSON_GetArraySize(get(e0, "bytes")) == 3 && cJSON_GetArrayItem(get(e0, "bytes"), 1)->valueint == 0);
    CHECK(num_is(cJSON_GetArrayItem(get(e0, "top_logprobs"), 0), "id", 9) &&
          str_is(cJSON_GetArrayItem(get(e0, "top_logprobs"), 0), "token", "ab"));
    cJSON_Delete(p);

    const int32_t ids[3] = {5, 6, 7};
    el_api_native_result r;
    memset(&r, 0, sizeof r);
    r.content = "Hi\nthere";
    r.len = 8;
    r.tokens = ids;
    r.n_tokens = 3;
    r.stop = true;
    r.model = "alias";
    r.id_slot = 1;
    r.n_prompt = 4;
    r.n_predicted = 3;
    r.stop_type = "word";
    r.stopping_word = "END";
    r.prompt = "<s> x";
    r.prompt_len = 5;
    r.prompt_ms = 20;
    r.predicted_ms = 30;
    r.settings = "{\"n_predict\":3,\"temperature\":0}";
    p = parse_free(el_api_native_response(&r, NULL, 0));
    CHECK(str_is(p, "content", "Hi\nthere") && cJSON_GetArraySize(get(p, "tokens")) == 3 && num_is(p, "id_slot", 1));
    CHECK(cJSON_IsTrue(get(p, "stop")) && str_is(p, "model", "alias") && num_is(p, "tokens_predicted", 3));
    CHECK(num_is(p, "tokens_evaluated", 4) && str_is(p, "stop_type", "word") && str_is(p, "stopping_word", "END"));
    CHECK(cJSON_IsTrue(get(p, "has_new_line")) && cJSON_IsFalse(get(p, "truncated")) && str_is(p, "prompt", "<s> x"));
    const cJSON *tm = get(p, "timings");
    CHECK(num_is(tm, "prompt_n", 4) && num_is(tm, "prompt_ms", 20) && num_is(tm, "prompt_per_token_ms", 5) &&
          num_is(tm, "prompt_per_second", 200) && num_is(tm, "predicted_n", 3) && num_is(tm, "predicted_per_token_ms", 10) &&
          num_is(tm, "predicted_per_second", 100) && num_is(tm, "cache_n", 0));
    CHECK(num_is(get(p, "generation_settings"), "n_predict", 3) && get(p, "completion_probabilities") == NULL);
    cJSON_Delete(p);
    /* response_fields: a subset, "a/b" lifted to the top level, unknown names left out */
    char *f[4] = {"content", "generation_settings/n_predict", "no_such", "timings/no_such"};
    p = parse_free(el_api_native_response(&r, f, 4));
    CHECK(n_keys(p) == 2 && str_is(p, "content", "Hi\nthere") && num_is(p, "generation_settings/n_predict", 3));
    cJSON_Delete(p);
    /* a stream chunk: no final-only fields */
    r.stop = false;
    r.content = "a\0b";
    r.len = 3;
    p = parse_free(el_api_native_response(&r, NULL, 0));
    CHECK(cJSON_IsFalse(get(p, "stop")) && get(p, "timings") == NULL && get(p, "stop_type") == NULL);
    CHECK(cJSON_IsString(get(p, "content")) && get(p, "content")->valuestring[0] == 'a');
    cJSON_Delete(p);
}

static void test_role_chunk_and_errors(void) {
    cJSON *p = parse_free(el_api_chat_role_chunk("id", "m", 1, "fp"));
    const cJSON *c = cJSON_GetArrayItem(get(p, "choices"), 0);
    const cJSON *d = get(c, "delta");
    CHECK(n_keys(d) == 2 && str_is(d, "role", "assistant") && is_null(d, "content") && is_null(c, "finish_reason"));
    cJSON_Delete(p);
    el_api_error e;
    memset(&e, 0, sizeof e);
    el_api_set_error(&e, 400, "invalid_request_error", "max_tokens", "context_length_exceeded", "too long");
    e.n_prompt_tokens = 900;
    e.n_ctx = 512;
    p = parse_free(el_api_error_json(&e));
    const cJSON *o = get(p, "error");
    CHECK(str_is(o, "code", "context_length_exceeded") && num_is(o, "n_prompt_tokens", 900) && num_is(o, "n_ctx", 512));
    cJSON_Delete(p);
    p = parse_free(el_api_stream_error_json(&e));
    o = get(p, "error");
    CHECK(num_is(o, "code", 400) && str_is(o, "message", "too long") && str_is(o, "type", "invalid_request_error") &&
          num_is(o, "n_ctx", 512));
    cJSON_Delete(p);
    el_api_set_error(&e, 503, "server_error", NULL, "cancelled", "stopping");
    e.n_ctx = 0;
    p = parse_free(el_api_stream_error_json(&e));
    o = get(p, "error");
    CHECK(num_is(o, "code", 503) && str_is(o, "type", "unavailable_error") && get(o, "n_ctx") == NULL);
    cJSON_Delete(p);
    p = parse_free(el_api_error_json(&e));
    CHECK(get(get(p, "error"), "n_ctx") == NULL);
    cJSON_Delete(p);
}

/* ---- embeddings bodies (el_api_parse_embeddings) and replies ---- */

static int embd(const char *body, el_api_embd_request *q, el_api_error *e) {
    memset(e, 0, sizeof *e);
    return el_api_parse_embeddings(body, strlen(body), q, e);
}

static void embd_bad_(int line, const char *body, const char *param, const char *sub) {
    el_api_embd_request q;
    el_api_error e;
    int rc = embd(body, &q, &e);
    CHECKF(rc == -1 && e.status == 400 && q.inputs == NULL && q.model == NULL, "line %d: %.80s: rc %d status %d", line,
           body, rc, e.status);
    CHECKF(param ? e.param && !strcmp(e.param, param) : !e.param, "line %d: param %s", line, e.param ? e.param : "(null)");
    CHECKF(!sub || strstr(e.message, sub), "line %d: message '%s' lacks '%s'", line, e.message, sub);
    el_api_embd_request_free(&q);
}
#define EMBD_BAD(body, param, sub) embd_bad_(__LINE__, body, param, sub)

static void test_embeddings_bodies(void) {
    el_api_embd_request q;
    el_api_error e;
    CHECK(embd("{\"input\":\"hello\"}", &q, &e) == 0 && q.n_inputs == 1 && q.oai && !q.base64 && q.normalize == 2 &&
          q.dimensions == 0 && q.inputs[0].n_parts == 1 && !strcmp(q.inputs[0].parts[0].text, "hello"));
    el_api_embd_request_free(&q);
    /* an array holding an id: one input of ids and text, in order */
    CHECK(embd("{\"input\":[12,\"a b\",7],\"encoding_format\":\"base64\",\"model\":\"m\",\"user\":\"u\"}", &q, &e) == 0 &&
          q.n_inputs == 1 && q.inputs[0].n_parts == 3 && !q.inputs[0].parts[0].text && q.inputs[0].parts[0].tok == 12 &&
          !strcmp(q.inputs[0].parts[1].text, "a b") && q.inputs[0].parts[2].tok == 7 && q.base64 && !strcmp(q.model, "m"));
    el_api_embd_request_free(&q);
    /* arrays of inputs; "content" is the native shape */
    CHECK(embd("{\"content\":[\"x\",[1,2],[3,\"y\"]],\"embd_normalize\":-1,\"dimensions\":8}", &q, &e) == 0 &&
          q.n_inputs == 3 && !q.oai && q.normalize == -1 && q.dimensions == 8 && q.inputs[1].n_parts == 2 &&
          q.inputs[2].parts[1].text && !strcmp(q.inputs[2].parts[1].text, "y"));
    el_api_embd_request_free(&q);
    CHECK(embd("{\"input\":\"a\",\"content\":\"b\"}", &q, &e) == 0 && q.oai && !strcmp(q.inputs[0].parts[0].text, "a"));
    el_api_embd_request_free(&q);
    CHECK(embd("{\"input\":[\"\",3]}", &q, &e) == 0); /* an empty string beside an id is not an empty input */
    el_api_embd_request_free(&q);
    el_api_embd_request_free(&q); /* twice: harmless */

    EMBD_BAD("{}", "input", "must be provided");
    EMBD_BAD("{\"input\":null}", "input", "must be provided");
    EMBD_BAD("{\"input\":[]}", "input", "must not be empty");
    EMBD_BAD("{\"input\":\"\"}", "input", "input[0] is empty");
    EMBD_BAD("{\"input\":[\"a\",[]]}", "input", "input[1] is empty");
    EMBD_BAD("{\"input\":[[\"\",\"\"]]}", "input", "input[0] is empty");
    EMBD_BAD("{\"input\":[-1]}", "input", "not a token id");
    EMBD_BAD("{\"input\":[2147483648]}", "input", "not a token id");
    EMBD_BAD("{\"input\":[1e400]}", "input", "not a token id"); /* infinite */
    EMBD_BAD("{\"input\":[[1,[2]]]}", "input", "input[0][1]");
    EMBD_BAD("{\"input\":[1,[2]]}", "input", "expected a token id or a string");
    EMBD_BAD("{\"input\":[true]}", "input", "expected a string or an array");
    EMBD_BAD("{\"input\":{\"content\":\"x\"}}", "input", "not supported");
    EMBD_BAD("{\"input\":[\"a\",{\"prompt_string\":\"x\"}]}", "input", "input[1]");
    EMBD_BAD("{\"input\":42}", "input", "expected");
    EMBD_BAD("{\"input\":\"x\",\"encoding_format\":\"hex\"}", "encoding_format", "base64");
    EMBD_BAD("{\"input\":\"x\",\"encoding_format\":1}", "encoding_format", "a string");
    EMBD_BAD("{\"input\":\"x\",\"embd_normalize\":65}", "embd_normalize", NULL);
    EMBD_BAD("{\"input\":\"x\",\"embd_normalize\":-2}", "embd_normalize", NULL);
    EMBD_BAD("{\"input\":\"x\",\"embd_normalize\":1.5}", "embd_normalize", NULL);
    EMBD_BAD("{\"input\":\"x\",\"dimensions\":0}", "dimensions", NULL);
    EMBD_BAD("{\"input\":\"x\",\"model\":3}", "model", NULL);
    EMBD_BAD("{\"input\":\"x\",\"input\":\"y\"}", "input", "duplicate");
    EMBD_BAD("[\"input\"]", NULL, NULL);
    EMBD_BAD("{\"input\":\"x\"", NULL, NULL);
    CHECK(embd("{\"input\":\"\xff\"}", &q, &e) == -1 && e.status == 400 && !strcmp(e.code, "invalid_utf8"));
    el_api_embd_request_free(&q);

    /* counts: 2048 inputs pass, 2049 do not; 65536 parts in all pass, 65537 do not */
    size_t cap = 8u << 20;
    char *big = malloc(cap);
    if (!big) return;
    for (int n = 2048; n <= 2049; n++) {
        size_t off = (size_t)sprintf(big, "{\"input\":[");
        for (int i = 0; i < n; i++) off += (size_t)sprintf(big + off, "%s\"t\"", i ? "," : "");
        sprintf(big + off, "]}");
        int rc = embd(big, &q, &e);
        CHECKF(n == 2048 ? rc == 0 && q.n_inputs == 2048 : rc == -1 && strstr(e.message, "2049 inputs"), "%d inputs", n);
        el_api_embd_request_free(&q);
    }
    for (int n = EL_API_MAX_PROMPT_PARTS; n <= EL_API_MAX_PROMPT_PARTS + 1; n++) {
        size_t off = (size_t)sprintf(big, "{\"input\":[[");
        for (int i = 0; i < n - 1; i++) off += (size_t)sprintf(big + off, "%s1", i ? "," : "");
        off += (size_t)sprintf(big + off, "],[2]]}");
        int rc = embd(big, &q, &e);
        CHECKF(n == EL_API_MAX_PROMPT_PARTS ? rc == 0 : rc == -1 && strstr(e.message, "parts"), "%d parts: %s", n, e.message);
        el_api_embd_request_free(&q);
    }
    /* deep nesting is a JSON error, not a stack overflow */
    size_t off = (size_t)sprintf(big, "{\"input\":");
    for (int i = 0; i < 100000; i++) big[off++] = '[';
    big[off] = 0;
    CHECK(embd(big, &q, &e) == -1 && e.status == 400);
    el_api_embd_request_free(&q);
    free(big);
    CHECK(el_api_parse_embeddings("{}", 2, NULL, &e) == -1 && e.status == 500);

    /* replies */
    const float v0[3] = {1.0f, -0.5f, 0.25f}, v1[3] = {0.1f, 0.2f, 3e-38f};
    const float *vs[2] = {v0, v1};
    char *j = el_api_embeddings_response("m\"x", vs, 2, 3, false, 7);
    cJSON *p = j ? cJSON_Parse(j) : NULL;
    CHECK(p && !strcmp(cJSON_GetObjectItem(p, "model")->valuestring, "m\"x") &&
          !strcmp(cJSON_GetObjectItem(p, "object")->valuestring, "list") &&
          cJSON_GetObjectItem(cJSON_GetObjectItem(p, "usage"), "total_tokens")->valueint == 7);
    const cJSON *d1 = cJSON_GetArrayItem(cJSON_GetObjectItem(p, "data"), 1);
    CHECK(d1 && cJSON_GetObjectItem(d1, "index")->valueint == 1 &&
          !strcmp(cJSON_GetObjectItem(d1, "object")->valuestring, "embedding"));
    const cJSON *arr = cJSON_GetObjectItem(d1, "embedding");
    for (int i = 0; i < 3; i++) CHECK((float)cJSON_GetArrayItem(arr, i)->valuedouble == v1[i]); /* %.9g reads back */
    cJSON_Delete(p);
    free(j);
    const float one[2] = {1.0f, -2.0f}; /* 00 00 80 3f 00 00 00 c0 */
    const float *op[1] = {one};
    j = el_api_embeddings_response(NULL, op, 1, 2, true, 1);
    CHECKF(j && strstr(j, "\"embedding\":\"AACAPwAAAMA=\"") && strstr(j, "\"encoding_format\":\"base64\""), "%s", j);
    free(j);
    const float rows[4] = {1, 2, 3, 4};
    const float *rp[2] = {rows, rows + 2};
    int nr[2] = {2, 1};
    j = el_api_embeddings_native(rp, nr, 2, 1);
    CHECKF(j && !strcmp(j, "[{\"index\":0,\"embedding\":[[1],[2]]},{\"index\":1,\"embedding\":[[3]]}]"), "%s", j);
    free(j);
    const float bad[2] = {NAN, INFINITY};
    const float *bp[1] = {bad};
    j = el_api_embeddings_response("m", bp, 1, 2, false, 1);
    p = j ? cJSON_Parse(j) : NULL;
    CHECK(p != NULL); /* never NaN in JSON */
    cJSON_Delete(p);
    free(j);

    /* normalisations (llama.cpp's common_embd_normalize) */
    float a[3] = {3, -4, 0};
    el_api_embd_normalize(a, 3, 2);
    CHECK(fabsf(a[0] - 0.6f) < 1e-7f && fabsf(a[1] + 0.8f) < 1e-7f && a[2] == 0);
    float b[2] = {3, -1};
    el_api_embd_normalize(b, 2, 1);
    CHECK(fabsf(b[0] - 0.75f) < 1e-7f && fabsf(b[1] + 0.25f) < 1e-7f);
    float c[2] = {2, -8};
    el_api_embd_normalize(c, 2, 0);
    CHECK(fabsf(c[1] + 32760.0f) < 1e-2f && fabsf(c[0] - 8190.0f) < 1e-2f);
    float z[2] = {0, 0}, r[2] = {5, 6};
    el_api_embd_normalize(z, 2, 2);
    el_api_embd_normalize(r, 2, -1);
    CHECK(z[0] == 0 && z[1] == 0 && r[0] == 5 && r[1] == 6);
    float h[2] = {1e30f, 1e30f};
    el_api_embd_normalize(h, 2, EL_API_MAX_EMBD_NORMALIZE); /* pow overflows: zeros, not NaN */
    CHECK(isfinite(h[0]) && isfinite(h[1]));
}

/* Tool calls and output-format constraints (response_format, grammar, json_schema) are honoured
 * locally now (el_api_request.tools / .grammar) and never noted; values that ask for nothing are
 * not noted either. */
static void test_local_unsupported(void) {
    static const struct { const char *field, *want; bool grammar; } cases[] = {
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", NULL, false},
        {"\"functions\":[{\"name\":\"f\"}]", NULL, false},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":\"required\"", NULL, false},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}", NULL, false},
        {"\"functions\":[{\"name\":\"f\"}],\"function_call\":{\"name\":\"f\"}", NULL, false},
        {"\"response_format\":{\"type\":\"json_object\"}", NULL, true},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}}", NULL, true},
        {"\"grammar\":\"root ::= \\\"a\\\"\"", NULL, true},
        {"\"json_schema\":{}", NULL, true},
        {"\"tools\":[],\"tool_choice\":\"auto\",\"response_format\":{\"type\":\"text\"},\"grammar\":\"\"", NULL, false},
        {"\"tools\":null,\"tool_choice\":\"none\",\"response_format\":null,\"json_schema\":null", NULL, false},
    };
    el_api_request r;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (OK(CHAT, chat_with(cases[i].field), &r)) continue;
        CHECKF(cases[i].want ? r.local_unsupported && !strcmp(r.local_unsupported, cases[i].want)
                             : r.local_unsupported == NULL,
               "case %zu: %s", i, r.local_unsupported ? r.local_unsupported : "(none)");
        CHECKF((r.grammar != NULL) == cases[i].grammar, "case %zu: grammar %s", i, r.grammar ? "set" : "absent");
        el_api_request_free(&r);
    }
    /* malformed constraints are a 400 naming the field */
    BAD(CHAT, chat_with("\"response_format\":\"json\""), 400, "response_format", NULL);
    BAD(CHAT, chat_with("\"response_format\":{}"), 400, "response_format", NULL);
    BAD(CHAT, chat_with("\"grammar\":5"), 400, "grammar", NULL);
    BAD(CHAT, chat_with("\"grammar\":\"root ::= \\\"a\\\"\",\"json_schema\":{}"), 400, "grammar", "only one");
    if (!OK(COMP, "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_object\"}}", &r)) {
        CHECK(r.local_unsupported == NULL && r.grammar);
        el_api_request_free(&r);
    }
    if (!OK(COMP, "{\"prompt\":\"a\"}", &r)) {
        CHECK(r.local_unsupported == NULL && !r.grammar);
        el_api_request_free(&r);
    }
}

#define TOOL_F "{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"," \
               "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}"
#define TOOL_G "{\"type\":\"function\",\"function\":{\"name\":\"g-2\",\"description\":\"d\",\"strict\":true}}"

/* tools, tool_choice, parallel_tool_calls, legacy functions/function_call, and tool calls /
 * tool results in the history: what the parse keeps, and every hostile shape a 400 naming the
 * field, never a crash. */
static void test_tools_parse(void) {
    el_api_request r;
    if (!OK(CHAT, chat_with("\"tools\":[" TOOL_F "," TOOL_G "]"), &r)) {
        CHECK(r.n_tools == 2 && r.tool_choice == EL_TOOL_CHOICE_AUTO && r.parallel_tool_calls && !r.grammar);
        CHECK(!strcmp(r.tools[0].name, "f") && !strcmp(r.tools[1].name, "g-2"));
        CHECK(!strcmp(r.tools[0].parameters, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}"));
        CHECK(!strcmp(r.tools[1].parameters, "{\"type\":\"object\",\"properties\":{}}"));
        /* the definition as the template prints it: Python's json.dumps of the tool as sent */
        CHECK(!strcmp(r.chat_tools[1].json, "{\"type\": \"function\", \"function\": {\"name\": \"g-2\", "
                                            "\"description\": \"d\", \"strict\": true}}"));
        CHECK(strstr(r.chat_tools[1].json_indent4, "{\n    \"type\": \"function\",\n    \"function\": {\n") != NULL);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"tools\":[" TOOL_F "," TOOL_G "],\"tool_choice\":{\"type\":\"function\",\"function\":"
                            "{\"name\":\"g-2\"}},\"parallel_tool_calls\":false"), &r)) {
        CHECK(r.tool_choice == EL_TOOL_CHOICE_NAMED && r.tool_named == 1 && !r.parallel_tool_calls);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"tools\":[" TOOL_F "],\"tool_choice\":\"required\""), &r)) {
        CHECK(r.tool_choice == EL_TOOL_CHOICE_REQUIRED);
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"tools\":[" TOOL_F "],\"tool_choice\":\"none\",\"response_format\":{\"type\":\"json_object\"}"), &r)) {
        CHECK(r.tool_choice == EL_TOOL_CHOICE_NONE && r.grammar); /* none: the output format applies */
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"functions\":[{\"name\":\"f\"}],\"function_call\":\"auto\""), &r)) {
        CHECK(r.n_tools == 1 && r.tool_choice == EL_TOOL_CHOICE_AUTO && !r.parallel_tool_calls);
        CHECK(!strcmp(r.chat_tools[0].json, "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}"));
        el_api_request_free(&r);
    }
    if (!OK(CHAT, chat_with("\"tool_choice\":\"auto\""), &r)) { /* auto without tools: nothing to call */
        CHECK(r.n_tools == 0 && r.tool_choice == EL_TOOL_CHOICE_NONE);
        el_api_request_free(&r);
    }
    /* the history: an assistant's calls (arguments re-serialised as the templates print them) and tool results */
    const char *hist = "{\"messages\":[{\"role\":\"user\",\"content\":\"u\"},"
                       "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                       "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1,\\\"b\\\":[true,\\\"x\\\"]}\"}},"
                       "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"not json\"}}]},"
                       "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"r1\"},"
                       "{\"role\":\"function\",\"name\":\"f\",\"content\":\"r2\"},"
                       "{\"role\":\"assistant\",\"function_call\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}";
    if (!OK(CHAT, hist, &r)) {
        CHECK(r.n_msgs == 5);
        CHECK(!strcmp(r.msgs[1].role, "assistant") && r.msgs[1].n_tool_calls == 2 && !strcmp(r.msgs[1].content, ""));
        CHECK(!strcmp(r.msgs[1].tool_calls[0].id, "c1") && !strcmp(r.msgs[1].tool_calls[0].name, "f"));
        CHECKF(!strcmp(r.msgs[1].tool_calls[0].arguments, "{\"a\": 1, \"b\": [true, \"x\"]}"), "%s",
               r.msgs[1].tool_calls[0].arguments);
        CHECK(!strcmp(r.msgs[1].tool_calls[1].arguments, "\"not json\""));
        CHECK(!strcmp(r.msgs[2].role, "tool") && !strcmp(r.msgs[2].tool_call_id, "c1") && !strcmp(r.msgs[2].content, "r1"));
        CHECK(!strcmp(r.msgs[3].role, "tool") && !strcmp(r.msgs[3].content, "r2"));
        CHECK(r.msgs[4].n_tool_calls == 1 && !strcmp(r.msgs[4].tool_calls[0].arguments, "{}") && !r.msgs[4].tool_calls[0].id);
        el_api_request_free(&r);
    }
    /* hostile: each a 400 naming the field */
    char big[EL_TOOL_MAX_TOOLS * 64 + 200];
    int o = snprintf(big, sizeof big, "{" MSG ",\"tools\":[");
    for (int i = 0; i <= EL_TOOL_MAX_TOOLS; i++)
        o += snprintf(big + o, sizeof big - (size_t)o, "%s{\"type\":\"function\",\"function\":{\"name\":\"f%d\"}}",
                      i ? "," : "", i);
    snprintf(big + o, sizeof big - (size_t)o, "]}");
    BAD(CHAT, big, 400, "tools", "at most 128 tools");
    char *huge = malloc(EL_TOOL_MAX_DEF_BYTES + 512);
    int h = snprintf(huge, 200, "{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"");
    memset(huge + h, 'x', EL_TOOL_MAX_DEF_BYTES);
    snprintf(huge + h + EL_TOOL_MAX_DEF_BYTES, 64, "\"}}]}");
    BAD(CHAT, huge, 400, "tools", "bytes serialised");
    free(huge);
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F "," TOOL_F "]"), 400, "tools", "'f' is given twice");
    BAD(CHAT, chat_with("\"tools\":{}"), 400, "tools", NULL);
    BAD(CHAT, chat_with("\"tools\":[5]"), 400, "tools", "tools[0]");
    BAD(CHAT, chat_with("\"tools\":[{\"type\":\"retrieval\"}]"), 400, "tools", "tools[0].type");
    BAD(CHAT, chat_with("\"tools\":[{\"type\":\"function\"}]"), 400, "tools", "tools[0].function");
    BAD(CHAT, chat_with("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]"), 400, "tools", "name");
    BAD(CHAT, chat_with("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]"), 400, "tools", "name");
    BAD(CHAT, chat_with("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}]"),
        400, "tools", "name");
    BAD(CHAT, chat_with("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]"), 400, "tools",
        "parameters");
    BAD(CHAT, chat_with("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":1}}]"), 400,
        "tools", "description");
    /* a bad schema: the error names the tool and the schema's place (json_schema.c) */
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F ",{\"type\":\"function\",\"function\":{\"name\":\"h\",\"parameters\":{\"type\":"
                        "\"object\",\"properties\":{\"x\":{\"type\":\"frob\"}}}}}]"),
        400, "tools", "tools[1].function.parameters: json schema: at /x: unknown type 'frob'");
    BAD(CHAT, chat_with("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"$ref\":\"#/nope\"}}}]"),
        400, "tools", "does not resolve");
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"zz\"}}"), 400,
        "tool_choice", "'zz', which is not among the tools");
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F "],\"tool_choice\":\"sometimes\""), 400, "tool_choice", "sometimes");
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F "],\"tool_choice\":5"), 400, "tool_choice", NULL);
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F "],\"tool_choice\":{\"type\":\"function\"}"), 400, "tool_choice", NULL);
    BAD(CHAT, chat_with("\"tool_choice\":\"required\""), 400, "tool_choice", "no tools");
    BAD(CHAT, chat_with("\"function_call\":{\"name\":\"f\"}"), 400, "function_call", "not among the tools");
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F "],\"functions\":[{\"name\":\"g\"}]"), 400, "functions", "not both");
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F "],\"parallel_tool_calls\":\"yes\""), 400, "parallel_tool_calls", NULL);
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F "],\"response_format\":{\"type\":\"json_object\"}"), 400, "response_format",
        "cannot be combined with tools");
    BAD(CHAT, chat_with("\"tools\":[" TOOL_F "],\"grammar\":\"root ::= \\\"a\\\"\""), 400, "grammar", "cannot be combined");
    BAD(COMP, "{\"prompt\":\"a\",\"tools\":[" TOOL_F "]}", 400, "tools", "chat/completions only");
    BAD(COMP, "{\"prompt\":\"a\",\"tool_choice\":\"required\"}", 400, "tool_choice", "chat/completions only");
    if (!OK(COMP, "{\"prompt\":\"a\",\"tools\":[],\"tool_choice\":\"auto\",\"function_call\":\"none\"}", &r)) {
        CHECK(r.n_tools == 0); /* values that ask for nothing pass on completions too */
        el_api_request_free(&r);
    }
    BAD(CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":5}]}", 400, "messages", "tool_calls");
    BAD(CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}]}",
        400, "messages", "function.name");
    BAD(CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"x\",\"function\":{\"name\":\"f\"}}]}]}",
        400, "messages", "type");
    BAD(CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":5}}]}]}",
        400, "messages", "arguments");
    BAD(CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[]}]}", 400, "messages", "content: missing");
    BAD(CHAT, "{\"messages\":[{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":5}]}", 400, "messages", "tool_call_id");
    BAD(CHAT, "{\"messages\":[{\"role\":\"tool\"}]}", 400, "messages", "content: missing");
    /* too many calls in one message */
    char *many = malloc(EL_TOOL_MAX_CALLS * 48 + 200);
    int m = snprintf(many, 100, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[");
    for (int i = 0; i <= EL_TOOL_MAX_CALLS; i++)
        m += snprintf(many + m, 48, "%s{\"function\":{\"name\":\"f\"}}", i ? "," : "");
    snprintf(many + m, 16, "]}]}");
    BAD(CHAT, many, 400, "messages", "at most 128 calls");
    free(many);
}

int main(void) {
    test_tools_parse();
    test_local_unsupported();
    test_native_defaults_and_prompts();
    test_native_fields();
    test_native_builders();
    test_role_chunk_and_errors();
    test_tokenize_bodies();
    test_nul_in_text();
    test_utf8_tail();
    test_sampling_fields();
    test_llama_fields();
    test_logprobs_json();
    test_chat_minimal_defaults();
    test_chat_full();
    test_chat_messages_errors();
    test_chat_content_parts();
    test_completion_prompt();
    test_max_tokens();
    test_sampling_ranges();
    test_seed();
    test_stop();
    test_stream_n_user_model();
    test_unknown_and_duplicates();
    test_body_json();
    test_body_utf8();
    test_body_size_and_nesting();
    test_null_args();
    test_error_json();
    test_chat_response();
    test_completion_response();
    test_chat_chunks();
    test_completion_chunks();
    test_round_trip();
    test_embeddings_bodies();
    return el_test_finish("test_api");
}
