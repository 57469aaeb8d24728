/*
 * test_chat.c — chat template detection and rendering.
 *
 * tests/data/chat_templates/<name>.jinja holds the real template text of a
 * model family; <name>.expected.json holds what jinja2 renders for a few
 * conversations (tests/tools/gen_chat_goldens.py, leading BOS text removed).
 * el_chat_detect must classify the text and el_chat_apply must reproduce every
 * rendering byte for byte.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/chat.h"
#include "testutil.h"

#ifndef EL_SOURCE_DIR
#define EL_SOURCE_DIR "."
#endif

static const struct {
    const char *file;
    el_chat_family fam;
} TEMPLATES[] = {
    {"chatml", EL_CHAT_CHATML},   {"chatml_plain", EL_CHAT_CHATML}, {"llama3", EL_CHAT_LLAMA3},
    {"llama2", EL_CHAT_LLAMA2},   {"mistral", EL_CHAT_MISTRAL},     {"gemma", EL_CHAT_GEMMA},
    {"phi3", EL_CHAT_PHI3},
};

static char *read_data(const char *name, const char *ext) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/chat_templates/%s%s", EL_SOURCE_DIR, name, ext);
    char *s = el_test_read_file(path, NULL);
    CHECKF(s != NULL, "cannot read %s", path);
    return s;
}

static void show_diff(const char *want, const char *got) {
    size_t i = 0;
    while (want[i] && want[i] == got[i]) i++;
    fprintf(stderr, "  first difference at byte %zu\n  want: \"%.80s\"\n  got:  \"%.80s\"\n", i,
            want + i, got + i);
}

static void check_goldens(const char *name, el_chat_family fam) {
    char *json = read_data(name, ".expected.json");
    if (!json) return;
    cJSON *root = cJSON_Parse(json);
    CHECKF(cJSON_IsArray(root), "%s.expected.json: not a JSON array", name);
    int idx = 0;
    const cJSON *tc;
    cJSON_ArrayForEach(tc, root) {
        const cJSON *jm = cJSON_GetObjectItemCaseSensitive(tc, "messages");
        const cJSON *jg = cJSON_GetObjectItemCaseSensitive(tc, "add_generation_prompt");
        const cJSON *jo = cJSON_GetObjectItemCaseSensitive(tc, "output");
        CHECK(cJSON_IsArray(jm) && cJSON_IsBool(jg) && cJSON_IsString(jo));
        if (!cJSON_IsArray(jm) || !cJSON_IsString(jo)) continue;
        int n = cJSON_GetArraySize(jm);
        el_chat_msg *msgs = calloc((size_t)n + 1, sizeof *msgs);
        for (int i = 0; i < n; i++) {
            const cJSON *m = cJSON_GetArrayItem(jm, i);
            msgs[i].role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
            msgs[i].content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "content"));
        }
        const char *want = jo->valuestring;
        bool gen = cJSON_IsTrue(jg);
        size_t need = el_chat_apply(fam, msgs, n, gen, NULL, 0);
        CHECKF(need == strlen(want), "%s case %d: needed %zu, want %zu", name, idx, need,
               strlen(want));
        if (need != (size_t)-1) {
            char *buf = malloc(need + 1);
            size_t got = el_chat_apply(fam, msgs, n, gen, buf, need + 1);
            CHECK(got == need);
            CHECKF(strcmp(buf, want) == 0, "%s case %d: output differs", name, idx);
            if (strcmp(buf, want) != 0) show_diff(want, buf);
            free(buf);
        }
        free(msgs);
        idx++;
    }
    CHECKF(idx > 0, "%s: no cases", name);
    cJSON_Delete(root);
    free(json);
}

static void test_templates(void) {
    for (size_t t = 0; t < sizeof TEMPLATES / sizeof TEMPLATES[0]; t++) {
        char *tmpl = read_data(TEMPLATES[t].file, ".jinja");
        if (tmpl) {
            el_chat_family got = el_chat_detect(tmpl);
            CHECKF(got == TEMPLATES[t].fam, "%s.jinja detected as %s", TEMPLATES[t].file,
                   el_chat_family_name(got));
        }
        free(tmpl);
        check_goldens(TEMPLATES[t].file, TEMPLATES[t].fam);
    }
}

static void test_detect_misc(void) {
    CHECK(el_chat_detect(NULL) == EL_CHAT_UNKNOWN);
    CHECK(el_chat_detect("") == EL_CHAT_UNKNOWN);
    CHECK(el_chat_detect("{% for m in messages %}{{ m.content }}{% endfor %}") == EL_CHAT_UNKNOWN);
    CHECK(el_chat_detect("{{ '<|im_start|>' }}<|im_sep|>") == EL_CHAT_UNKNOWN); /* Phi-4 */
    CHECK(el_chat_detect("<|header_start|>user<|header_end|>") == EL_CHAT_UNKNOWN); /* Llama 4 */
    CHECK(el_chat_detect("{{ '[INST] ' + x + ' [/INST]' }}") == EL_CHAT_MISTRAL);
    CHECK(el_chat_detect("[INST] <<SYS>>") == EL_CHAT_LLAMA2);
    CHECK(el_chat_detect("<|start_header_id|>x<|eot_id|>") == EL_CHAT_LLAMA3);
    CHECK(el_chat_detect("<|user|>\n<|end|>\n<|assistant|>") == EL_CHAT_PHI3);
    CHECK(el_chat_detect("<start_of_turn>user") == EL_CHAT_GEMMA);
    /* a bare family name is accepted as a template */
    CHECK(el_chat_detect("gemma") == EL_CHAT_GEMMA);
    CHECK(el_chat_detect("chatml") == EL_CHAT_CHATML);
}

static void test_names(void) {
    for (int f = 1; f < EL_CHAT_COUNT; f++) {
        const char *n = el_chat_family_name((el_chat_family)f);
        CHECK(n != NULL && strcmp(n, "unknown") != 0);
        CHECK(el_chat_family_from_name(n) == (el_chat_family)f);
    }
    CHECK(el_chat_family_from_name("llama3") == EL_CHAT_LLAMA3);
    CHECK(el_chat_family_from_name("phi3") == EL_CHAT_PHI3);
    CHECK(el_chat_family_from_name("mistral") == EL_CHAT_MISTRAL);
    CHECK(el_chat_family_from_name("nope") == EL_CHAT_UNKNOWN);
    CHECK(el_chat_family_from_name(NULL) == EL_CHAT_UNKNOWN);
    CHECK(el_chat_family_from_name("unknown") == EL_CHAT_UNKNOWN);
    CHECK(strcmp(el_chat_family_name(EL_CHAT_UNKNOWN), "unknown") == 0);
    CHECK(strcmp(el_chat_family_name((el_chat_family)99), "unknown") == 0);
}

static void test_errors_and_truncation(void) {
    el_chat_msg ok[] = {{"system", "S"}, {"user", "Hello"}};
    el_chat_msg bad[] = {{"user", "hi"}, {"tool", "x"}};
    el_chat_msg nullrole[] = {{NULL, "hi"}};
    char buf[64];
    memset(buf, 'X', sizeof buf);
    for (int f = 1; f < EL_CHAT_COUNT; f++) {
        CHECK(el_chat_apply((el_chat_family)f, bad, 2, true, buf, sizeof buf) == (size_t)-1);
        CHECK(el_chat_apply((el_chat_family)f, nullrole, 1, true, buf, sizeof buf) == (size_t)-1);
        CHECK(el_chat_apply((el_chat_family)f, ok, -1, true, buf, sizeof buf) == (size_t)-1);
    }
    CHECK(buf[0] == 'X'); /* nothing written on error */
    CHECK(el_chat_apply(EL_CHAT_UNKNOWN, ok, 2, true, buf, sizeof buf) == (size_t)-1);
    CHECK(el_chat_apply(EL_CHAT_COUNT, ok, 2, true, buf, sizeof buf) == (size_t)-1);

    /* zero messages: only the generation prompt */
    CHECK(el_chat_apply(EL_CHAT_CHATML, NULL, 0, true, buf, sizeof buf) == 22);
    CHECK(strcmp(buf, "<|im_start|>assistant\n") == 0);

    const char *full = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                       "<|im_start|>assistant\n";
    size_t need = el_chat_apply(EL_CHAT_CHATML, ok, 2, true, NULL, 0);
    CHECK(need == strlen(full));
    /* small caps: same return value, truncated prefix, always NUL-terminated */
    for (size_t cap = 1; cap <= need + 1; cap++) {
        char *b = malloc(cap); /* exact size so ASan catches an overrun */
        size_t r = el_chat_apply(EL_CHAT_CHATML, ok, 2, true, b, cap);
        CHECK(r == need);
        CHECK(strlen(b) == (cap - 1 < need ? cap - 1 : need));
        CHECK(strncmp(b, full, strlen(b)) == 0);
        free(b);
    }
    char one = 'Z';
    CHECK(el_chat_apply(EL_CHAT_CHATML, ok, 2, true, &one, 0) == need);
    CHECK(one == 'Z'); /* cap 0: nothing written */
}

/* Leniency and details not covered by the goldens. */
static void test_details(void) {
    char buf[512];
    /* phi3: empty system skipped; no generation prompt → eos text */
    el_chat_msg p[] = {{"system", ""}, {"user", "u"}};
    el_chat_apply(EL_CHAT_PHI3, p, 2, false, buf, sizeof buf);
    CHECK(strcmp(buf, "<|user|>\nu<|end|>\n<|endoftext|>") == 0);
    /* gemma: role "assistant" becomes "model", content trimmed incl. U+3000 */
    el_chat_msg g[] = {{"user", "\xe3\x80\x80q "}, {"assistant", " a\n"}};
    el_chat_apply(EL_CHAT_GEMMA, g, 2, false, buf, sizeof buf);
    CHECK(strcmp(buf, "<start_of_turn>user\nq<end_of_turn>\n<start_of_turn>model\na<end_of_turn>\n") == 0);
    /* llama2: inner BOS/EOS text kept, leading BOS dropped */
    el_chat_msg l[] = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
    el_chat_apply(EL_CHAT_LLAMA2, l, 3, true, buf, sizeof buf);
    CHECK(strcmp(buf, "[INST] a [/INST] b </s><s>[INST] c [/INST]") == 0);
    /* mistral: a later system message folds into the next user turn */
    el_chat_msg ms[] = {{"user", "a"}, {"assistant", "b"}, {"system", "S"}, {"user", "c"}};
    el_chat_apply(EL_CHAT_MISTRAL, ms, 4, true, buf, sizeof buf);
    CHECK(strcmp(buf, " [INST] a [/INST] b</s> [INST] S\n\nc [/INST]") == 0);
    /* NULL content renders as empty */
    el_chat_msg nc[] = {{"user", NULL}};
    el_chat_apply(EL_CHAT_LLAMA3, nc, 1, true, buf, sizeof buf);
    CHECK(strcmp(buf, "<|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>"
                      "<|start_header_id|>assistant<|end_header_id|>\n\n") == 0);
}

int main(void) {
    test_templates();
    test_detect_misc();
    test_names();
    test_errors_and_truncation();
    test_details();
    return el_test_finish("test_chat");
}
