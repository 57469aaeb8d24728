/*
 * fuzz_manifest.c — libFuzzer target for the package manifest parser and the
 * store's state parser (src/deploy/manifest_format.c, store.c).
 *
 * Every input goes to el_manifest_parse and el_store_parse_state. A failure
 * must carry a check code and a message. A manifest that parses must keep
 * every promise of manifest.h: format, version >= 1, 1..64 artifacts with
 * plain file names, the signed message starting with the domain prefix and
 * being canonical (parsing its JSON and canonicalizing again gives the same
 * bytes), smoke tokens within n_predict; describing it and checking a
 * signature over it with a fixed key must not crash (and must fail). A state
 * that parses must name slots 'a'/'b', distinct, versions >= 1.
 */
#include <cjson/cJSON.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deploy/manifest.h"
#include "deploy/store.h"
#include "util/buf.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static const char PREFIX[] = "edgellm-manifest-v1\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int inited;
    static uint8_t pk[32], sk[64];
    if (!inited) {
        REQUIRE(el_pkg_init());
        uint8_t seed[32] = {1};
        crypto_sign_seed_keypair(pk, sk, seed);
        inited = 1;
    }
    el_manifest m;
    el_pkg_error e;
    e.msg[0] = 0;
    el_pkg_check c = el_manifest_parse((const char *)data, size, &m, &e);
    if (c != EL_PKG_OK) {
        REQUIRE(c == EL_PKG_ERR_MALFORMED || c == EL_PKG_ERR_IO);
        REQUIRE(e.check == c && e.msg[0]);
    } else {
        REQUIRE(m.version >= 1 && m.n_artifacts >= 1 && m.n_artifacts <= 64);
        for (int i = 0; i < m.n_artifacts; i++) {
            const char *p = m.artifacts[i].path;
            REQUIRE(p[0] && p[0] != '.' && !strchr(p, '/') && strlen(p) <= 255);
        }
        REQUIRE(m.name && m.created && m.expires && m.arch && m.quant_type && m.runtime_min);
        REQUIRE(m.n_device_classes >= 1);
        REQUIRE(!m.has_smoke || (m.n_smoke_tokens <= m.smoke_n_predict && m.n_smoke_prompt_tokens >= 1));
        REQUIRE(m.message_len > sizeof PREFIX - 1 && !memcmp(m.message, PREFIX, sizeof PREFIX - 1));
        /* the signed message is canonical: a fixed point */
        cJSON *v = cJSON_ParseWithLength(m.message + sizeof PREFIX - 1, m.message_len - (sizeof PREFIX - 1));
        REQUIRE(v != NULL);
        el_buf b = {0};
        char why[256];
        REQUIRE(el_manifest_canonical(v, &b, why));
        REQUIRE(b.len == m.message_len - (sizeof PREFIX - 1) && !memcmp(b.p, m.message + sizeof PREFIX - 1, b.len));
        el_buf_free(&b);
        cJSON_Delete(v);
        char line[1024];
        el_pkg_describe(&m, "", line, sizeof line);
        REQUIRE(strlen(line) < sizeof line);
        for (int i = 0; i < m.n_sigs; i++)
            REQUIRE(crypto_sign_verify_detached(m.sigs[i], (const uint8_t *)m.message, m.message_len, pk) != 0);
        el_manifest_free(&m);
    }
    el_store_state st;
    c = el_store_parse_state((const char *)data, size, &st, &e);
    if (c == EL_PKG_OK) {
        if (st.active.present) REQUIRE((st.active.slot == 'a' || st.active.slot == 'b') && st.active.version >= 1);
        if (st.previous.present) REQUIRE(st.active.present && st.previous.slot != st.active.slot && st.previous.version >= 1);
    } else {
        REQUIRE(c == EL_PKG_ERR_STORE && !st.active.present);
    }
    (void)sk;
    return 0;
}
