/*
 * constrain.c — grammar-constrained sampling glue (see constrain.h).
 *
 * The vocabulary trie is built from every token's text the first time a
 * grammar is used with a model and published with a compare-and-swap, so
 * concurrent first uses build it at most once each and keep exactly one;
 * el_model_free releases it.
 */
#include "runtime/constrain.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define PIECE_CAP 512 /* as el_generate's piece buffer: a longer piece is delivered as empty */

struct el_constraint {
    el_model *m;
    el_grammar *g;
    el_gmatch *mt;
    const el_gtrie *trie;
    el_sampler_filter f;
    char piece[PIECE_CAP];
};

static int token_text(const el_model *m, int32_t id, char *buf) {
    int l = el_vocab_token_to_piece(m->vocab, id, buf, PIECE_CAP, false);
    return l < 0 || l > PIECE_CAP ? 0 : l;
}

const el_gtrie *el_model_vocab_trie(el_model *m) {
    el_gtrie *t = atomic_load(&m->gtrie);
    if (t) return t;
    const int n = el_vocab_n_tokens(m->vocab);
    char **text = calloc((size_t)n, sizeof *text);
    int *len = calloc((size_t)n, sizeof *len);
    char *buf = malloc(PIECE_CAP);
    bool ok = text && len && buf;
    for (int i = 0; ok && i < n; i++) {
        len[i] = token_text(m, i, buf);
        text[i] = malloc((size_t)len[i] + 1);
        if (!text[i]) ok = false;
        else memcpy(text[i], buf, (size_t)len[i]);
    }
    if (ok) t = el_gtrie_new(n, (const char *const *)text, len);
    for (int i = 0; text && i < n; i++) free(text[i]);
    free(text);
    free(len);
    free(buf);
    if (!t) return NULL;
    el_gtrie *expected = NULL;
    if (!atomic_compare_exchange_strong(&m->gtrie, &expected, t)) {
        el_gtrie_free(t);
        return expected;
    }
    el_logf(m, EL_LOG_DEBUG, "grammar: vocabulary trie of %d tokens, %zu bytes", n, el_gtrie_bytes(t));
    return t;
}

static int allowed_cb(void *u, int32_t id) {
    el_constraint *c = u;
    if (el_vocab_is_eog(c->m->vocab, id)) return el_gmatch_can_end(c->mt);
    int l = token_text(c->m, id, c->piece);
    return l > 0 ? el_gmatch_check(c->mt, c->piece, (size_t)l) : 0;
}

static int mask_cb(void *u, uint8_t *flags) {
    el_constraint *c = u;
    int cnt = el_gmatch_mask(c->mt, c->trie, flags);
    if (cnt < 0) return cnt;
    const bool end = el_gmatch_can_end(c->mt);
    const int n = el_vocab_n_tokens(c->m->vocab);
    for (int i = 0; i < n; i++)
        if (el_vocab_is_eog(c->m->vocab, i) && flags[i] != end) { /* an EOG token's text may be non-empty */
            cnt += end ? 1 : -1;
            flags[i] = end;
        }
    return cnt;
}

el_constraint *el_constraint_new(el_model *m, const char *gbnf, el_error *err) {
    if (!m || !gbnf) { el_set_error(err, EL_ERR_INVALID_ARG, "grammar: NULL"); return NULL; }
    el_constraint *c = calloc(1, sizeof *c);
    if (!c) { el_set_error(err, EL_ERR_NOMEM, "grammar: out of memory"); return NULL; }
    c->m = m;
    c->g = el_grammar_parse(gbnf, strlen(gbnf), err);
    if (!c->g) goto fail;
    c->mt = el_gmatch_new(c->g, err);
    if (!c->mt) goto fail;
    c->trie = el_model_vocab_trie(m);
    if (!c->trie) { el_set_error(err, EL_ERR_NOMEM, "grammar: out of memory for the vocabulary trie"); goto fail; }
    c->f = (el_sampler_filter){.allowed = allowed_cb, .mask = mask_cb, .user = c};
    return c;
fail:
    el_constraint_free(c);
    return NULL;
}

void el_constraint_free(el_constraint *c) {
    if (!c) return;
    el_gmatch_free(c->mt);
    el_grammar_free(c->g);
    free(c);
}

const el_sampler_filter *el_constraint_filter(el_constraint *c) { return c ? &c->f : NULL; }

int el_constraint_accept(el_constraint *c, int32_t tok, el_error *err) {
    if (el_vocab_is_eog(c->m->vocab, tok)) return 0;
    int l = token_text(c->m, tok, c->piece);
    return el_gmatch_accept(c->mt, c->piece, (size_t)l, err);
}
