/*
 * fuzz_accept_record.c — libFuzzer target for the deployment decision
 * record parser and its checks (src/deploy/accept_record.c).
 *
 * A refusal must carry a check code and a message. A record that parses
 * must keep accept_record.h's promises: 1..16 verdicts with a device class,
 * passed <= cells and a "pass" only with every cell passed, at most 16
 * evidence entries with plain names, 1..4 signatures, the signed message
 * beginning with the domain prefix; checking it against a fixed key must
 * fail (nobody holds that key's secret but this target, which never signs)
 * without crashing, and asking for a device class it has no verdict for
 * must not succeed.
 */
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deploy/accept_record.h"
#include "deploy/keys.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int inited;
    static el_pubkey key;
    if (!inited) {
        REQUIRE(el_pkg_init());
        uint8_t seed[32] = {7}, sk[64];
        crypto_sign_seed_keypair(key.pk, sk, seed);
        el_pkg_keyid(key.pk, key.keyid);
        inited = 1;
    }
    el_accept_record r;
    el_pkg_error e;
    e.msg[0] = 0;
    el_pkg_check rc = el_accept_record_parse((const char *)data, size, &r, &e);
    if (rc != EL_PKG_OK) {
        REQUIRE(e.msg[0] != 0);
        return 0;
    }
    REQUIRE(r.n_verdicts >= 1 && r.n_verdicts <= EL_ACCEPT_MAX_CLASSES);
    for (int i = 0; i < r.n_verdicts; i++) {
        REQUIRE(r.verdicts[i].device_class[0]);
        REQUIRE(r.verdicts[i].passed <= r.verdicts[i].cells);
        REQUIRE(!r.verdicts[i].pass || r.verdicts[i].passed == r.verdicts[i].cells);
    }
    REQUIRE(r.n_evidence <= EL_ACCEPT_MAX_EVIDENCE);
    for (int i = 0; i < r.n_evidence; i++) REQUIRE(r.evidence[i].path[0] && !strchr(r.evidence[i].path, '/'));
    REQUIRE(r.n_sigs >= 1 && r.n_sigs <= 4);
    REQUIRE(r.message && r.message_len >= strlen(EL_ACCEPT_RECORD_PREFIX) &&
            !memcmp(r.message, EL_ACCEPT_RECORD_PREFIX, strlen(EL_ACCEPT_RECORD_PREFIX)));
    el_accept_check_opts o = {.trusted = &key, .n_trusted = 1};
    REQUIRE(el_accept_record_check(&r, &o, &e) != EL_PKG_OK);
    el_accept_record_free(&r);
    return 0;
}
