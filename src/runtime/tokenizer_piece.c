/*
 * tokenizer_piece.c — token ids back to text: llama_token_to_piece, and the
 * streaming detokenizer that releases only complete UTF-8 sequences
 * (contract in tokenizer.h).
 *
 * Pieces: control and unknown tokens render their text only when `special`;
 * user-defined tokens always as their text; normal SPM tokens with U+2581 →
 * ' '; normal BPE tokens through GPT-2's unicode→byte map (a code point
 * outside it as "[UNK_BYTE_0x…]" followed by the token's text, as
 * llama.cpp); byte tokens <0xXX> as that byte. Written straight into the
 * caller's buffer, allocating nothing (this runs once per generated token).
 */
#include "runtime/tokenizer_internal.h"

#include <stdio.h>

#include "util/utf8.h"

/* ---- token → piece ------------------------------------------------------ */
static int put_piece(const char *s, size_t n, char *buf, int cap) {
    if (n > (size_t)INT32_MAX) return -1;
    if ((size_t)cap >= n && n) memcpy(buf, s, n);
    return (int)n;
}

/* Appends k bytes at *o if they fit in cap; always advances *o (the needed length). */
static void piece_emit(char *buf, int cap, size_t *o, const void *p, size_t k) {
    if (k && *o + k <= (size_t)cap) memcpy(buf + *o, p, k);
    *o += k;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int token_byte(const el_vocab *v, int32_t id) {
    /* strtol(text.substr(3, 2), 16) */
    const char *t = v->blob + v->toff[id];
    uint32_t n = v->tlen[id];
    int r = 0;
    for (uint32_t i = 3; i < 5 && i < n; i++) {
        int h = hexval(t[i]);
        if (h < 0) break;
        r = r * 16 + h;
    }
    return r & 0xff;
}

int el_vocab_token_to_piece(const el_vocab *v, int32_t id, char *buf, int cap, bool special) {
    if (!v || id < 0 || id >= v->n_tokens || cap < 0 || (cap > 0 && !buf)) return -1;
    uint16_t a = v->attr[id];
    if (!special && (a & (ATTR_UNKNOWN | ATTR_CONTROL))) return 0;
    const char *t = v->blob + v->toff[id];
    size_t n = v->tlen[id];
    if (a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) return put_piece(t, n, buf, cap);
    if (a & ATTR_NORMAL) {
        /* Written straight into buf: this runs once per generated token, and the
         * decode loop allocates nothing. The full length is returned even when
         * buf is too small (then buf holds a prefix). */
        size_t o = 0;
        if (v->type == VOCAB_SPM) {
            for (size_t i = 0; i < n; i++) {
                if (i + 3 <= n && memcmp(t + i, "\xe2\x96\x81", 3) == 0) { piece_emit(buf, cap, &o, " ", 1); i += 2; }
                else piece_emit(buf, cap, &o, &t[i], 1);
            }
        } else {
            size_t at = 0;
            while (at < n) {
                uint32_t c = cpt_decode((const uint8_t *)t, n, &at);
                if (c < 324 && el_tok_cpt_dec[c] >= 0) {
                    char bt = (char)el_tok_cpt_dec[c];
                    piece_emit(buf, cap, &o, &bt, 1);
                } else {
                    char u[4], hx[8];
                    int ul = cpt_encode(c, u);
                    piece_emit(buf, cap, &o, "[UNK_BYTE_0x", 12);
                    for (int j = 0; j < ul; j++) {
                        snprintf(hx, sizeof hx, "%02x", (uint8_t)u[j]);
                        piece_emit(buf, cap, &o, hx, 2);
                    }
                    piece_emit(buf, cap, &o, t, n);
                    piece_emit(buf, cap, &o, "]", 1);
                }
            }
        }
        return o > (size_t)INT32_MAX ? -1 : (int)o;
    }
    if (a & ATTR_BYTE) {
        char c = (char)token_byte(v, id);
        return put_piece(&c, 1, buf, cap);
    }
    return 0;
}

/* ---- streaming detokenizer ---------------------------------------------- */
void el_detok_init(el_detok *d) {
    if (d) d->n_pending = 0;
}

int el_detok_push(el_detok *d, const char *piece, int len, char *out) {
    if (!d || !out || len < 0 || (len > 0 && !piece)) return 0;
    int np = d->n_pending;
    if (np < 0 || np > 3) np = 0;
    memcpy(out, d->pending, (size_t)np);
    if (len) memcpy(out + np, piece, (size_t)len);
    int total = np + len;
    int hold = (int)el_utf8_incomplete_tail(out, (size_t)total); /* a prefix that can still complete */
    memcpy(d->pending, out + total - hold, (size_t)hold);
    d->n_pending = hold;
    return total - hold;
}

int el_detok_flush(el_detok *d, char *out) {
    if (!d || !out) return 0;
    int np = d->n_pending;
    if (np < 0 || np > 3) np = 0;
    memcpy(out, d->pending, (size_t)np);
    d->n_pending = 0;
    return np;
}
