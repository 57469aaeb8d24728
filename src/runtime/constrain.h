/*
 * constrain.h — a grammar bound to a model's vocabulary for el_generate: the
 * per-request matcher, the sampler filter that asks it about token texts, and
 * the model's vocabulary trie (built on first use, then shared read-only by
 * every session of the model).
 *
 * Contract: a token is allowed when its text (el_vocab_token_to_piece,
 * special = false: the bytes el_generate delivers) is accepted from the
 * current state; an end-of-generation token is allowed exactly when the
 * grammar can end; any other token with empty text (control tokens) never is.
 */
#ifndef EL_RUNTIME_CONSTRAIN_H
#define EL_RUNTIME_CONSTRAIN_H
#include "runtime/grammar.h"
#include "runtime/model.h"
#include "runtime/sampler.h"

typedef struct el_constraint el_constraint;

/* Compiles gbnf (NUL-terminated) for model m; NULL with err (EL_ERR_GRAMMAR
 * with the position, EL_ERR_NOMEM) on failure. */
el_constraint *el_constraint_new(el_model *m, const char *gbnf, el_error *err);
void el_constraint_free(el_constraint *c);
const el_sampler_filter *el_constraint_filter(el_constraint *c);
/* Advances past token tok (which the filter allowed). 0 or EL_ERR_GRAMMAR. */
int el_constraint_accept(el_constraint *c, int32_t tok, el_error *err);
/* The model's trie (built once; NULL when out of memory). */
const el_gtrie *el_model_vocab_trie(el_model *m);

#endif
