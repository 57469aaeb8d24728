/*
 * test_devices.c — the device capability cache (src/sched/devcache.h) and
 * the --devices table parser (src/sched/devices_json.h).
 *
 * devcache: a miss leaves the caps untouched; store then load gives every
 * field back exactly (rates to the last bit) with simulated false; the
 * directories are created and no temporary file is left; the path follows
 * EL_DEVCACHE_DIR, then XDG_CACHE_HOME. Hostile files are misses: every
 * truncation of a good file, garbage, another version, another key (a file
 * copied to the other key's name), values out of range (negative, NaN,
 * infinite, unknown kind, op bits beyond the kinds, a name too long),
 * anything after `end`, a file over 64 KiB, a directory in its place (store
 * refused too). Bad keys (empty, newline) are refused.
 *
 * devices_json: the example tables parse (both in examples/devices/) with the
 * fields as written, every device simulated; a table without a cpu takes the
 * caller's host as device 0; each malformed or self-contradictory table is
 * refused with a message naming the device and field, leaving devs untouched;
 * files: missing, a directory, over 1 MiB. A parsed table places (the
 * scheduler accepts it).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "sched/devcache.h"
#include "sched/devices_json.h"
#include "sched/placement.h"
#include "testutil.h"

static char g_tmp[256];

static void write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    fwrite(data, 1, len, f);
    fclose(f);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static el_device_caps sample_caps(void) {
    el_device_caps c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "opencl0");
    snprintf(c.desc, sizeof c.desc, "Portable Computing Language, pthread-x86_64 (PoCL 6.0)\tline2");
    c.kind = EL_DEV_GPU;
    c.ops = (1u << EL_OPK_MATMUL) | (1u << EL_OPK_RMSNORM) | (1u << EL_OPK_ATTENTION);
    c.matmul_types = (1ull << EL_TYPE_F16) | (1ull << EL_TYPE_Q4_K) | (1ull << EL_TYPE_Q6_K);
    c.kv_types = 1u << EL_TYPE_F16;
    c.matmul_gflops = 123.456789012345678;
    c.matmul_gflops_type[EL_TYPE_Q4_K] = 0.1 + 0.2;
    c.matmul_gflops_type[EL_TYPE_Q6_K] = 1e-5;
    c.gflops = 33.3;
    c.mem_gbps = 17.25;
    c.h2d_gbps = 5.5;
    c.d2h_gbps = 6.5;
    c.launch_us = 12.125;
    c.matmul1_gbps = 3.5;
    c.sync_us = 250;
    c.mem_bytes = 8589934592ull;
    c.simulated = true;
    return c;
}

static bool caps_equal(const el_device_caps *a, const el_device_caps *b) {
    if (strcmp(a->name, b->name) || a->kind != b->kind || a->ops != b->ops || a->matmul_types != b->matmul_types ||
        a->kv_types != b->kv_types || a->matmul_gflops != b->matmul_gflops || a->gflops != b->gflops ||
        a->mem_gbps != b->mem_gbps || a->h2d_gbps != b->h2d_gbps || a->d2h_gbps != b->d2h_gbps ||
        a->launch_us != b->launch_us || a->matmul1_gbps != b->matmul1_gbps || a->sync_us != b->sync_us ||
        a->mem_bytes != b->mem_bytes)
        return false;
    for (int t = 0; t < EL_TYPE_COUNT; t++)
        if (a->matmul_gflops_type[t] != b->matmul_gflops_type[t]) return false;
    return true;
}

/* Loads key into a sentinel-filled caps: returns the hit and checks a miss left it untouched. */
static int load_checked(const char *key) {
    el_device_caps c, s;
    memset(&c, 0x5a, sizeof c);
    s = c;
    const int hit = el_devcache_load(key, &c);
    if (!hit) CHECK(memcmp(&c, &s, sizeof c) == 0);
    return hit;
}

static void test_devcache(void) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/cache/a/b", g_tmp);
    setenv("EL_DEVCACHE_DIR", dir, 1);
    const char *key = "opencl|Portable Computing Language|pocl 6.0|edgellm 1.2.3";
    char path[4200];
    CHECK(el_devcache_path(key, path, sizeof path) == 0);
    CHECK(strncmp(path, dir, strlen(dir)) == 0 && strstr(path, ".caps"));

    CHECK(load_checked(key) == 0); /* nothing yet */
    const el_device_caps c = sample_caps();
    CHECK(el_devcache_store(key, &c) == 0);
    CHECK(count_entries(dir) == 1); /* the file, no temporary left */
    el_device_caps r;
    memset(&r, 0, sizeof r);
    r.simulated = true;
    CHECK(el_devcache_load(key, &r) == 1);
    CHECK(caps_equal(&r, &c));
    CHECK(!r.simulated);
    /* the tab in desc was stored as a space */
    CHECK(strcmp(r.desc, "Portable Computing Language, pthread-x86_64 (PoCL 6.0) line2") == 0);
    /* stored again over the old file: still one file, still a hit */
    CHECK(el_devcache_store(key, &c) == 0 && count_entries(dir) == 1 && load_checked(key) == 1);

    size_t len = 0;
    char *good = el_test_read_file(path, &len);
    CHECK(good != NULL && len > 100);
    if (!good) return;

    /* every truncation is a miss */
    int trunc_hits = 0;
    for (size_t n = 0; n < len; n++) {
        write_file(path, good, n);
        trunc_hits += load_checked(key);
    }
    CHECK(trunc_hits == 0);
    /* the whole file again: a hit (the loop's files were rejected for being cut, not by accident) */
    write_file(path, good, len);
    CHECK(load_checked(key) == 1);

    /* another key: the same bytes under the other key's name are a miss (the key is in the file) */
    const char *key2 = "opencl|another device";
    char path2[4200];
    CHECK(el_devcache_path(key2, path2, sizeof path2) == 0 && strcmp(path, path2) != 0);
    write_file(path2, good, len);
    CHECK(load_checked(key2) == 0);
    unlink(path2);

    /* one line edited: each is a miss */
    struct {
        const char *from, *to;
    } edits[] = {
        {"edgellm-devcache 2", "edgellm-devcache 1"}, /* the version before matmul1_gbps / sync_us */
        {"gflops 33.299999999999997", "gflops -33.3"},
        {"gflops 33.299999999999997", "gflops nan"},
        {"gflops 33.299999999999997", "gflops inf"},
        {"gflops 33.299999999999997", "gflops 33.3x"},
        {"gflops 33.299999999999997", "gflops 1e-300"},
        {"gflops 33.299999999999997", "gflops 2e9"},
        {"gflops 33.299999999999997", "gflops "},
        {"kind 1", "kind 9"},
        {"ops 0x", "ops 0xfffff"},
        {"mem_bytes 8589934592", "mem_bytes 99999999999999999999999"},
        {"mem_bytes 8589934592", "mem_bytes -1"},
        {"name opencl0", "name 0123456789012345678901234567890123456789012345678"},
        {"end\n", "end\nmore\n"},
        {"end\n", "end"},
        {"key opencl", "key Opencl"},
        {"matmul_gflops_type 12", "matmul_gflops_type 99"},
        {"matmul_gflops_type 14", "matmul_gflops_type 12"},
        {"launch_us", "launch_ms"},
        {"sync_us", "sync_ms"},
    };
    int edit_hits = 0, applied = 0;
    for (size_t k = 0; k < sizeof edits / sizeof *edits; k++) {
        char *at = strstr(good, edits[k].from);
        if (!at) {
            fprintf(stderr, "edit %zu: '%s' not in the file\n", k, edits[k].from);
            continue;
        }
        applied++;
        char buf[8192];
        const size_t pre = (size_t)(at - good), fl = strlen(edits[k].from), tl = strlen(edits[k].to);
        memcpy(buf, good, pre);
        memcpy(buf + pre, edits[k].to, tl);
        memcpy(buf + pre + tl, at + fl, len - pre - fl);
        write_file(path, buf, len - fl + tl);
        const int h = load_checked(key);
        CHECKF(h == 0, "edit %zu (%s -> %s) was accepted", k, edits[k].from, edits[k].to);
        edit_hits += h;
    }
    CHECK(applied == (int)(sizeof edits / sizeof *edits) && edit_hits == 0);

    /* garbage; NUL bytes; over 64 KiB (a good file padded with blank lines) */
    char junk[4096];
    unsigned s = 12345;
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)((s = s * 1103515245u + 12345u) >> 16);
    write_file(path, junk, sizeof junk);
    CHECK(load_checked(key) == 0);
    char *withnul = malloc(len);
    memcpy(withnul, good, len);
    withnul[10] = 0;
    write_file(path, withnul, len);
    CHECK(load_checked(key) == 0);
    free(withnul);
    char *huge = malloc(EL_DEVCACHE_MAX_BYTES + 100);
    memcpy(huge, good, len);
    memset(huge + len, '\n', EL_DEVCACHE_MAX_BYTES + 100 - len);
    write_file(path, huge, EL_DEVCACHE_MAX_BYTES + 100);
    CHECK(load_checked(key) == 0);
    free(huge);

    /* a directory in the file's place: load misses, store is refused, nothing is left behind */
    unlink(path);
    CHECK(mkdir(path, 0700) == 0);
    CHECK(load_checked(key) == 0);
    CHECK(el_devcache_store(key, &c) == -1);
    CHECK(count_entries(dir) == 1);
    rmdir(path);

    /* bad keys and bad caps */
    CHECK(el_devcache_store("", &c) == -1 && el_devcache_store("a\nb", &c) == -1 && el_devcache_store(NULL, &c) == -1);
    CHECK(load_checked("") == 0 && load_checked("a\nb") == 0);
    el_device_caps bad = c;
    bad.gflops = NAN;
    CHECK(el_devcache_store(key, &bad) == -1);
    bad = c;
    bad.matmul_gflops_type[3] = -1;
    CHECK(el_devcache_store(key, &bad) == -1);
    bad = c;
    bad.mem_gbps = 1e-320; /* a rate whose estimates would overflow */
    CHECK(el_devcache_store(key, &bad) == -1);
    CHECK(load_checked(key) == 0);

    /* XDG_CACHE_HOME when EL_DEVCACHE_DIR is not set */
    unsetenv("EL_DEVCACHE_DIR");
    char xdg[400];
    snprintf(xdg, sizeof xdg, "%s/xdg", g_tmp);
    setenv("XDG_CACHE_HOME", xdg, 1);
    CHECK(el_devcache_path(key, path, sizeof path) == 0);
    char want[450];
    snprintf(want, sizeof want, "%s/edgellm/devices/", xdg);
    CHECK(strncmp(path, want, strlen(want)) == 0);
    CHECK(el_devcache_store(key, &c) == 0 && load_checked(key) == 1);
    free(good);
}

/* ---- devices_json ------------------------------------------------------- */

static el_device_caps host_caps(void) {
    el_device_caps h;
    memset(&h, 0, sizeof h);
    snprintf(h.name, sizeof h.name, "cpu");
    h.kind = EL_DEV_CPU;
    h.ops = (1u << EL_OPK_COUNT) - 1;
    h.matmul_types = ~0ull;
    h.kv_types = ~0u;
    h.matmul_gflops = 40;
    h.gflops = 10;
    h.mem_gbps = 20;
    return h;
}

static void test_examples(void) {
    el_device_caps devs[EL_MAX_BACKENDS];
    el_error err = {0};
    /* the phone table: its own cpu */
    int n = el_devices_load(EL_SOURCE_DIR "/examples/devices/phone_soc.json", NULL, devs, &err);
    CHECKF(n == 3, "%s", err.msg);
    if (n == 3) {
        CHECK(strcmp(devs[0].name, "cpu") == 0 && devs[0].kind == EL_DEV_CPU && devs[0].simulated);
        CHECK(devs[0].ops == (1u << EL_OPK_COUNT) - 1 && (devs[0].matmul_types >> EL_TYPE_Q4_K & 1));
        CHECK(devs[0].matmul_gflops == 60 && devs[0].matmul_gflops_type[EL_TYPE_Q4_0] == 50 &&
              devs[0].matmul_gflops_type[EL_TYPE_Q8_0] == 70 && devs[0].launch_us == 1);
        CHECK(strcmp(devs[1].name, "gpu0") == 0 && devs[1].kind == EL_DEV_GPU && devs[1].simulated);
        CHECK((devs[1].ops >> EL_OPK_ATTENTION & 1) && !(devs[1].ops >> EL_OPK_HOST & 1) && !(devs[1].ops >> EL_OPK_FWHT & 1));
        CHECK(devs[1].matmul_types == ((1ull << EL_TYPE_F16) | (1ull << EL_TYPE_Q8_0) | (1ull << EL_TYPE_Q4_0) |
                                       (1ull << EL_TYPE_Q4_K) | (1ull << EL_TYPE_Q6_K)));
        CHECK(devs[1].kv_types == 1u << EL_TYPE_F16 && devs[1].h2d_gbps == 1.5 && devs[1].mem_bytes == 0);
        CHECK(strcmp(devs[2].name, "npu0") == 0 && devs[2].kind == EL_DEV_NPU && devs[2].ops == 1u << EL_OPK_MATMUL);
        CHECK(devs[2].mem_bytes == 1073741824ull && devs[2].matmul_gflops == 600 && devs[2].simulated);
        CHECK(strstr(devs[2].desc, "Q8_0/Q4_0 matmuls only") != NULL);
        /* it places: a Q4_0 matmul goes to a device other than the cpu (fastest), an FWHT stays */
        el_place_op ops[2];
        memset(ops, 0, sizeof ops);
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 3; k++) ops[i].src[k] = ops[i].dst[k] = -1;
        ops[0].kind = EL_OPK_MATMUL;
        ops[0].wtype = EL_TYPE_Q4_0;
        ops[0].kv_type = -1;
        ops[0].flops = 1e9;
        ops[1].kind = EL_OPK_FWHT;
        ops[1].wtype = ops[1].kv_type = -1;
        ops[1].flops = 1e6;
        el_placement p;
        CHECK(el_sched_place(devs, n, NULL, ops, 2, &p, &err) == 0);
        CHECK(p.d[0].dev == 2 && p.d[1].dev == 0);
        el_placement_free(&p);
    }
    /* accelerators only: the host supplied becomes device 0, as given (measured: not simulated) */
    const el_device_caps host = host_caps();
    n = el_devices_load(EL_SOURCE_DIR "/examples/devices/npu_matmul_only.json", &host, devs, &err);
    CHECKF(n == 2, "%s", err.msg);
    if (n == 2) {
        CHECK(strcmp(devs[0].name, "cpu") == 0 && !devs[0].simulated && devs[0].matmul_gflops == 40);
        CHECK(strcmp(devs[1].name, "npu0") == 0 && devs[1].simulated && devs[1].launch_us == 30);
    }
    /* ... and without a host: refused */
    n = el_devices_load(EL_SOURCE_DIR "/examples/devices/npu_matmul_only.json", NULL, devs, &err);
    CHECK(n == -1 && strstr(err.msg, "npu_matmul_only.json") && strstr(err.msg, "no measured host"));
}

#define NPU_OK \
    "{\"name\":\"npu0\",\"kind\":\"npu\",\"ops\":[\"matmul\"],\"matmul_types\":[\"Q8_0\"],\"matmul_gflops\":100," \
    "\"mem_gbps\":50,\"h2d_gbps\":4,\"d2h_gbps\":4"
#define CPU_OK "{\"name\":\"cpu\",\"kind\":\"cpu\",\"matmul_gflops\":40,\"gflops\":10,\"mem_gbps\":20}"

static void test_hostile_tables(void) {
    const el_device_caps host = host_caps();
    struct {
        const char *json;
        const char *want; /* in the message */
    } cases[] = {
        {"", "not valid JSON"},
        {"{", "not valid JSON"},
        {"[]", "must be a JSON object"},
        {"{\"version\":1,\"devices\":[" CPU_OK "]} x", "bytes after the JSON"},
        {"{\"devices\":[" CPU_OK "]}", "version missing"},
        {"{\"version\":2,\"devices\":[" CPU_OK "]}", "version 2"},
        {"{\"version\":\"1\",\"devices\":[" CPU_OK "]}", "version missing"},
        {"{\"version\":1,\"devices\":[]}", "non-empty array"},
        {"{\"version\":1,\"devices\":{}}", "non-empty array"},
        {"{\"version\":1,\"devices\":[" CPU_OK "],\"extra\":1}", "unknown field \"extra\""},
        {"{\"version\":1,\"version\":1,\"devices\":[" CPU_OK "]}", "given twice"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"ops\":[\"matmull\"]}]}", "given twice"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"npu0\",\"kind\":\"npu\",\"ops\":[\"matmull\"]}]}",
         "devices[1] \"npu0\": ops: unknown op \"matmull\""},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"npu0\",\"kind\":\"npu\",\"ops\":[\"matmul\"],"
         "\"matmul_types\":[\"Q9_0\"]}]}",
         "devices[1] \"npu0\": matmul_types: unknown type \"Q9_0\""},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"npu0\",\"kind\":\"npu\",\"ops\":[\"matmul\"],"
         "\"matmul_types\":[\"Q8_0\"],\"matmul_gflops\":100,\"mem_gbps\":-1,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "devices[1] \"npu0\": mem_gbps = -1"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"launch_us\":1e999}]}", "launch_us = inf"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"gflops\":\"fast\"}]}", "gflops must be a number"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"h2d_gbps\":1e-9}]}", "given twice"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"gflops\":1e-9}]}", "gflops = 1e-09 (out of range"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"launch_us\":5e9}]}", "launch_us = 5e+09 (out of range"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"npu0\",\"kind\":\"npu\",\"ops\":[\"matmul\"],"
         "\"matmul_types\":[\"Q8_0\"],\"matmul_gflops\":0,\"mem_gbps\":5,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "devices[1] \"npu0\": matmul_gflops must be > 0"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"npu0\",\"kind\":\"npu\",\"ops\":[\"matmul\",\"rmsnorm\"],"
         "\"matmul_types\":[\"Q8_0\"],\"matmul_gflops\":3,\"mem_gbps\":5,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "gflops must be > 0 (ops lists rmsnorm)"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"npu0\",\"kind\":\"npu\",\"ops\":[\"matmul\"],"
         "\"matmul_types\":[\"Q8_0\"],\"matmul_gflops\":3,\"mem_gbps\":5,\"d2h_gbps\":4}]}",
         "devices[1] \"npu0\": h2d_gbps must be > 0"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK "}," NPU_OK "}]}", "devices[2] \"npu0\": name used twice"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," CPU_OK "]}", "devices[1] \"cpu\": a second cpu"},
        {"{\"version\":1,\"devices\":[" NPU_OK "}," CPU_OK "]}", "devices[1] is the cpu; it must be first"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK "},{\"name\":\"a\",\"kind\":\"gpu\",\"ops\":[\"add\"],"
         "\"gflops\":1,\"mem_gbps\":1,\"h2d_gbps\":1,\"d2h_gbps\":1},{\"name\":\"b\",\"kind\":\"gpu\",\"ops\":[\"add\"],"
         "\"gflops\":1,\"mem_gbps\":1,\"h2d_gbps\":1,\"d2h_gbps\":1},{\"name\":\"c\",\"kind\":\"gpu\",\"ops\":[\"add\"],"
         "\"gflops\":1,\"mem_gbps\":1,\"h2d_gbps\":1,\"d2h_gbps\":1}]}",
         "5 devices (at most 4"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"npu0\",\"kind\":\"npu\",\"ops\":[\"matmul\"],"
         "\"matmul_gflops\":3,\"mem_gbps\":5,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "devices[1] \"npu0\": ops lists matmul/get_rows but matmul_types is missing"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"npu0\",\"kind\":\"npu\",\"ops\":[\"matmul\"],"
         "\"matmul_types\":[],\"matmul_gflops\":3,\"mem_gbps\":5,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "matmul_types is missing or empty"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"g\",\"kind\":\"gpu\",\"ops\":[\"attention\"],"
         "\"gflops\":3,\"mem_gbps\":5,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "devices[1] \"g\": ops lists kv_store/attention but kv_types is missing"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"g\",\"kind\":\"gpu\",\"ops\":[\"add\"],"
         "\"matmul_types\":[\"F16\"],\"gflops\":3,\"mem_gbps\":5,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "matmul_types given but ops lists neither"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"g\",\"kind\":\"gpu\",\"ops\":[\"add\"],"
         "\"kv_types\":[\"F16\"],\"gflops\":3,\"mem_gbps\":5,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "kv_types given but ops lists neither"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"matmul_gflops_type\":{\"Q4_0\":10}}]}",
         "matmul_gflops_type.Q4_0: the type is not in matmul_types"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"matmul_gflops_type\":{\"Q8_0\":0}}]}",
         "matmul_gflops_type.Q8_0 must be a number in 1e-06 .. 1e+09"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"matmul_gflops_type\":{\"Q8_0\":5,\"q8_0\":6}}]}",
         "given twice"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"g\",\"kind\":\"gpu\",\"ops\":[\"host\"],"
         "\"gflops\":3,\"mem_gbps\":5,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "\"host\" runs only on the cpu"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"g\",\"kind\":\"gpu\",\"ops\":[],"
         "\"gflops\":3,\"mem_gbps\":5,\"h2d_gbps\":4,\"d2h_gbps\":4}]}",
         "ops missing or empty"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"mem_gpbs\":50}]}", "unknown field \"mem_gpbs\""},
        {"{\"version\":1,\"devices\":[{\"name\":\"cpu\",\"kind\":\"cpu\",\"ops\":[\"matmul\"],\"matmul_gflops\":4,"
         "\"gflops\":1,\"mem_gbps\":2}]}",
         "the cpu runs every op and type; remove ops"},
        {"{\"version\":1,\"devices\":[{\"name\":\"cpu\",\"kind\":\"cpu\",\"matmul_gflops\":4,\"mem_gbps\":2}]}",
         "devices[0] \"cpu\": gflops must be > 0"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"mem_bytes\":1.5}]}", "mem_bytes must be a whole number"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"mem_bytes\":-1}]}", "mem_bytes must be a whole number"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"my npu\",\"kind\":\"npu\"}]}", "devices[1]: name \"my npu\""},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"\",\"kind\":\"npu\"}]}", "devices[1]: name \"\""},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"kind\":\"npu\"}]}", "devices[1]: name missing"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"t\",\"kind\":\"tpu\"}]}", "devices[1] \"t\": kind \"tpu\""},
        {"{\"version\":1,\"devices\":[" CPU_OK ",7]}", "devices[1]: must be an object"},
        {"{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK ",\"ops\":\"matmul\"}]}", "given twice"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"n\",\"kind\":\"npu\",\"ops\":\"matmul\"}]}",
         "ops must be an array of op names"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"n\",\"kind\":\"npu\",\"ops\":[\"add\",\"add\"]}]}",
         "\"add\" listed twice"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"n\",\"kind\":\"npu\",\"ops\":[\"kv_store\"],"
         "\"kv_types\":[\"Q4_K\",\"I32\", \"BF16\"],\"gflops\":1,\"mem_gbps\":1,\"h2d_gbps\":1,\"d2h_gbps\":1}]}",
         NULL}, /* accepted: types below 32 */
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"n\",\"kind\":\"npu\",\"ops\":[\"kv_store\"],"
         "\"kv_types\":[\"MXFP4\"],\"gflops\":1,\"mem_gbps\":1,\"h2d_gbps\":1,\"d2h_gbps\":1}]}",
         "kv_types: type \"MXFP4\" cannot be used here"},
        {"{\"version\":1,\"devices\":[" CPU_OK ",{\"name\":\"n\",\"kind\":\"npu\",\"desc\":\"a\\nb\"}]}",
         "desc holds a control character"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        el_device_caps devs[EL_MAX_BACKENDS], before[EL_MAX_BACKENDS];
        memset(devs, 0x77, sizeof devs);
        memcpy(before, devs, sizeof devs);
        el_error err = {0};
        const int n = el_devices_parse(cases[k].json, strlen(cases[k].json), NULL, devs, &err);
        if (!cases[k].want) {
            CHECKF(n == 2 && devs[1].kv_types == ((1u << EL_TYPE_Q4_K) | (1u << EL_TYPE_I32) | (1u << EL_TYPE_BF16)),
                   "case %zu: %s", k, err.msg);
            continue;
        }
        CHECKF(n == -1 && strstr(err.msg, cases[k].want), "case %zu: n %d, message '%s', want '%s'", k, n, err.msg,
               cases[k].want);
        CHECKF(memcmp(devs, before, sizeof devs) == 0, "case %zu wrote devs", k);
    }

    /* with a host: a table of 4 accelerators is one too many; a cpu in such a table must be first */
    el_device_caps devs[EL_MAX_BACKENDS];
    el_error err = {0};
    const char *four = "{\"version\":1,\"devices\":[" NPU_OK "},{\"name\":\"a\",\"kind\":\"gpu\",\"ops\":[\"add\"],"
                       "\"gflops\":1,\"mem_gbps\":1,\"h2d_gbps\":1,\"d2h_gbps\":1},{\"name\":\"b\",\"kind\":\"gpu\","
                       "\"ops\":[\"add\"],\"gflops\":1,\"mem_gbps\":1,\"h2d_gbps\":1,\"d2h_gbps\":1},{\"name\":\"c\","
                       "\"kind\":\"gpu\",\"ops\":[\"add\"],\"gflops\":1,\"mem_gbps\":1,\"h2d_gbps\":1,\"d2h_gbps\":1}]}";
    CHECK(el_devices_parse(four, strlen(four), &host, devs, &err) == -1 && strstr(err.msg, "with the host"));
    const char *npu_then_cpu = "{\"version\":1,\"devices\":[" NPU_OK "}," CPU_OK "]}";
    CHECK(el_devices_parse(npu_then_cpu, strlen(npu_then_cpu), &host, devs, &err) == -1 &&
          strstr(err.msg, "devices[1] \"cpu\": a second cpu"));
    /* a table with its own cpu ignores the host */
    const char *own = "{\"version\":1,\"devices\":[" CPU_OK "," NPU_OK "}]}";
    CHECK(el_devices_parse(own, strlen(own), &host, devs, &err) == 2 && devs[0].simulated && devs[0].gflops == 10);
    /* a host that is not a cpu */
    el_device_caps notcpu = host;
    notcpu.kind = EL_DEV_GPU;
    const char *acc = "{\"version\":1,\"devices\":[" NPU_OK "}]}";
    CHECK(el_devices_parse(acc, strlen(acc), &notcpu, devs, &err) == -1 && strstr(err.msg, "not a cpu"));
    /* not NUL-terminated: only len bytes are read */
    char cut[256];
    snprintf(cut, sizeof cut, "%s", own);
    const size_t ol = strlen(own);
    cut[ol] = '}';
    CHECK(el_devices_parse(cut, ol, &host, devs, &err) == 2);
    CHECK(el_devices_parse(own, ol - 1, &host, devs, &err) == -1 && strstr(err.msg, "not valid JSON"));

    /* files: missing, a directory, over 1 MiB */
    char p[400];
    snprintf(p, sizeof p, "%s/none.json", g_tmp);
    CHECK(el_devices_load(p, &host, devs, &err) == -1 && err.code == EL_ERR_IO && strstr(err.msg, "none.json"));
    CHECK(el_devices_load(g_tmp, &host, devs, &err) == -1 && err.code == EL_ERR_IO && strstr(err.msg, "directory"));
    snprintf(p, sizeof p, "%s/huge.json", g_tmp);
    const size_t hl = EL_DEVICES_MAX_BYTES + 10;
    char *h = malloc(hl);
    memset(h, ' ', hl);
    memcpy(h, own, ol);
    write_file(p, h, hl);
    free(h);
    CHECK(el_devices_load(p, &host, devs, &err) == -1 && strstr(err.msg, "at most"));
    CHECK(el_devices_load("/dev/zero", &host, devs, &err) == -1 && err.code == EL_ERR_IO);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/el_test_devices_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_devcache();
    test_examples();
    test_hostile_tables();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    return el_test_finish("test_devices");
}
