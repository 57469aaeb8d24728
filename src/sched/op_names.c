/*
 * op_names.c — the names of the op kinds (backend.h's el_op_kind_name) and
 * their inverse (placement.h's el_op_kind_parse): one table, used by the
 * placement report, the --devices table parser and the executor's traces.
 * The names are part of the --devices file format and the JSON report:
 * changing one breaks existing tables.
 */
#include <string.h>

#include "backend/backend.h"
#include "sched/placement.h"

static const char *const k_names[EL_OPK_COUNT] = {
    [EL_OPK_GET_ROWS] = "get_rows", [EL_OPK_RMSNORM] = "rmsnorm",     [EL_OPK_MATMUL] = "matmul",
    [EL_OPK_ROPE] = "rope",         [EL_OPK_SCALE] = "scale",         [EL_OPK_FWHT] = "fwht",
    [EL_OPK_KV_STORE] = "kv_store", [EL_OPK_ATTENTION] = "attention", [EL_OPK_SILU_MUL] = "silu_mul",
    [EL_OPK_GELU_MUL] = "gelu_mul", [EL_OPK_ADD] = "add",             [EL_OPK_COPY] = "copy",
    [EL_OPK_HOST] = "host",         [EL_OPK_LORA] = "lora",
    [EL_OPK_MOE] = "moe",
};

const char *el_op_kind_name(el_op_kind k) {
    if ((int)k < 0 || (int)k >= EL_OPK_COUNT || !k_names[k]) return "?";
    return k_names[k];
}

int el_op_kind_parse(const char *name) {
    if (!name) return -1;
    for (int k = 0; k < EL_OPK_COUNT; k++)
        if (k_names[k] && strcmp(k_names[k], name) == 0) return k;
    return -1;
}
