/*
 * fuzz_devices.c — libFuzzer target for the scheduler's readers of outside
 * bytes: the --devices table parser (el_devices_parse, src/sched/devices_json.h)
 * and the capability cache file parser (el_devcache_parse, src/sched/devcache.h).
 *
 * The input goes to el_devices_parse without and with a measured host. A
 * refusal must return -1 with a message and leave devs untouched; an accepted
 * table keeps every promise of devices_json.h: 1..EL_MAX_BACKENDS devices,
 * device 0 the only cpu, unique well-formed names, rates 0 or within
 * [1e-6, 1e9], every parsed device simulated, a non-cpu device with ops (never "host"), copy
 * bandwidths and mem_gbps > 0 and types for the ops that need them. Every
 * accepted table is then planned (el_sched_place over a small graph of every
 * op kind, with a group, tensors and weights; no preference, each device
 * preferred, each forced): it must succeed with every decision on a device
 * that runs the op, and both reports must be produced; the JSON one must
 * parse (cJSON).
 *
 * The same bytes go to el_devcache_parse with a fixed key and with the key
 * the input's own second line names (so mutations get past the key check):
 * 0 leaves the caps untouched; 1 gives kind, op and type bits in range and
 * finite rates >= 0, simulated false.
 *
 * Seeds: the tables in examples/devices/ and a cache file el_devcache_store wrote.
 * By hand: clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc fuzz/fuzz_devices.c
 *   src/sched/devices_json.c src/sched/devcache.c src/sched/placement.c src/sched/op_names.c
 *   src/package/types.c src/package/quants.c src/util/error.c src/util/file.c src/util/utf8.c src/util/buf.c
 *   -lcjson -lm
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/devcache.h"
#include "sched/devices_json.h"
#include "sched/placement.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static bool rate_ok(double x) { return x == 0 || (x >= 1e-6 && x <= 1e9); }

static void check_caps_sane(const el_device_caps *c) {
    REQUIRE(memchr(c->name, 0, sizeof c->name) && memchr(c->desc, 0, sizeof c->desc));
    REQUIRE((int)c->kind >= EL_DEV_CPU && c->kind <= EL_DEV_OTHER);
    REQUIRE(!(c->ops >> EL_OPK_COUNT));
    REQUIRE(!(c->matmul_types >> EL_TYPE_COUNT));
    REQUIRE(rate_ok(c->matmul_gflops) && rate_ok(c->gflops) && rate_ok(c->mem_gbps) && rate_ok(c->h2d_gbps) &&
            rate_ok(c->d2h_gbps) && rate_ok(c->launch_us));
    for (int t = 0; t < EL_TYPE_COUNT; t++) REQUIRE(rate_ok(c->matmul_gflops_type[t]));
}

static int graph(el_place_op *ops) {
    int n = 0;
    for (int k = 0; k < EL_OPK_COUNT; k++) {
        el_place_op *o = &ops[n++];
        memset(o, 0, sizeof *o);
        o->kind = (el_op_kind)k;
        o->layer = k % 3;
        o->site = el_op_kind_name((el_op_kind)k);
        o->wtype = (k == EL_OPK_MATMUL || k == EL_OPK_GET_ROWS) ? (k == EL_OPK_MATMUL ? EL_TYPE_Q4_0 : EL_TYPE_Q8_0) : -1;
        o->kv_type = (k == EL_OPK_KV_STORE || k == EL_OPK_ATTENTION) ? EL_TYPE_F16 : -1;
        o->flops = 1e6 * (k + 1);
        o->bytes_w = o->wtype >= 0 ? 1e6 : 0;
        o->bytes_in = o->bytes_out = 4096;
        for (int j = 0; j < 3; j++) o->src[j] = o->dst[j] = -1;
        o->src[0] = k % 4;
        o->src_bytes[0] = 4096;
        o->dst[0] = (k + 1) % 4;
        o->dst_bytes[0] = 4096;
        o->group = (k == EL_OPK_KV_STORE || k == EL_OPK_ATTENTION) ? 1 : 0;
        o->shape_key = (uint64_t)k + 1;
    }
    return n;
}

static void plan_all(const el_device_caps *devs, int n) {
    el_place_op ops[EL_OPK_COUNT];
    const int n_ops = graph(ops);
    for (int mode = -1; mode < 2 * n; mode++) {
        el_sched_params sp = el_sched_default_params();
        if (mode >= 0 && mode < n) sp.prefer = mode;
        if (mode >= n) sp.force = mode - n;
        el_placement p;
        el_error err = {0};
        const int rc = el_sched_place(devs, n, &sp, ops, n_ops, &p, &err);
        if (rc) fprintf(stderr, "placement refused an accepted table: %s\n", err.msg);
        REQUIRE(rc == 0);
        for (int i = 0; i < n_ops; i++) {
            const int d = p.d[i].dev;
            REQUIRE(d >= 0 && d < n && p.d[i].t_est[d] >= 0);
            REQUIRE(d == 0 || el_caps_runs(&devs[d], &ops[i]));
        }
        REQUIRE(isfinite(p.t_total) && p.t_total >= 0 && isfinite(p.t_cpu_only));
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        REQUIRE(f);
        el_placement_print(f, &p, ops, devs);
        fclose(f);
        free(buf);
        buf = NULL;
        f = open_memstream(&buf, &len);
        REQUIRE(f);
        el_placement_print_json(f, &p, ops, devs);
        fclose(f);
        cJSON *j = cJSON_ParseWithLength(buf, len);
        REQUIRE(j != NULL);
        cJSON_Delete(j);
        free(buf);
        el_placement_free(&p);
    }
}

static void devices(const uint8_t *data, size_t size, const el_device_caps *host) {
    el_device_caps devs[EL_MAX_BACKENDS], before[EL_MAX_BACKENDS];
    memset(devs, 0xa5, sizeof devs);
    memcpy(before, devs, sizeof devs);
    el_error err = {0};
    const int n = el_devices_parse((const char *)data, size, host, devs, &err);
    if (n < 0) {
        REQUIRE(n == -1 && err.msg[0] && err.code != EL_OK);
        REQUIRE(memcmp(devs, before, sizeof devs) == 0);
        return;
    }
    REQUIRE(n >= 1 && n <= EL_MAX_BACKENDS);
    for (int d = 0; d < n; d++) {
        const el_device_caps *c = &devs[d];
        check_caps_sane(c);
        REQUIRE((c->kind == EL_DEV_CPU) == (d == 0));
        REQUIRE(c->simulated || (host && d == 0 && memcmp(c, host, sizeof *c) == 0));
        REQUIRE(c->name[0]);
        for (int e = 0; e < d; e++) REQUIRE(strcmp(devs[e].name, c->name) != 0);
        if (d == 0) continue;
        REQUIRE(c->simulated && c->ops && !(c->ops >> EL_OPK_HOST & 1u));
        REQUIRE(c->mem_gbps > 0 && c->h2d_gbps > 0 && c->d2h_gbps > 0);
        if ((c->ops >> EL_OPK_MATMUL & 1u) || (c->ops >> EL_OPK_GET_ROWS & 1u))
            REQUIRE(c->matmul_types && c->matmul_gflops > 0);
        if ((c->ops >> EL_OPK_KV_STORE & 1u) || (c->ops >> EL_OPK_ATTENTION & 1u)) REQUIRE(c->kv_types);
    }
    REQUIRE(devs[0].matmul_gflops > 0 && devs[0].gflops > 0 && devs[0].mem_gbps > 0);
    plan_all(devs, n);
}

static void devcache(const uint8_t *data, size_t size, const char *key) {
    el_device_caps c, before;
    memset(&c, 0x3c, sizeof c);
    before = c;
    const int hit = el_devcache_parse((const char *)data, size, key, &c);
    REQUIRE(hit == 0 || hit == 1);
    if (!hit) {
        REQUIRE(memcmp(&c, &before, sizeof c) == 0);
        return;
    }
    check_caps_sane(&c);
    REQUIRE(!c.simulated);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    el_device_caps host;
    memset(&host, 0, sizeof host);
    snprintf(host.name, sizeof host.name, "host");
    host.kind = EL_DEV_CPU;
    host.ops = (1u << EL_OPK_COUNT) - 1;
    host.matmul_types = ~0ull >> (64 - EL_TYPE_COUNT);
    host.kv_types = ~0u;
    host.matmul_gflops = 40;
    host.gflops = 10;
    host.mem_gbps = 20;
    devices(data, size, NULL);
    devices(data, size, &host);

    devcache(data, size, "opencl|fuzz");
    /* the key the input's second line names */
    const char *s = (const char *)data;
    const char *nl = memchr(s, '\n', size);
    if (nl && (size_t)(nl - s) + 5 < size && memcmp(nl + 1, "key ", 4) == 0) {
        const char *k = nl + 5, *e = memchr(k, '\n', size - (size_t)(k - s));
        if (e && e - k < 1000) {
            char key[1024];
            memcpy(key, k, (size_t)(e - k));
            key[e - k] = 0;
            devcache(data, size, key);
        }
    }
    return 0;
}
