/*
 * cmd_store.c — the on-device model store (deploy/store.h) on the command line:
 *
 *   edgellm install MODEL.gguf --store DIR [--pub KEY.pub] [--skip-smoke]
 *   edgellm rollback --store DIR
 *   edgellm gc --store DIR
 *   edgellm status --store DIR [--smoke]
 *
 * Failures print "error: <check> check failed: <what>" and exit 10 + the
 * check's code, as `verify` does.
 */
#include <inttypes.h>
#include <limits.h>
#include <string.h>

#include "cli/cli.h"
#include "deploy/store.h"

static int store_fail(const el_pkg_error *e) {
    fprintf(stderr, "error: %s check failed: %s\n", el_pkg_check_name(e->check), e->msg);
    return el_pkg_exit_code(e->check);
}

static void print_state(const char *dir, const el_store_state *st) {
    if (st->active.present)
        printf("active:   v%" PRId64 " %s (slot %c)\n", st->active.version, st->active.model, st->active.slot);
    else
        printf("active:   none\n");
    if (st->previous.present)
        printf("previous: v%" PRId64 " %s (slot %c)\n", st->previous.version, st->previous.model, st->previous.slot);
    else
        printf("previous: none\n");
    (void)dir;
}

typedef struct store_args {
    const char *store, *pub, *pkg;
    bool skip_smoke, no_space_check, smoke;
} store_args;

/* Parses the options of one store command; returns -1 or an exit code. */
static int parse_store_args(const char *cmd, int argc, char **argv, bool takes_pkg, store_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--store") && i + 1 < argc) a->store = argv[++i];
        else if (takes_pkg && !strcmp(s, "--pub") && i + 1 < argc) a->pub = argv[++i];
        else if (takes_pkg && !strcmp(s, "--skip-smoke")) a->skip_smoke = true;
        else if (takes_pkg && !strcmp(s, "--no-space-check")) a->no_space_check = true;
        else if (!strcmp(cmd, "status") && !strcmp(s, "--smoke")) a->smoke = true;
        else if (s[0] == '-') return cli_usage_error(cmd, "unknown or incomplete option '%s'", s);
        else if (takes_pkg && !a->pkg) a->pkg = s;
        else return cli_usage_error(cmd, "unexpected argument '%s'", s);
    }
    if (!a->store) return cli_usage_error(cmd, "missing --store DIR");
    if (takes_pkg && !a->pkg) return cli_usage_error(cmd, "missing the package's MODEL.gguf");
    return -1;
}

int cli_cmd_install(int argc, char **argv) {
    store_args a;
    int rc = parse_store_args("install", argc, argv, true, &a);
    if (rc >= 0) return rc;
    el_store_install_opts o = {.pub_path = a.pub, .skip_smoke = a.skip_smoke, .skip_space_check = a.no_space_check};
    el_store_state st;
    el_pkg_error e;
    if (el_store_install(a.store, a.pkg, &o, &st, &e)) return store_fail(&e);
    printf("installed and activated v%" PRId64 " (%s)%s\n", st.active.version, st.active.model,
           a.skip_smoke ? " without a smoke test" : "; smoke test passed");
    print_state(a.store, &st);
    return CLI_EXIT_OK;
}

int cli_cmd_rollback(int argc, char **argv) {
    store_args a;
    int rc = parse_store_args("rollback", argc, argv, false, &a);
    if (rc >= 0) return rc;
    el_store_state st;
    el_pkg_error e;
    if (el_store_rollback(a.store, &st, &e)) return store_fail(&e);
    printf("rolled back to v%" PRId64 "\n", st.active.version);
    print_state(a.store, &st);
    return CLI_EXIT_OK;
}

int cli_cmd_gc(int argc, char **argv) {
    store_args a;
    int rc = parse_store_args("gc", argc, argv, false, &a);
    if (rc >= 0) return rc;
    uint64_t freed = 0;
    int removed = 0;
    el_pkg_error e;
    if (el_store_gc(a.store, &freed, &removed, &e)) return store_fail(&e);
    printf("gc: removed %d entries, %" PRIu64 " bytes\n", removed, freed);
    return CLI_EXIT_OK;
}

int cli_cmd_status(int argc, char **argv) {
    store_args a;
    int rc = parse_store_args("status", argc, argv, false, &a);
    if (rc >= 0) return rc;
    el_store_state st;
    el_pkg_error e;
    if (el_store_read_state(a.store, &st, &e)) return store_fail(&e);
    print_state(a.store, &st);
    if (!st.active.present) return CLI_EXIT_OK;
    el_manifest m;
    char by[17], line[1024], path[PATH_MAX];
    if (el_store_check_active(a.store, a.smoke, path, sizeof path, &m, by, &e)) return store_fail(&e);
    el_pkg_describe(&m, by, line, sizeof line);
    printf("active verifies: %s%s\n", line, a.smoke ? "; smoke test passed" : "");
    el_manifest_free(&m);
    return CLI_EXIT_OK;
}
