/*
 * chat.c — chat template families without a Jinja engine.
 *
 * Detection follows llama.cpp's llm_chat_detect_template: a template text is
 * classified by the special markers it contains (checked in llama.cpp's
 * order, so e.g. a ChatML template that also mentions [INST] stays ChatML).
 * A bare family name ("chatml", "gemma", ...) is accepted too.
 *
 * Rendering reproduces, byte for byte, what the reference template of each
 * family renders through Jinja (HF apply_chat_template semantics) for
 * system/user/assistant messages — see tests/data/chat_templates/ for the
 * exact template texts and tests/tools/gen_chat_goldens.py for the goldens:
 *
 *   chatml  Qwen2.5-Instruct / OpenHermes-2.5: "<|im_start|>role\n{c}<|im_end|>\n".
 *           Qwen2.5's template inserts a default system prompt ("You are Qwen,
 *           created by Alibaba Cloud...") when there is none; we do not — the
 *           caller supplies a system message if it wants one.
 *   llama3  Meta-Llama-3-8B-Instruct: content | trim. (Llama 3.1+ templates
 *           additionally emit a "Cutting Knowledge Date / Today Date" system
 *           preamble; not reproduced.)
 *   llama2  Llama-2-chat: "<s>[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST]
 *           {assistant} </s>" per exchange; content.strip() is applied to the
 *           whole "<<SYS>>...{user}" string. add_generation_prompt is ignored
 *           (the template ignores it too).
 *   mistral Mistral/Mixtral Instruct v0.1 official ("v1"): " [INST] {sys}\n\n
 *           {user} [/INST] {assistant}</s>". No stripping; add_generation_prompt
 *           ignored. Older pre-v1 / v3 / v7 Mistral templates are detected as
 *           this family too but differ from it in whitespace / system handling.
 *   gemma   Gemma 3 -it: a leading system message becomes "{sys}\n\n" in front
 *           of the first turn (system text not trimmed, turn content trimmed);
 *           "assistant" → "model".
 *   phi3    Phi-3.5-mini-instruct: empty system messages are skipped; without
 *           add_generation_prompt the template appends eos_token
 *           ("<|endoftext|>"), and so do we.
 *
 * Tool calls (el_chat_render_tools) for the families that define them:
 *
 *   chatml  Qwen2.5-Instruct's template, byte for byte: with tools, a system
 *           turn "{sys}\n\n# Tools\n\n...<tools>\n{tool}...\n</tools>\n\n
 *           For each function call, ...</tool_call><|im_end|>\n" (without a
 *           system message Qwen inserts its default prompt; we leave the
 *           "{sys}\n\n" out instead); an assistant call is
 *           "\n<tool_call>\n{\"name\": \"N\", \"arguments\": A}\n</tool_call>"
 *           after the (optional) content; consecutive "tool" messages share one
 *           user turn of "\n<tool_response>\n{result}\n</tool_response>".
 *   llama3  Llama-3.2-Instruct's template (Llama 3.1's is the same for JSON
 *           tools): once tools or tool messages are present the conversation
 *           takes the 3.1+ shape — a system turn "Environment: ipython\n"
 *           (with tools) "Cutting Knowledge Date: December 2023\nToday Date:
 *           26 Jul 2024\n\n{sys|trim}" (the template's own default date, for
 *           reproducible prompts), the tools (json.dumps indent 4) in the first
 *           user turn, a call as {"name": "N", "parameters": A} (one per
 *           message, as the template demands), results in "ipython" turns as a
 *           JSON string (the template's tojson of a string).
 *   gemma   Gemma 3 has no tool tokens; edgellm's convention (docs/STRUCTURED.md):
 *           the tool list (json.dumps) and the instruction to answer with
 *           ```tool_code\n{"name": N, "arguments": A}\n``` go in the first
 *           user turn after the system text; a call is that fenced block in the
 *           model turn (several: one block each, "\n" between); consecutive
 *           results share one user turn of ```tool_output\n{result}\n```
 *           blocks. structured/toolcall.c parses and constrains exactly this.
 *
 * Template text vs message content: every byte of a rendering is one or the
 * other. el_chat_render records which (the byte ranges of template text:
 * markers, role names, separators, BOS/EOS text), so that a caller tokenizes
 * only those with special-token parsing (el_chat_tokenize, model.c) and a
 * message that contains "<end_of_turn>" cannot forge a turn.
 *
 * BOS: the tokenizer adds the BOS token, so a bos_token the template renders
 * at the very start of the output ("<s>", "<bos>", "<|begin_of_text|>") is
 * dropped. BOS/EOS text inside the conversation (Llama 2's "</s><s>[INST]")
 * is kept as text; the tokenizer's special-token parsing turns it into ids.
 *
 * trim / strip are Python's str.strip(): Unicode whitespace (ASCII space,
 * \t\n\v\f\r, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-200A, U+2028/2029,
 * U+202F, U+205F, U+3000) is removed at both ends.
 *
 * Messages the reference templates reject (a system message that is not the
 * first one in llama2/mistral/gemma, non-alternating roles) are rendered
 * leniently: a later system message is folded into the next user turn the same
 * way a leading one is; alternation is not enforced.
 */
#include "runtime/chat.h"

#include <stdlib.h>
#include <string.h>

/* ---- output buffer ------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t cap;
    size_t len; /* bytes needed so far (may exceed cap) */
    /* byte ranges of template text (everything else is message content),
     * recorded only when track is set; oom if the list could not grow */
    bool track, oom;
    size_t (*rg)[2];
    int n_rg, cap_rg;
} wbuf;

/* Appends n bytes; tmpl: template text (markers, roles, separators) rather
 * than message content. */
static void put_k(wbuf *w, const char *s, size_t n, bool tmpl) {
    if (w->buf && w->cap > 0 && w->len < w->cap - 1) {
        size_t room = w->cap - 1 - w->len;
        memcpy(w->buf + w->len, s, n < room ? n : room);
    }
    if (tmpl && n > 0 && w->track && !w->oom) {
        if (w->n_rg > 0 && w->rg[w->n_rg - 1][1] == w->len) {
            w->rg[w->n_rg - 1][1] += n;
        } else {
            if (w->n_rg == w->cap_rg) {
                int nc = w->cap_rg ? w->cap_rg * 2 : 16;
                size_t(*p)[2] = realloc(w->rg, (size_t)nc * sizeof *p);
                if (!p) { w->oom = true; w->len += n; return; }
                w->rg = p;
                w->cap_rg = nc;
            }
            w->rg[w->n_rg][0] = w->len;
            w->rg[w->n_rg][1] = w->len + n;
            w->n_rg++;
        }
    }
    w->len += n;
}

static void put_n(wbuf *w, const char *s, size_t n) { put_k(w, s, n, true); }
static void put(wbuf *w, const char *s) { put_n(w, s, strlen(s)); }          /* template text */
static void put_c(wbuf *w, const char *s) { put_k(w, s, strlen(s), false); } /* message content */

/* ---- Python-compatible whitespace strip ---------------------------------- */

/* Byte length of the whitespace code point at s[0..n), or 0 if none. */
static size_t ws_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c == 0xc2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n >= 3) {
        if (c == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3;                /* U+1680 */
        if (c == 0xe2 && s[1] == 0x80 &&
            ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
            return 3;                                                           /* U+2000-200A, 2028, 2029, 202F */
        if (c == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3;                /* U+205F */
        if (c == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3;                /* U+3000 */
    }
    return 0;
}

/* Length of the (possibly invalid) UTF-8 sequence starting at s[0..n). */
static size_t char_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (l > n) return 1;
    for (size_t i = 1; i < l; i++)
        if ((s[i] & 0xc0) != 0x80) return 1;
    return l;
}

/* Emits the concatenation of segs[0..n) with leading/trailing whitespace
 * removed (as Python's (a+b+...).strip()). No whitespace code point spans two
 * segments since each segment is UTF-8 on its own. tmpl[i]: segs[i] is
 * template text (else message content). */
static void put_stripped(wbuf *w, const char *const *segs, const bool *tmpl, int n) {
    int b_seg = n, e_seg = -1;
    size_t b_off = 0, e_off = 0;
    for (int i = 0; i < n; i++) {
        const unsigned char *s = (const unsigned char *)segs[i];
        size_t len = strlen(segs[i]), p = 0;
        while (p < len) {
            size_t wl = ws_len(s + p, len - p);
            if (wl) { p += wl; continue; }
            size_t cl = char_len(s + p, len - p);
            if (b_seg == n) { b_seg = i; b_off = p; }
            e_seg = i; e_off = p + cl;
            p += cl;
        }
    }
    if (e_seg < 0) return; /* all whitespace */
    for (int i = b_seg; i <= e_seg; i++) {
        size_t from = i == b_seg ? b_off : 0;
        size_t to = i == e_seg ? e_off : strlen(segs[i]);
        put_k(w, segs[i] + from, to - from, tmpl[i]);
    }
}

static void put_trim_c(wbuf *w, const char *s) { /* message content, trimmed */
    const bool content = false;
    put_stripped(w, &s, &content, 1);
}

/* ---- roles / families ---------------------------------------------------- */

typedef enum { R_SYSTEM, R_USER, R_ASSISTANT, R_TOOL } role_t;

static int parse_role(const char *r) {
    if (!r) return -1;
    if (!strcmp(r, "system")) return R_SYSTEM;
    if (!strcmp(r, "user")) return R_USER;
    if (!strcmp(r, "assistant")) return R_ASSISTANT;
    if (!strcmp(r, "tool")) return R_TOOL;
    return -1;
}

static const char *const family_names[EL_CHAT_COUNT] = {
    [EL_CHAT_UNKNOWN] = "unknown", [EL_CHAT_CHATML] = "chatml", [EL_CHAT_LLAMA3] = "llama3",
    [EL_CHAT_LLAMA2] = "llama2",   [EL_CHAT_MISTRAL] = "mistral", [EL_CHAT_GEMMA] = "gemma",
    [EL_CHAT_PHI3] = "phi3",
};

const char *el_chat_family_name(el_chat_family f) {
    if ((int)f < 0 || f >= EL_CHAT_COUNT) return "unknown";
    return family_names[f];
}

el_chat_family el_chat_family_from_name(const char *name) {
    if (!name) return EL_CHAT_UNKNOWN;
    for (int f = 1; f < EL_CHAT_COUNT; f++)
        if (!strcmp(name, family_names[f])) return (el_chat_family)f;
    return EL_CHAT_UNKNOWN;
}

el_chat_family el_chat_detect(const char *t) {
    if (!t) return EL_CHAT_UNKNOWN;
    el_chat_family byname = el_chat_family_from_name(t);
    if (byname != EL_CHAT_UNKNOWN) return byname;
#define HAS(s) (strstr(t, (s)) != NULL)
    if (HAS("<|im_start|>")) {
        /* Phi-4 (<|im_sep|>) and SmolVLM (<end_of_utterance>) only look like ChatML */
        if (HAS("<|im_sep|>") || HAS("<end_of_utterance>")) return EL_CHAT_UNKNOWN;
        return EL_CHAT_CHATML;
    }
    if (strncmp(t, "mistral", 7) == 0 || HAS("[INST]"))
        return HAS("<<SYS>>") ? EL_CHAT_LLAMA2 : EL_CHAT_MISTRAL;
    if (HAS("<|assistant|>") && HAS("<|end|>")) return EL_CHAT_PHI3;
    if (HAS("<start_of_turn>")) return EL_CHAT_GEMMA;
    if (HAS("<|start_header_id|>") && (HAS("<|end_header_id|>") || HAS("<|eot_id|>")))
        return EL_CHAT_LLAMA3;
#undef HAS
    return EL_CHAT_UNKNOWN;
}

/* ---- renderers ------------------------------------------------------------ */

static const char *content_of(const el_chat_msg *m) { return m->content ? m->content : ""; }
#define ROLE(i) parse_role(m[(i)].role) /* validated by el_chat_apply */

static void render_chatml(wbuf *w, const el_chat_msg *m, int n, bool gen) {
    for (int i = 0; i < n; i++) {
        put(w, "<|im_start|>");
        put(w, m[i].role);
        put(w, "\n");
        put_c(w, content_of(&m[i]));
        put(w, "<|im_end|>\n");
    }
    if (gen) put(w, "<|im_start|>assistant\n");
}

static void render_llama3(wbuf *w, const el_chat_msg *m, int n, bool gen) {
    for (int i = 0; i < n; i++) {
        put(w, "<|start_header_id|>");
        put(w, m[i].role);
        put(w, "<|end_header_id|>\n\n");
        put_trim_c(w, content_of(&m[i]));
        put(w, "<|eot_id|>");
    }
    if (gen) put(w, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_llama2(wbuf *w, const el_chat_msg *m, int n) {
    const char *sys = NULL; /* pending system text for the next turn */
    for (int i = 0; i < n; i++) {
        const char *c = content_of(&m[i]);
        if (ROLE(i) == R_SYSTEM) { sys = c; continue; }
        const char *segs[4];
        bool tmpl[4];
        int ns = 0;
        if (sys) {
            tmpl[ns] = true, segs[ns++] = "<<SYS>>\n";
            tmpl[ns] = false, segs[ns++] = sys;
            tmpl[ns] = true, segs[ns++] = "\n<</SYS>>\n\n";
            sys = NULL;
        }
        tmpl[ns] = false, segs[ns++] = c;
        if (ROLE(i) == R_USER) {
            if (w->len > 0) put(w, "<s>"); /* bos_token; the leading one is the tokenizer's */
            put(w, "[INST] ");
            put_stripped(w, segs, tmpl, ns);
            put(w, " [/INST]");
        } else {
            put(w, " ");
            put_stripped(w, segs, tmpl, ns);
            put(w, " </s>");
        }
    }
}

static void render_mistral(wbuf *w, const el_chat_msg *m, int n) {
    const char *sys = NULL;
    for (int i = 0; i < n; i++) {
        const char *c = content_of(&m[i]);
        if (ROLE(i) == R_SYSTEM) { sys = c; continue; }
        if (ROLE(i) == R_USER) {
            put(w, " [INST] ");
            if (sys) {
                put_c(w, sys);
                put(w, "\n\n");
                sys = NULL;
            }
            put_c(w, c);
            put(w, " [/INST]");
        } else {
            put(w, " ");
            put_c(w, c);
            put(w, "</s>");
        }
    }
}

static void render_gemma(wbuf *w, const el_chat_msg *m, int n, bool gen) {
    const char *sys = NULL;
    for (int i = 0; i < n; i++) {
        const char *c = content_of(&m[i]);
        if (ROLE(i) == R_SYSTEM) { sys = c; continue; }
        put(w, ROLE(i) == R_USER ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
        if (sys) {
            put_c(w, sys);
            put(w, "\n\n");
            sys = NULL;
        }
        put_trim_c(w, c);
        put(w, "<end_of_turn>\n");
    }
    if (gen) put(w, "<start_of_turn>model\n");
}

static void render_phi3(wbuf *w, const el_chat_msg *m, int n, bool gen) {
    static const char *const tag[] = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"};
    for (int i = 0; i < n; i++) {
        const char *c = content_of(&m[i]);
        if (ROLE(i) == R_SYSTEM && !*c) continue;
        put(w, tag[ROLE(i)]);
        put_c(w, c);
        put(w, "<|end|>\n");
    }
    put(w, gen ? "<|assistant|>\n" : "<|endoftext|>");
}

/* ---- tool calls ------------------------------------------------------------ */

typedef struct {
    const el_chat_tool *tools;
    int n;
} tools_t;

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* Python's json.dumps(s) of a str (ensure_ascii=False): message content. */
static void put_pystr_c(wbuf *w, const char *s) {
    put_k(w, "\"", 1, false);
    const char *run = s;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            static const char hx[] = "0123456789abcdef";
            u[0] = '\\', u[1] = 'u', u[2] = '0', u[3] = '0', u[4] = hx[c >> 4], u[5] = hx[c & 15], u[6] = 0;
            esc = u;
        }
        if (!esc) continue;
        put_k(w, run, (size_t)(p - run), false);
        put_k(w, esc, strlen(esc), false);
        run = p + 1;
    }
    put_k(w, run, strlen(run), false);
    put_k(w, "\"", 1, false);
}

static bool has_tool_msgs(const el_chat_msg *m, int n) {
    for (int i = 0; i < n; i++)
        if (m[i].n_tool_calls > 0 || parse_role(m[i].role) == R_TOOL) return true;
    return false;
}

/* Qwen2.5-Instruct (see the file comment). */
static void render_chatml_tools(wbuf *w, const el_chat_msg *m, int n, const tools_t *t, bool gen) {
    int i0 = 0;
    if (t->n > 0) {
        put(w, "<|im_start|>system\n");
        if (n > 0 && ROLE(0) == R_SYSTEM) {
            put_c(w, content_of(&m[0]));
            put(w, "\n\n");
            i0 = 1;
        }
        put(w, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
        for (int k = 0; k < t->n; k++) {
            put(w, "\n");
            put_c(w, str_or_empty(t->tools[k].json));
        }
        put(w, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
               "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
               "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
    }
    for (int i = i0; i < n; i++) {
        int r = ROLE(i);
        if (r == R_ASSISTANT && m[i].n_tool_calls > 0) {
            put(w, "<|im_start|>assistant");
            if (m[i].content && *m[i].content) {
                put(w, "\n");
                put_c(w, m[i].content);
            }
            for (int k = 0; k < m[i].n_tool_calls; k++) {
                put(w, "\n<tool_call>\n{\"name\": \"");
                put_c(w, str_or_empty(m[i].tool_calls[k].name));
                put(w, "\", \"arguments\": ");
                put_c(w, str_or_empty(m[i].tool_calls[k].arguments));
                put(w, "}\n</tool_call>");
            }
            put(w, "<|im_end|>\n");
        } else if (r == R_TOOL) {
            if (i == 0 || ROLE(i - 1) != R_TOOL) put(w, "<|im_start|>user");
            put(w, "\n<tool_response>\n");
            put_c(w, content_of(&m[i]));
            put(w, "\n</tool_response>");
            if (i == n - 1 || ROLE(i + 1) != R_TOOL) put(w, "<|im_end|>\n");
        } else {
            put(w, "<|im_start|>");
            put(w, m[i].role);
            put(w, "\n");
            put_c(w, content_of(&m[i]));
            put(w, "<|im_end|>\n");
        }
    }
    if (gen) put(w, "<|im_start|>assistant\n");
}

/* Llama 3.2-Instruct (see the file comment). false: a conversation the template refuses. */
static bool render_llama3_tools(wbuf *w, const el_chat_msg *m, int n, const tools_t *t, bool gen) {
    int i = 0;
    put(w, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (t->n > 0) put(w, "Environment: ipython\n");
    put(w, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
    if (n > 0 && ROLE(0) == R_SYSTEM) put_trim_c(w, content_of(&m[i++]));
    put(w, "<|eot_id|>");
    if (t->n > 0) {
        if (i >= n) return false; /* "Cannot put tools in the first user message when there's no first user message!" */
        put(w, "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a "
               "JSON for a function call with its proper arguments that best answers the given prompt.\n\n"
               "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and "
               "its value}.Do not use variables.\n\n");
        for (int k = 0; k < t->n; k++) {
            put_c(w, str_or_empty(t->tools[k].json_indent4));
            put(w, "\n\n");
        }
        put_trim_c(w, content_of(&m[i++]));
        put(w, "<|eot_id|>");
    }
    for (; i < n; i++) {
        int r = ROLE(i);
        if (m[i].n_tool_calls > 0) {
            if (m[i].n_tool_calls != 1) return false; /* "This model only supports single tool-calls at once!" */
            put(w, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
            put_c(w, str_or_empty(m[i].tool_calls[0].name));
            put(w, "\", \"parameters\": ");
            put_c(w, str_or_empty(m[i].tool_calls[0].arguments));
            put(w, "}<|eot_id|>");
        } else if (r == R_TOOL) {
            put(w, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            put_pystr_c(w, content_of(&m[i]));
            put(w, "<|eot_id|>");
        } else {
            put(w, "<|start_header_id|>");
            put(w, m[i].role);
            put(w, "<|end_header_id|>\n\n");
            put_trim_c(w, content_of(&m[i]));
            put(w, "<|eot_id|>");
        }
    }
    if (gen) put(w, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return true;
}

/* edgellm's Gemma convention (see the file comment). */
static void render_gemma_tools(wbuf *w, const el_chat_msg *m, int n, const tools_t *t, bool gen) {
    const char *sys = NULL;
    bool tools_due = t->n > 0;
    for (int i = 0; i < n; i++) {
        int r = ROLE(i);
        if (r == R_SYSTEM) { sys = content_of(&m[i]); continue; }
        if (r == R_TOOL) {
            if (i == 0 || ROLE(i - 1) != R_TOOL) put(w, "<start_of_turn>user\n");
            else put(w, "\n");
            put(w, "```tool_output\n");
            put_c(w, content_of(&m[i]));
            put(w, "\n```");
            if (i == n - 1 || ROLE(i + 1) != R_TOOL) put(w, "<end_of_turn>\n");
            continue;
        }
        put(w, r == R_USER ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
        if (sys) {
            put_c(w, sys);
            put(w, "\n\n");
            sys = NULL;
        }
        if (tools_due) {
            put(w, "You have access to the following functions:\n");
            for (int k = 0; k < t->n; k++) {
                put_c(w, str_or_empty(t->tools[k].json));
                put(w, "\n");
            }
            put(w, "\nTo call a function, reply with only\n```tool_code\n{\"name\": <function-name>, "
                   "\"arguments\": <args-json-object>}\n```\n(one block per call). Results come back in "
                   "```tool_output blocks.\n\n");
            tools_due = false;
        }
        size_t before = w->len;
        put_trim_c(w, content_of(&m[i]));
        for (int k = 0; r == R_ASSISTANT && k < m[i].n_tool_calls; k++) {
            if (w->len > before) put(w, "\n");
            put(w, "```tool_code\n{\"name\": \"");
            put_c(w, str_or_empty(m[i].tool_calls[k].name));
            put(w, "\", \"arguments\": ");
            put_c(w, str_or_empty(m[i].tool_calls[k].arguments));
            put(w, "}\n```");
        }
        put(w, "<end_of_turn>\n");
    }
    if (gen) put(w, "<start_of_turn>model\n");
}

bool el_chat_family_has_tools(el_chat_family f) {
    return f == EL_CHAT_CHATML || f == EL_CHAT_LLAMA3 || f == EL_CHAT_GEMMA;
}

static bool render_t(wbuf *w, el_chat_family f, const el_chat_msg *msgs, int n_msgs, const tools_t *t,
                     bool add_generation_prompt) {
    if (f <= EL_CHAT_UNKNOWN || f >= EL_CHAT_COUNT) return false;
    if (n_msgs < 0 || (n_msgs > 0 && !msgs)) return false;
    if (t->n < 0 || (t->n > 0 && !t->tools)) return false;
    /* Roles are validated up front so nothing is written for a bad message list. */
    for (int i = 0; i < n_msgs; i++) {
        int r = parse_role(msgs[i].role);
        if (r < 0 || msgs[i].n_tool_calls < 0 || (msgs[i].n_tool_calls > 0 && (r != R_ASSISTANT || !msgs[i].tool_calls)))
            return false;
    }
    if (t->n > 0 || has_tool_msgs(msgs, n_msgs)) {
        switch (f) {
        case EL_CHAT_CHATML: render_chatml_tools(w, msgs, n_msgs, t, add_generation_prompt); return true;
        case EL_CHAT_LLAMA3: return render_llama3_tools(w, msgs, n_msgs, t, add_generation_prompt);
        case EL_CHAT_GEMMA: render_gemma_tools(w, msgs, n_msgs, t, add_generation_prompt); return true;
        default: return false; /* no tool-call convention */
        }
    }
    switch (f) {
    case EL_CHAT_CHATML: render_chatml(w, msgs, n_msgs, add_generation_prompt); break;
    case EL_CHAT_LLAMA3: render_llama3(w, msgs, n_msgs, add_generation_prompt); break;
    case EL_CHAT_LLAMA2: render_llama2(w, msgs, n_msgs); break;
    case EL_CHAT_MISTRAL: render_mistral(w, msgs, n_msgs); break;
    case EL_CHAT_GEMMA: render_gemma(w, msgs, n_msgs, add_generation_prompt); break;
    case EL_CHAT_PHI3: render_phi3(w, msgs, n_msgs, add_generation_prompt); break;
    default: return false;
    }
    return true;
}

static bool render(wbuf *w, el_chat_family f, const el_chat_msg *msgs, int n_msgs, bool add_generation_prompt) {
    const tools_t none = {NULL, 0};
    return render_t(w, f, msgs, n_msgs, &none, add_generation_prompt);
}

size_t el_chat_apply(el_chat_family f, const el_chat_msg *msgs, int n_msgs,
                     bool add_generation_prompt, char *buf, size_t cap) {
    wbuf w = {.buf = buf, .cap = buf ? cap : 0};
    if (!render(&w, f, msgs, n_msgs, add_generation_prompt)) return (size_t)-1;
    if (buf && cap > 0) buf[w.len < cap ? w.len : cap - 1] = '\0';
    return w.len;
}

int el_chat_render_tools(el_chat_family f, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools,
                         int n_tools, bool add_generation_prompt, el_chat_text *out) {
    memset(out, 0, sizeof *out);
    const tools_t t = {tools, n_tools};
    wbuf w = {0};
    if (!render_t(&w, f, msgs, n_msgs, &t, add_generation_prompt)) return -1; /* sizing pass: nothing allocated */
    size_t need = w.len;
    w = (wbuf){.buf = malloc(need + 1), .cap = need + 1, .track = true};
    if (!w.buf) return -2;
    render_t(&w, f, msgs, n_msgs, &t, add_generation_prompt);
    if (w.oom || w.len != need) {
        free(w.buf);
        free(w.rg);
        return -2;
    }
    w.buf[need] = '\0';
    out->text = w.buf;
    out->len = need;
    out->tmpl = w.rg;
    out->n_tmpl = w.n_rg;
    return 0;
}

int el_chat_render(el_chat_family f, const el_chat_msg *msgs, int n_msgs, bool add_generation_prompt,
                   el_chat_text *out) {
    return el_chat_render_tools(f, msgs, n_msgs, NULL, 0, add_generation_prompt, out);
}

int el_chat_tokenize_tools(const struct el_model *m, el_chat_family f, const el_chat_msg *msgs, int n_msgs,
                           const el_chat_tool *tools, int n_tools, bool add_generation_prompt, int flags,
                           int32_t **out) {
    *out = NULL;
    el_chat_text t;
    int rc = el_chat_render_tools(f, msgs, n_msgs, tools, n_tools, add_generation_prompt, &t);
    if (rc) return rc;
    if (t.len > (size_t)INT32_MAX / 2 - 16) { el_chat_text_free(&t); return -3; }
    int cap = (int)t.len + 16, n = -1;
    int32_t *ids = NULL;
    for (int attempt = 0; attempt < 2; attempt++) { /* a second pass only if the first guess was short */
        free(ids);
        ids = malloc((size_t)cap * sizeof *ids);
        n = ids ? el_chat_tokenize_text(m, &t, 0, flags, ids, cap) : -2;
        if (n <= cap) break;
        cap = n;
    }
    el_chat_text_free(&t);
    if (n < 0 || n > cap) {
        free(ids);
        return n == -2 ? -2 : -3;
    }
    *out = ids;
    return n;
}

void el_chat_text_free(el_chat_text *t) {
    if (!t) return;
    free(t->text);
    free(t->tmpl);
    memset(t, 0, sizeof *t);
}
