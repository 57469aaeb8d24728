/*
 * cmd_package.c — signed model packages on the command line:
 *
 *   edgellm keygen --out NAME [--force]                 NAME.sec (0600) + NAME.pub
 *   edgellm sign --key NAME.sec MODEL.gguf [--version N] [--expires DATE] [...]
 *                                                       writes MODEL.gguf.manifest.json
 *   edgellm verify --pub NAME.pub MODEL.gguf [--min-version N] [--smoke]
 *
 * A failed check prints "error: <check> check failed: <what>" and exits with
 * 10 + the check's code (cli_pkg_fail, load_check.c; see pkg_error.h), so
 * each failure has its own status. The check `run`, `chat`, `serve` and
 * `act` make before loading a model is in load_check.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "deploy/manifest.h"

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* ---- keygen ------------------------------------------------------------ */

int cli_cmd_keygen(int argc, char **argv) {
    const char *out = NULL;
    bool force = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--force")) force = true;
        else return cli_usage_error("keygen", "unknown or incomplete option '%s' (usage: keygen --out NAME [--force])", argv[i]);
    }
    if (!out) return cli_usage_error("keygen", "missing --out NAME");
    el_pubkey pk;
    el_pkg_error e;
    if (el_pkg_keygen(out, force, &pk, &e)) return cli_pkg_fail(&e);
    printf("wrote %s.sec (keep it secret) and %s.pub; key id %s\n", out, out, pk.keyid);
    return CLI_EXIT_OK;
}

/* ---- sign -------------------------------------------------------------- */

#define MAX_LIST 32

int cli_cmd_sign(int argc, char **argv) {
    const char *key = NULL, *model = NULL;
    el_pkg_sign_params p;
    memset(&p, 0, sizeof p);
    p.version = 1;
    p.smoke = true;
    const char *classes[MAX_LIST], *extras[MAX_LIST];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE(flag) (!strcmp(a, flag) && v && (i++, true))
        if (TAKE("--key")) key = v;
        else if (TAKE("--version")) {
            if (!parse_i64(v, 1, 9007199254740992LL, &p.version))
                return cli_usage_error("sign", "--version: expected an integer >= 1, got '%s'", v);
        } else if (TAKE("--expires")) {
            if (!el_pkg_parse_date(v, &p.expires_t))
                return cli_usage_error("sign", "--expires: expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, got '%s'", v);
        } else if (TAKE("--name")) p.name = v;
        else if (TAKE("--source")) p.source_checkpoint = v;
        else if (TAKE("--revision")) p.source_revision = v;
        else if (TAKE("--converter")) p.converter = v;
        else if (TAKE("--quant-config")) p.quant_config = v;
        else if (TAKE("--runtime-min")) p.runtime_min = v;
        else if (TAKE("--device-class")) {
            if (p.n_device_classes >= MAX_LIST) return cli_usage_error("sign", "too many --device-class");
            classes[p.n_device_classes++] = v;
        } else if (TAKE("--artifact")) {
            if (p.n_extra >= MAX_LIST) return cli_usage_error("sign", "too many --artifact");
            extras[p.n_extra++] = v;
        } else if (TAKE("--smoke-prompt")) p.smoke_prompt = v;
        else if (TAKE("--smoke-n")) {
            int64_t n;
            if (!parse_i64(v, 1, 256, &n)) return cli_usage_error("sign", "--smoke-n: expected 1..256, got '%s'", v);
            p.smoke_n_predict = (int)n;
        } else if (!strcmp(a, "--no-smoke")) p.smoke = false;
        else if (a[0] == '-') return cli_usage_error("sign", "unknown or incomplete option '%s'", a);
        else if (!model) model = a;
        else return cli_usage_error("sign", "more than one model given ('%s', '%s')", model, a);
#undef TAKE
    }
    if (!key) return cli_usage_error("sign", "missing --key NAME.sec");
    if (!model) return cli_usage_error("sign", "missing MODEL.gguf");
    p.device_classes = classes;
    p.extra_artifacts = extras;
    el_pkg_error e;
    uint8_t sk[EL_PKG_SEC_BYTES];
    el_pubkey pub;
    if (el_pkg_read_sec(key, sk, &pub, &e)) return cli_pkg_fail(&e);
    el_pkg_check c = el_pkg_sign(model, sk, &p, &e);
    memset(sk, 0, sizeof sk);
    if (c) return cli_pkg_fail(&e);
    /* read it back through the verifier, as a user would */
    el_pkg_verify_opts vo = {.trusted = &pub, .n_trusted = 1};
    el_manifest m;
    char by[17], line[1024], mp[PATH_MAX];
    if (el_pkg_verify(model, &vo, &m, by, &e)) return cli_pkg_fail(&e);
    el_pkg_describe(&m, by, line, sizeof line);
    el_pkg_manifest_path(model, mp, sizeof mp);
    printf("wrote %s\n%s\n", mp, line);
    if (m.has_smoke) {
        printf("smoke expectation: %d prompt tokens, %d greedy tokens:", m.n_smoke_prompt_tokens, m.n_smoke_tokens);
        for (int i = 0; i < m.n_smoke_tokens; i++) printf(" %d", (int)m.smoke_tokens[i]);
        putchar('\n');
    }
    el_manifest_free(&m);
    return CLI_EXIT_OK;
}

/* ---- verify ------------------------------------------------------------ */

int cli_cmd_verify(int argc, char **argv) {
    const char *pub = NULL, *model = NULL;
    int64_t min_version = 0;
    bool smoke = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--pub") && i + 1 < argc) pub = argv[++i];
        else if (!strcmp(a, "--min-version") && i + 1 < argc) {
            if (!parse_i64(argv[++i], 0, 9007199254740992LL, &min_version))
                return cli_usage_error("verify", "--min-version: expected an integer >= 0, got '%s'", argv[i]);
        } else if (!strcmp(a, "--smoke")) smoke = true;
        else if (a[0] == '-') return cli_usage_error("verify", "unknown or incomplete option '%s'", a);
        else if (!model) model = a;
        else return cli_usage_error("verify", "more than one model given");
    }
    if (!model) return cli_usage_error("verify", "missing MODEL.gguf");
    if (!pub) pub = getenv("EL_TRUSTED_KEY");
    if (!pub || !*pub) return cli_usage_error("verify", "missing --pub NAME.pub (or EL_TRUSTED_KEY)");
    el_pkg_error e;
    el_pubkey key;
    if (el_pkg_read_pub(pub, &key, &e)) return cli_pkg_fail(&e);
    el_pkg_verify_opts vo = {.trusted = &key, .n_trusted = 1, .min_version = min_version};
    el_manifest m;
    char by[17], line[1024];
    if (el_pkg_verify(model, &vo, &m, by, &e)) return cli_pkg_fail(&e);
    if (smoke && el_pkg_smoke_check(model, &m, &e)) {
        el_manifest_free(&m);
        return cli_pkg_fail(&e);
    }
    el_pkg_describe(&m, by, line, sizeof line);
    printf("ok: %s%s\n", line, smoke ? "; smoke test passed" : "");
    el_manifest_free(&m);
    return CLI_EXIT_OK;
}
