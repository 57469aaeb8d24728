/*
 * store.h — the on-device model store: two slots (A/B), atomic activation,
 * rollback to the last known-good version, garbage collection.
 *
 *   DIR/trusted.pub   the store's trust anchor (the key every install and
 *                     every load from the store is checked against); written
 *                     by the first install from its --pub, never replaced
 *   DIR/state.json    {"format":"edgellm-store/1","active":{...}|null,"previous":{...}|null}
 *                     each {"slot":"a"|"b","version":N,"model":"NAME.gguf"};
 *                     replaced only by write-temp + fsync + rename + fsync(DIR)
 *   DIR/slots/a/, DIR/slots/b/   a package each: its files and its manifest
 *   DIR/lock          flock()ed by install, rollback and gc (one at a time)
 *
 * Invariants, at every instant (a SIGKILL or power cut included):
 *   - state.json names only slots whose package was complete and verified
 *     when it was written; install writes only into the slot state.json does
 *     not name as active, and before it touches the slot holding the previous
 *     version it first writes a state without that previous version;
 *   - so the active version is always complete, and a crash mid-install
 *     leaves the old active version active plus an unreferenced partial slot
 *     (and maybe "*.tmp.*" files) that the next install or gc removes.
 * A/B means one previous version at most: installing N+1 while N is active
 * and N-1 is the previous replaces N-1 (N stays active until N+1 is verified
 * and smoke-tested, then N becomes the previous).
 *
 * Versions: an install must carry a version greater than the active one
 * (equal: "already installed"; lower: refused as a rollback attack).
 * el_store_rollback is the one way back to a lower version.
 */
#ifndef EL_SERVICE_STORE_H
#define EL_SERVICE_STORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deploy/manifest.h"

typedef struct el_store_slot {
    bool present;
    char slot;          /* 'a' or 'b' */
    int64_t version;
    char model[256];    /* the model's file name inside the slot */
} el_store_slot;

typedef struct el_store_state {
    el_store_slot active, previous;
} el_store_state;

/* state.json of dir; a store without one has no active version (OK). */
el_pkg_check el_store_read_state(const char *dir, el_store_state *st, el_pkg_error *err);
/* The same from the bytes of a state file (the parser fuzz_manifest exercises). */
el_pkg_check el_store_parse_state(const char *text, size_t len, el_store_state *st, el_pkg_error *err);
/* DIR/trusted.pub; EL_PKG_ERR_KEY if the store has none. */
el_pkg_check el_store_trusted_key(const char *dir, el_pubkey *out, el_pkg_error *err);
/* Path of a slot's model file: DIR/slots/<slot>/<model>. */
bool el_store_slot_model_path(const char *dir, const el_store_slot *s, char *out, size_t cap);

typedef struct el_store_install_opts {
    const char *pub_path;    /* trusted key; NULL: the store's (required for the first install) */
    bool skip_smoke;         /* do not run the smoke test (a manifest without one needs this) */
    bool skip_space_check;   /* testing only: let the copy itself run out of space */
    int64_t now;             /* 0: time(NULL) (expiry) */
} el_store_install_opts;

/* Installs the package whose model is model_path: free-space check, copy
 * into the inactive slot, verify the copy, smoke test, activate atomically.
 * *after (if given) receives the new state. On failure the active version is
 * untouched and the slot written into is emptied. */
el_pkg_check el_store_install(const char *dir, const char *model_path, const el_store_install_opts *o,
                              el_store_state *after, el_pkg_error *err);

/* Makes the previous version active again (verified first) and the active
 * one the previous. EL_PKG_ERR_STORE if there is no previous version. */
el_pkg_check el_store_rollback(const char *dir, el_store_state *after, el_pkg_error *err);

/* Removes what no state names: an unreferenced slot (an interrupted install),
 * stray files in a referenced slot, "*.tmp.*" files. Never the active or the
 * previous version. */
el_pkg_check el_store_gc(const char *dir, uint64_t *bytes_freed, int *entries_removed, el_pkg_error *err);

/* Verifies the active version against the store's key (and, when smoke, runs
 * its smoke test). path[cap] receives its model path; m (if given) the manifest. */
el_pkg_check el_store_check_active(const char *dir, bool smoke, char *path, size_t cap, el_manifest *m,
                                   char signed_by[17], el_pkg_error *err);

#endif
