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
 *
 * Ending early (el_constraint_should_end, used when el_generate_params asks
 * for EL_GRAMMAR_END_EARLY): the generation ends, as if an end-of-generation
 * token had been drawn, when nothing but the end can follow, or when the
 * grammar could end (or could end before the whitespace accepted since) and
 * the model's own first choice — the unconstrained argmax of the row — is a
 * token the grammar would not take here. A tool call is over once its block
 * closes and the model would rather say something else than open another one;
 * the grammar never makes it spend tokens on padding it did not want.
 */
#ifndef EL_RUNTIME_CONSTRAIN_H
#define EL_RUNTIME_CONSTRAIN_H
#include "runtime/grammar.h"
#include "runtime/model.h"
#include "runtime/sampler.h"

typedef struct el_constraint el_constraint;

/* Compiles gbnf (NUL-terminated) for model m; NULL with err (EL_ERR_GRAMMAR
 * with the position, EL_ERR_NOMEM, EL_ERR_INVALID_ARG for an empty or
 * oversized trigger) on failure. triggers: NULL, or a NULL-terminated list
 * of strings (at most EL_CONSTRAINT_MAX_TRIGGERS, each 1..EL_CONSTRAINT_MAX_TRIGGER
 * bytes) that make the grammar lazy: it is off (no filter) until the text of
 * the accepted tokens contains one of them, then the text from that
 * trigger's start is fed to the matcher and the grammar is on; text the
 * grammar rejects there leaves it off for good. A trigger starting with '^'
 * is anchored: the rest of it counts only where nothing but whitespace
 * precedes it in the output. All memory is taken here. */
#define EL_CONSTRAINT_MAX_TRIGGERS 16
#define EL_CONSTRAINT_MAX_TRIGGER 64
el_constraint *el_constraint_new(el_model *m, const char *gbnf, const char *const *triggers, el_error *err);
void el_constraint_free(el_constraint *c);
/* The sampler filter; NULL while a lazy grammar is off. */
const el_sampler_filter *el_constraint_filter(el_constraint *c);
/* Advances past token tok (which the filter allowed, or any token while a
 * lazy grammar is off: then it is only watched for a trigger). 0 or
 * EL_ERR_GRAMMAR. */
int el_constraint_accept(el_constraint *c, int32_t tok, el_error *err);
/* 1: end the generation before drawing from row (the logits of the next
 * token); 0: draw as usual. */
bool el_constraint_should_end(el_constraint *c, const float *row, int n_vocab);
/* The model's trie (built once; NULL when out of memory). */
const el_gtrie *el_model_vocab_trie(el_model *m);

#endif
