/*
 * package_api.c — include/edgellm_package.h over verify.c and store.c:
 * verify-before-load and the store's active model for library users
 * (libedgellm-package).
 *
 * Contract: el_package_verify makes exactly the decision `edgellm verify`
 * makes (the same el_pkg_verify, the same check order, names and codes; the
 * enum values equal el_pkg_check's, checked at compile time), with the key
 * from p->pub or the store's DIR/trusted.pub and, with a store, the store's
 * active version as the version floor (as `edgellm install` uses it).
 * el_package_store_active is el_store_check_active (`run --store`). Nothing is
 * printed; info is written only on success (zeroed first), err only on
 * failure. Every string copied into info is cut to its field and ends in NUL.
 */
#include "edgellm_package.h"

#include <stdio.h>
#include <string.h>

#include "edgellm.h"
#include "deploy/manifest.h"
#include "deploy/store.h"

#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " must equal " #b)
SAME(EL_PACKAGE_OK, EL_PKG_OK);
SAME(EL_PACKAGE_ERR_IO, EL_PKG_ERR_IO);
SAME(EL_PACKAGE_ERR_NO_MANIFEST, EL_PKG_ERR_NO_MANIFEST);
SAME(EL_PACKAGE_ERR_MALFORMED, EL_PKG_ERR_MALFORMED);
SAME(EL_PACKAGE_ERR_KEY, EL_PKG_ERR_KEY);
SAME(EL_PACKAGE_ERR_SIGNATURE, EL_PKG_ERR_SIGNATURE);
SAME(EL_PACKAGE_ERR_EXPIRED, EL_PKG_ERR_EXPIRED);
SAME(EL_PACKAGE_ERR_VERSION, EL_PKG_ERR_VERSION);
SAME(EL_PACKAGE_ERR_RUNTIME, EL_PKG_ERR_RUNTIME);
SAME(EL_PACKAGE_ERR_DEVICE, EL_PKG_ERR_DEVICE);
SAME(EL_PACKAGE_ERR_SIZE, EL_PKG_ERR_SIZE);
SAME(EL_PACKAGE_ERR_HASH, EL_PKG_ERR_HASH);
SAME(EL_PACKAGE_ERR_SMOKE, EL_PKG_ERR_SMOKE);
SAME(EL_PACKAGE_ERR_SPACE, EL_PKG_ERR_NOSPACE);
SAME(EL_PACKAGE_ERR_STORE, EL_PKG_ERR_STORE);
SAME(EL_PACKAGE_ERR_USAGE, EL_PKG_ERR_USAGE);
SAME(EL_PACKAGE_ERR_USAGE + 1, EL_PKG_CHECK_COUNT);
_Static_assert(sizeof(((el_package_error *)0)->msg) == sizeof(((el_pkg_error *)0)->msg), "error message size");

EL_PACKAGE_API const char *el_package_version(void) { return EL_VERSION_STRING; }

EL_PACKAGE_API const char *el_package_check_name(el_package_check c) { return el_pkg_check_name((el_pkg_check)c); }

EL_PACKAGE_API int el_package_exit_code(el_package_check c) {
    return (unsigned)c < EL_PKG_CHECK_COUNT ? el_pkg_exit_code((el_pkg_check)c) : 1;
}

static el_package_check fail_out(const el_pkg_error *e, el_package_error *err) {
    if (err) {
        err->check = (el_package_check)e->check;
        memcpy(err->msg, e->msg, sizeof err->msg);
        err->msg[sizeof err->msg - 1] = 0;
    }
    return (el_package_check)e->check;
}

static void copy_str(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

static void fill_info(el_package_info *info, const el_manifest *m, const char *by, const char *model_path) {
    if (!info) return;
    memset(info, 0, sizeof *info);
    copy_str(info->name, sizeof info->name, m->name);
    info->version = m->version;
    copy_str(info->key_id, sizeof info->key_id, by);
    static const char H[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        info->sha256[2 * i] = H[m->artifacts[0].sha256[i] >> 4];
        info->sha256[2 * i + 1] = H[m->artifacts[0].sha256[i] & 15];
    }
    copy_str(info->quant, sizeof info->quant, m->quant_type);
    copy_str(info->arch, sizeof info->arch, m->arch);
    copy_str(info->expires, sizeof info->expires, m->expires);
    info->expires_t = m->expires_t;
    copy_str(info->model_path, sizeof info->model_path, model_path);
    el_pkg_describe(m, by, info->summary, sizeof info->summary);
}

EL_PACKAGE_API el_package_check el_package_verify(const char *model, const el_package_params *p,
                                                  el_package_info *info, el_package_error *err) {
    el_package_params zero;
    memset(&zero, 0, sizeof zero);
    if (!p) p = &zero;
    if (info) memset(info, 0, sizeof *info);
    el_pkg_error e;
    if (!model || !*model) {
        el_pkg_fail(&e, EL_PKG_ERR_USAGE, "no model path given");
        return fail_out(&e, err);
    }
    if (strlen(model) >= sizeof info->model_path) {
        el_pkg_fail(&e, EL_PKG_ERR_USAGE, "model path longer than %zu bytes", sizeof info->model_path - 1);
        return fail_out(&e, err);
    }
    if (p->pub && p->store) {
        el_pkg_fail(&e, EL_PKG_ERR_USAGE, "give a trusted key (pub) or a store, not both: a store checks "
                    "against its own key");
        return fail_out(&e, err);
    }
    el_pubkey key;
    int64_t floor = p->min_version > 0 ? p->min_version : 0;
    int n_trusted = 0;
    if (p->pub) {
        if (el_pkg_read_pub(p->pub, &key, &e)) return fail_out(&e, err);
        n_trusted = 1;
    } else if (p->store) {
        el_store_state st;
        if (el_store_read_state(p->store, &st, &e)) return fail_out(&e, err);
        if (el_store_trusted_key(p->store, &key, &e)) return fail_out(&e, err);
        n_trusted = 1;
        if (st.active.present && st.active.version > floor) floor = st.active.version;
    }
    /* n_trusted == 0: el_pkg_verify refuses with the key check, naming the missing key */
    el_pkg_verify_opts vo = {.trusted = n_trusted ? &key : NULL, .n_trusted = n_trusted, .min_version = floor,
                             .now = p->now, .manifest_path = p->manifest};
    el_manifest m;
    char by[17];
    if (el_pkg_verify(model, &vo, &m, by, &e)) return fail_out(&e, err);
    if (p->smoke && el_pkg_smoke_check(model, &m, &e)) {
        el_manifest_free(&m);
        return fail_out(&e, err);
    }
    fill_info(info, &m, by, model);
    el_manifest_free(&m);
    return EL_PACKAGE_OK;
}

EL_PACKAGE_API el_package_check el_package_store_active(const char *store, bool smoke, el_package_info *info,
                                                        el_package_error *err) {
    if (info) memset(info, 0, sizeof *info);
    el_pkg_error e;
    if (!store || !*store) {
        el_pkg_fail(&e, EL_PKG_ERR_USAGE, "no store folder given");
        return fail_out(&e, err);
    }
    char path[sizeof info->model_path];
    el_manifest m;
    char by[17];
    if (el_store_check_active(store, smoke, path, sizeof path, &m, by, &e)) return fail_out(&e, err);
    fill_info(info, &m, by, path);
    el_manifest_free(&m);
    return EL_PACKAGE_OK;
}
