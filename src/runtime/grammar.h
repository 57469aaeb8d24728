/*
 * grammar.h — GBNF grammars (llama.cpp's syntax) for constrained decoding.
 *
 * Contract:
 *   - el_grammar_parse compiles GBNF text into an immutable grammar (shareable
 *     between threads). Errors are EL_ERR_GRAMMAR with "line L, column C: …".
 *     Limits (EL_GRAMMAR_MAX_*) turn huge repetitions, too many rules, deep
 *     nesting or left recursion into errors, never into hangs.
 *   - el_gmatch is one request's matcher: a set of pushdown stacks advanced per
 *     Unicode code point (UTF-8 bytes may be split across tokens). Its memory
 *     is fixed at el_gmatch_new; accepting, checking and masking allocate
 *     nothing. Too many live stacks / too deep a stack is an error
 *     (EL_ERR_GRAMMAR), not growth.
 *   - el_gtrie is a byte trie over a vocabulary's token texts (built once per
 *     model); el_gmatch_mask walks it together with the stacks so that shared
 *     prefixes are matched once and rejected prefixes prune their subtree.
 */
#ifndef EL_RUNTIME_GRAMMAR_H
#define EL_RUNTIME_GRAMMAR_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"

#define EL_GRAMMAR_MAX_TEXT (1u << 20)      /* bytes of GBNF text */
#define EL_GRAMMAR_MAX_ELEMS (1u << 20)     /* compiled elements (after repetition expansion) */
#define EL_GRAMMAR_MAX_RULES 65536
#define EL_GRAMMAR_MAX_NEST 128             /* parenthesis depth */
#define EL_GRAMMAR_MAX_STACKS 1024          /* live stacks in a matcher state */
#define EL_GRAMMAR_MAX_DEPTH 512            /* positions on one stack */

typedef struct el_grammar el_grammar;
typedef struct el_gmatch el_gmatch;
typedef struct el_gtrie el_gtrie;

/* Compiles GBNF text (len bytes, need not be NUL-terminated); the start rule
 * is "root". NULL with err on error. */
el_grammar *el_grammar_parse(const char *text, size_t len, el_error *err);
void el_grammar_free(el_grammar *g);
int el_grammar_n_rules(const el_grammar *g);

el_gmatch *el_gmatch_new(const el_grammar *g, el_error *err);
void el_gmatch_free(el_gmatch *m);
/* Advances the state by bytes. 0 on success; EL_ERR_GRAMMAR (state unchanged,
 * err says why) when the bytes are not accepted or a limit is hit. */
int el_gmatch_accept(el_gmatch *m, const char *bytes, size_t n, el_error *err);
/* 1: bytes would be accepted from the current state (a trailing incomplete
 * UTF-8 sequence counts when some code point it starts could be accepted);
 * 0: not; -1: a limit was hit. The state is not changed. */
int el_gmatch_check(el_gmatch *m, const char *bytes, size_t n);
/* The input so far is a complete sentence (an end-of-generation token is allowed). */
bool el_gmatch_can_end(const el_gmatch *m);
/* Nothing but the end can follow. */
bool el_gmatch_is_done(const el_gmatch *m);

/* A trie over n tokens' texts (text[i], len[i]; len 0 = a token that never
 * matches text). NULL when out of memory. */
el_gtrie *el_gtrie_new(int n, const char *const *text, const int *len);
void el_gtrie_free(el_gtrie *t);
size_t el_gtrie_bytes(const el_gtrie *t);
/* allowed[id] = 1 for every token of the trie whose text the state accepts
 * (el_gmatch_check's rule), else 0. Returns how many are allowed, or -1 when
 * a limit was hit. Tokens with empty text get 0: the caller decides about
 * end-of-generation tokens (el_gmatch_can_end). */
int el_gmatch_mask(el_gmatch *m, const el_gtrie *t, uint8_t *allowed);

#endif
