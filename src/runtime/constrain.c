/*
 * constrain.c — grammar-constrained sampling glue (see constrain.h).
 *
 * The vocabulary trie is built from every token's text the first time a
 * grammar is used with a model and published with a compare-and-swap, so
 * concurrent first uses build it at most once each and keep exactly one;
 * el_model_free releases it.
 *
 * A lazy grammar watches the text through a fixed window (the last
 * EL_CONSTRAINT_MAX_TRIGGER - 1 bytes and the newest piece), taken with the
 * constraint: the decode loop allocates nothing for it.
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
    bool soft; /* the grammar could end after the last non-whitespace bytes accepted (early ending) */
    /* lazy grammar: off until a trigger shows up in win (the last bytes of the text) */
    bool off, dead; /* off: waiting for a trigger; dead: the text after one was rejected (off for good) */
    bool text_seen; /* a non-blank byte has left the window (anchored "^" triggers can no longer match) */
    int n_trig;
    char trig[EL_CONSTRAINT_MAX_TRIGGERS][EL_CONSTRAINT_MAX_TRIGGER + 1];
    char win[EL_CONSTRAINT_MAX_TRIGGER + PIECE_CAP];
    size_t win_len;
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

el_constraint *el_constraint_new(el_model *m, const char *gbnf, const char *const *triggers, el_error *err) {
    if (!m || !gbnf) { el_set_error(err, EL_ERR_INVALID_ARG, "grammar: NULL"); return NULL; }
    el_constraint *c = calloc(1, sizeof *c);
    if (!c) { el_set_error(err, EL_ERR_NOMEM, "grammar: out of memory"); return NULL; }
    c->m = m;
    for (int i = 0; triggers && triggers[i]; i++) {
        size_t l = strlen(triggers[i]);
        if (i >= EL_CONSTRAINT_MAX_TRIGGERS || l == 0 || l > EL_CONSTRAINT_MAX_TRIGGER ||
            (l == 1 && triggers[i][0] == '^')) {
            el_set_error(err, EL_ERR_INVALID_ARG, "grammar trigger %d: %s", i,
                         i >= EL_CONSTRAINT_MAX_TRIGGERS ? "too many triggers (at most 16)"
                                                         : "empty or longer than 64 bytes");
            free(c);
            return NULL;
        }
        memcpy(c->trig[i], triggers[i], l + 1);
        c->n_trig = i + 1;
    }
    c->off = c->n_trig > 0;
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

const el_sampler_filter *el_constraint_filter(el_constraint *c) { return c && !c->off ? &c->f : NULL; }

static bool all_space(const char *p, int n) {
    for (int i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') return false;
    return true;
}

/* A lazy grammar's watch: tok's text joins the window; at the first trigger
 * in it the grammar goes on, fed the text from the trigger's start. */
static int watch(el_constraint *c, int32_t tok) {
    if (c->dead) return 0;
    int l = token_text(c->m, tok, c->piece);
    memcpy(c->win + c->win_len, c->piece, (size_t)l); /* win_len < MAX_TRIGGER, l <= PIECE_CAP */
    c->win_len += (size_t)l;
    size_t at = c->win_len;
    for (int i = 0; i < c->n_trig; i++) {
        const bool anchored = c->trig[i][0] == '^'; /* only where nothing but whitespace precedes it */
        const char *t = c->trig[i] + anchored;
        size_t tl = strlen(t);
        if (anchored && c->text_seen) continue;
        for (size_t p = 0; p + tl <= c->win_len && p < at; p++) {
            if (anchored && p > 0 && !all_space(c->win + p - 1, 1)) break;
            if (!memcmp(c->win + p, t, tl)) { at = p; break; }
        }
    }
    if (at < c->win_len) {
        el_error e2 = {0};
        c->off = false;
        if (el_gmatch_accept(c->mt, c->win + at, c->win_len - at, &e2)) {
            c->off = c->dead = true; /* the text after the trigger is not the grammar's: stays free */
        }
        c->soft = !c->off && el_gmatch_can_end(c->mt);
        c->win_len = 0;
        return 0;
    }
    size_t keep = EL_CONSTRAINT_MAX_TRIGGER - 1; /* a trigger may start in the bytes kept */
    if (c->win_len > keep) {
        if (!all_space(c->win, (int)(c->win_len - keep))) c->text_seen = true; /* non-blank bytes leave the window */
        memmove(c->win, c->win + c->win_len - keep, keep);
        c->win_len = keep;
    }
    return 0;
}


int el_constraint_accept(el_constraint *c, int32_t tok, el_error *err) {
    if (el_vocab_is_eog(c->m->vocab, tok)) return 0;
    if (c->off) return watch(c, tok);
    int l = token_text(c->m, tok, c->piece);
    int rc = el_gmatch_accept(c->mt, c->piece, (size_t)l, err);
    if (rc == 0) c->soft = el_gmatch_can_end(c->mt) || (c->soft && all_space(c->piece, l));
    return rc;
}

bool el_constraint_should_end(el_constraint *c, const float *row, int n_vocab) {
    if (!c || c->off || !row || n_vocab <= 0) return false;
    if (el_gmatch_is_done(c->mt)) return true;
    if (!c->soft) return false;
    int best = 0;
    for (int i = 1; i < n_vocab; i++)
        if (row[i] > row[best]) best = i; /* NaN rows fail in the sampler, after this */
    if (el_vocab_is_eog(c->m->vocab, best)) return true;
    return allowed_cb(c, best) != 1;
}
