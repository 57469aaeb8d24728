/*
 * test_toolformat.c — structured/toolformat.c: the tool-call format of each
 * family recognised from chat-template fragments, and replies in each format
 * (the strings those models write, as llama.cpp's chat tests spell them)
 * split into content, reasoning and calls; malformed, cut-short, huge and
 * hostile replies stay content and never crash; reasoning_format none /
 * deepseek / auto as llama-server's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "structured/toolformat.h"
#include "testutil.h"

#define DSB "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DSE "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DCB "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DCE "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DSEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

static void test_detect(void) {
    static const struct { const char *tmpl; el_tool_format want; } cases[] = {
        {"{%- if tools %}<tools>{{ tool | tojson }}</tools> <tool_call>\n{\"name\": ...}</tool_call>", EL_TF_HERMES},
        {"<|start_header_id|>ipython<|end_header_id|>\n\n{{ message.content | tojson }}<|eot_id|>", EL_TF_LLAMA3},
        {"{%- if message['role'] == 'assistant' %}[TOOL_CALLS][{\"name\": ...}]", EL_TF_MISTRAL_NEMO},
        {"<|start_header_id|>ipython ... <function={{ tool_call.name }}>{{ args }}</function>", EL_TF_FUNCTIONARY31},
        {"{{ '>>>all\\n' + message['content'] }}{{ '>>>' + tool_call.name + '\\n' }}", EL_TF_FUNCTIONARY32},
        {"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_ACTION|>[...]<|END_ACTION|>", EL_TF_COMMAND_R},
        {"Write 'Action:' followed by a list of actions in JSON ... \"tool_name\": ...", EL_TF_COMMAND_R},
        {"{{'<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>' + " DSB "}}", EL_TF_DEEPSEEK},
        {"{%- if tools %}<|tool_call|>{{ tool_calls | tojson }}", EL_TF_GRANITE},
        {"<|start|>assistant<|channel|>final<|message|>{{ content }}<|end|>", EL_TF_GPT_OSS},
        {"<start_of_turn>user\n{{ content }}<end_of_turn>", EL_TF_NONE},
        {"<|start_header_id|>user<|end_header_id|>", EL_TF_NONE},
        {"", EL_TF_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        el_tool_format f = el_tool_format_detect(cases[i].tmpl);
        CHECKF(f == cases[i].want, "case %zu: %s, want %s", i, el_tool_format_name(f), el_tool_format_name(cases[i].want));
    }
    CHECK(el_tool_format_detect(NULL) == EL_TF_NONE);
    CHECK(el_reasoning_format_parse("none") == EL_REASONING_NONE && el_reasoning_format_parse("deepseek") == EL_REASONING_DEEPSEEK &&
          el_reasoning_format_parse("auto") == EL_REASONING_AUTO && el_reasoning_format_parse("x") == -1 &&
          el_reasoning_format_parse(NULL) == -1);
}

typedef struct {
    el_tool_format f;
    el_reasoning_format rf;
    const char *text;
    const char *content, *reasoning;
    int n;                 /* calls */
    const char *name0, *args0, *name1, *args1;
} pcase;

static void check_cases(const pcase *cases, size_t nc) {
    for (size_t i = 0; i < nc; i++) {
        const pcase *c = &cases[i];
        el_tool_parsed r;
        CHECK(el_tool_format_parse(c->f, c->rf, c->text, strlen(c->text), &r) == 0);
        const char *fn = el_tool_format_name(c->f);
        CHECKF(r.n_calls == c->n, "%s case %zu: %d calls, want %d", fn, i, r.n_calls, c->n);
        CHECKF(c->content ? r.content && !strcmp(r.content, c->content) : !r.content, "%s case %zu: content '%s'", fn, i,
               r.content ? r.content : "(null)");
        CHECKF(c->reasoning ? r.reasoning && !strcmp(r.reasoning, c->reasoning) : !r.reasoning,
               "%s case %zu: reasoning '%s'", fn, i, r.reasoning ? r.reasoning : "(null)");
        if (r.n_calls >= 1 && c->n >= 1)
            CHECKF(!strcmp(r.calls[0].name, c->name0) && !strcmp(r.calls[0].arguments, c->args0), "%s case %zu: %s(%s)", fn,
                   i, r.calls[0].name, r.calls[0].arguments);
        if (r.n_calls >= 2 && c->n >= 2)
            CHECKF(!strcmp(r.calls[1].name, c->name1) && !strcmp(r.calls[1].arguments, c->args1), "%s case %zu: 2nd %s(%s)",
                   fn, i, r.calls[1].name, r.calls[1].arguments);
        el_tool_parsed_free(&r);
    }
}

#define W "{\"city\":\"Paris\"}"
static void test_formats(void) {
    static const pcase cases[] = {
        /* Hermes / Qwen: tags, several, text around, bare JSON, arguments as a JSON string */
        {EL_TF_HERMES, 0, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_HERMES, 0, "Sure.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n</tool_call>", "Sure.", NULL, 2, "a", "{}", "b", "{\"x\":1}"},
        {EL_TF_HERMES, 0, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_HERMES, 0, "I will call it: {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"} ok", "I will call it:\nok", NULL, 1, "get_weather", W, NULL, NULL},
        /* Qwen2.5-Coder fences its bare call: the fence goes with it */
        {EL_TF_HERMES, 0, "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_HERMES, 0, "Here:\n```\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```\nDone.", "Here:\nDone.", NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_HERMES, 0, "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", "```json", NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_HERMES, 0, "<tool_call>\n{\"name\": \"get_weather\", \"argu", "<tool_call>\n{\"name\": \"get_weather\", \"argu", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_HERMES, 0, "<tool_call>{\"name\": \"bad name\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"bad name\", \"arguments\": {}}</tool_call>", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_HERMES, EL_REASONING_DEEPSEEK, "<think>\nI should check.\n</think>\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>", NULL, "I should check.", 1, "a", "{}", NULL, NULL},
        {EL_TF_HERMES, EL_REASONING_NONE, "<think>x</think>Hi", "<think>x</think>Hi", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_HERMES, EL_REASONING_AUTO, "thinking opened by the template</think>Hi", "Hi", "thinking opened by the template", 0, NULL, NULL, NULL, NULL},
        {EL_TF_HERMES, EL_REASONING_AUTO, "<think>cut short", NULL, "cut short", 0, NULL, NULL, NULL, NULL},
        /* Llama 3.x */
        {EL_TF_LLAMA3, 0, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_LLAMA3, 0, "<|python_tag|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_LLAMA3, 0, "The weather is {\"name\": \"x\"}", "The weather is {\"name\": \"x\"}", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_LLAMA3, 0, "{\"name\": \"f\", \"parameters\": {}} trailing", "{\"name\": \"f\", \"parameters\": {}} trailing", NULL, 0, NULL, NULL, NULL, NULL},
        /* Mistral Nemo */
        {EL_TF_MISTRAL_NEMO, 0, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"123456789\"}]", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_MISTRAL_NEMO, 0, "Let me see. [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"y\": [1]}}]", "Let me see.", NULL, 2, "a", "{}", "b", "{\"y\":[1]}"},
        {EL_TF_MISTRAL_NEMO, 0, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": 5}]", "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": 5}]", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_MISTRAL_NEMO, 0, "[TOOL_CALLS][{\"name\": \"a\", \"argu", "[TOOL_CALLS][{\"name\": \"a\", \"argu", NULL, 0, NULL, NULL, NULL, NULL},
        /* Functionary v3.1 */
        {EL_TF_FUNCTIONARY31, 0, "<function=get_weather>{\"city\": \"Paris\"}</function>", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_FUNCTIONARY31, 0, "Checking.<function=a>{}</function><function=b>{\"x\":1}</function>", "Checking.", NULL, 2, "a", "{}", "b", "{\"x\":1}"},
        {EL_TF_FUNCTIONARY31, 0, "<|python_tag|>print(1)", NULL, NULL, 1, "python", "{\"code\":\"print(1)\"}", NULL, NULL},
        {EL_TF_FUNCTIONARY31, 0, "<function=a>{\"x\": 1}", "<function=a>{\"x\": 1}", NULL, 0, NULL, NULL, NULL, NULL},
        /* Functionary v3.2 */
        {EL_TF_FUNCTIONARY32, 0, "get_weather\n{\"city\": \"Paris\"}", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_FUNCTIONARY32, 0, "all\nLet me check.>>>get_weather\n{\"city\": \"Paris\"}>>>b\n{}", "Let me check.", NULL, 2, "get_weather", W, "b", "{}"},
        {EL_TF_FUNCTIONARY32, 0, "all\nHello there", "Hello there", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_FUNCTIONARY32, 0, "python\nimport os", NULL, NULL, 1, "python", "{\"code\":\"import os\"}", NULL, NULL},
        {EL_TF_FUNCTIONARY32, 0, "get_weather\n{\"city\": ", "get_weather\n{\"city\":", NULL, 0, NULL, NULL, NULL, NULL},
        /* Command R7B and R+ */
        {EL_TF_COMMAND_R, EL_REASONING_DEEPSEEK, "<|START_THINKING|>I need the weather.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n]<|END_ACTION|>", NULL, "I need the weather.", 1, "get_weather", W, NULL, NULL},
        {EL_TF_COMMAND_R, 0, "<|START_RESPONSE|>Hello!<|END_RESPONSE|>", "Hello!", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_COMMAND_R, 0, "Action: ```json\n[\n    {\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n]\n```", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_COMMAND_R, 0, "<|START_ACTION|>[{\"tool_name\": \"a\"}]<|END_ACTION|>", "<|START_ACTION|>[{\"tool_name\": \"a\"}]<|END_ACTION|>", NULL, 0, NULL, NULL, NULL, NULL},
        /* DeepSeek R1 and V3.1 */
        {EL_TF_DEEPSEEK, EL_REASONING_DEEPSEEK, "<think>Hmm.</think>\n\n" DSB DCB "function" DSEP "get_weather\n```json\n{\"city\": \"Paris\"}\n```" DCE DSE, NULL, "Hmm.", 1, "get_weather", W, NULL, NULL},
        {EL_TF_DEEPSEEK, 0, "Calling." DSB DCB "a" DSEP "{}" DCE DCB "b" DSEP "{\"x\": 1}" DCE DSE, "Calling.", NULL, 2, "a", "{}", "b", "{\"x\":1}"},
        {EL_TF_DEEPSEEK, 0, DSB DCB "function" DSEP "get_weather\n```json\n{\"city\": ", DSB DCB "function" DSEP "get_weather\n```json\n{\"city\":", NULL, 0, NULL, NULL, NULL, NULL},
        /* Granite */
        {EL_TF_GRANITE, 0, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", NULL, NULL, 1, "get_weather", W, NULL, NULL},
        {EL_TF_GRANITE, EL_REASONING_AUTO, "<think>plan</think><response>Hello</response>", "Hello", "plan", 0, NULL, NULL, NULL, NULL},
        {EL_TF_GRANITE, 0, "<|tool_call|>[{\"name\": \"a\", \"arguments\": 3}]", "<|tool_call|>[{\"name\": \"a\", \"arguments\": 3}]", NULL, 0, NULL, NULL, NULL, NULL},
        /* gpt-oss (harmony) */
        {EL_TF_GPT_OSS, EL_REASONING_AUTO, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>", NULL, "Need weather.", 1, "get_weather", W, NULL, NULL},
        {EL_TF_GPT_OSS, EL_REASONING_AUTO, "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>", "Hello!", "Think.", 0, NULL, NULL, NULL, NULL},
        {EL_TF_GPT_OSS, EL_REASONING_NONE, "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi", "Think.\nHi", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_GPT_OSS, 0, "<|start|>assistant to=functions.a<|channel|>commentary json<|message|>{}<|call|>", NULL, NULL, 1, "a", "{}", NULL, NULL},
        {EL_TF_GPT_OSS, 0, "<|channel|>commentary to=functions.a<|message|>{\"x\": ", "<|channel|>commentary to=functions.a<|message|>{\"x\":", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_GPT_OSS, 0, "plain text", "plain text", NULL, 0, NULL, NULL, NULL, NULL},
        /* no format: all content */
        {EL_TF_NONE, 0, "  <tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call> ", "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>", NULL, 0, NULL, NULL, NULL, NULL},
        {EL_TF_NONE, 0, "", NULL, NULL, 0, NULL, NULL, NULL, NULL},
    };
    check_cases(cases, sizeof cases / sizeof *cases);
}

/* Huge and hostile replies: every format, linear time, no crash, calls only where the grammar of the format holds. */
static void test_hostile(void) {
    const size_t n = 200000;
    char *big = malloc(n * 16 + 256);
    CHECK(big != NULL);
    if (!big) return;
    static const char *const units[] = {"{\"name\"", "<tool_call>", "[TOOL_CALLS]", "<function=a>", ">>>", "<|START_ACTION|>",
                                        DCB, "<|tool_call|>", "<|message|>", "<think>", "</think>", "{[{[{["};
    for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
        size_t l = 0, ul = strlen(units[u]);
        while (l + ul < n) memcpy(big + l, units[u], ul), l += ul;
        for (int f = 0; f <= EL_TF_GPT_OSS; f++)
            for (int rf = 0; rf < 3; rf++) {
                el_tool_parsed r;
                CHECK(el_tool_format_parse((el_tool_format)f, (el_reasoning_format)rf, big, l, &r) == 0);
                CHECKF(r.n_calls == 0 || u == 4, "unit %zu format %d: %d calls", u, f, r.n_calls);
                el_tool_parsed_free(&r);
            }
    }
    /* a huge argument string is parsed whole */
    size_t l = (size_t)sprintf(big, "<tool_call>{\"name\": \"a\", \"arguments\": {\"s\": \"");
    memset(big + l, 'x', n * 8);
    l += n * 8;
    l += (size_t)sprintf(big + l, "\"}}</tool_call>");
    el_tool_parsed r;
    CHECK(el_tool_format_parse(EL_TF_HERMES, 0, big, l, &r) == 0 && r.n_calls == 1 && strlen(r.calls[0].arguments) == n * 8 + 8);
    el_tool_parsed_free(&r);
    /* more calls than EL_TOOL_MAX_CALLS: capped; the rest stays content */
    l = 0;
    for (int i = 0; i < EL_TOOL_MAX_CALLS + 10; i++) l += (size_t)sprintf(big + l, "<function=f>{}</function>");
    CHECK(el_tool_format_parse(EL_TF_FUNCTIONARY31, 0, big, l, &r) == 0 && r.n_calls == EL_TOOL_MAX_CALLS && r.content);
    el_tool_parsed_free(&r);
    /* NUL bytes inside a call: never a call, never read past len */
    const char nul[] = "<tool_call>{\"name\": \"a\",\0 \"arguments\": {}}</tool_call>";
    CHECK(el_tool_format_parse(EL_TF_HERMES, 0, nul, sizeof nul - 1, &r) == 0 && r.n_calls == 0);
    el_tool_parsed_free(&r);
    CHECK(el_tool_format_parse(EL_TF_MISTRAL_NEMO, 0, "[TOOL_CALLS][{\"name\":\"a\",\"arguments\":{}}]", 20, &r) == 0 && r.n_calls == 0);
    el_tool_parsed_free(&r);
    CHECK(el_tool_format_parse(EL_TF_HERMES, 0, NULL, 5, &r) == 0 && r.n_calls == 0 && !r.content);
    el_tool_parsed_free(&r);
    free(big);
}

int main(void) {
    test_detect();
    test_formats();
    test_hostile();
    return el_test_finish("test_toolformat");
}
