/*
 * devices_json.h — the --devices table: devices this machine may lack,
 * described in a JSON file, for planning and reporting only (`edgellm plan
 * --devices FILE`): every device it yields has simulated = true, and no
 * measured speed is ever claimed from it. Service library (cJSON); the core
 * library never parses JSON.
 *
 * Format (version 1):
 *
 *   {"version": 1,
 *    "devices": [
 *      {"name": "cpu", "kind": "cpu", "matmul_gflops": 40, "gflops": 10,
 *       "mem_gbps": 20},
 *      {"name": "npu0", "kind": "npu", "desc": "a 10x NPU (simulated)",
 *       "ops": ["matmul"], "matmul_types": ["Q8_0", "Q4_0"],
 *       "matmul_gflops": 400, "matmul_gflops_type": {"Q4_0": 350},
 *       "gflops": 1, "mem_gbps": 60, "h2d_gbps": 4, "d2h_gbps": 4,
 *       "launch_us": 20, "mem_bytes": 1073741824},
 *      ...]}
 *
 * Fields: name (1..47 letters, digits, _ - . :; unique), kind ("cpu" | "gpu" | "npu" |
 * "other"), desc (optional, < 160 bytes), ops (op kind names as
 * el_op_kind_name gives them), matmul_types (el_type names, "Q4_0"; any
 * case), kv_types (cache types below id 32), matmul_gflops,
 * matmul_gflops_type (type name -> rate), gflops, mem_gbps, h2d_gbps,
 * d2h_gbps, launch_us (default 0), matmul1_gbps (weight bytes/s of a one-row
 * matmul; 0: mem_gbps), sync_us (a read-back round trip, default 0), mem_bytes (integer; 0 or absent:
 * unbounded). Unknown fields are errors (a misspelt rate must not pass
 * silently).
 *
 * The host: the table's cpu device (kind "cpu"), which must then be first;
 * it runs every op and every type, so it takes no ops/matmul_types/kv_types,
 * needs matmul_gflops, gflops and mem_gbps > 0 and ignores h2d/d2h. A table
 * with no cpu device describes accelerators only: the caller supplies the
 * host's caps (measured here, or from the capability cache) as `host`, which
 * becomes device 0 and keeps simulated as the caller set it.
 *
 * Refused, with a message naming the device (by index and name) and the
 * field: not JSON, not an object, a version other than 1, no devices, more
 * than EL_MAX_BACKENDS in all (host included), duplicate names, two CPUs, a
 * cpu not first, no cpu and no host, unknown op / type / kind names, a rate
 * that is NaN, infinite, negative, neither 0 nor within [1e-6, 1e9]
 * (EL_RATE_MIN/MAX), or missing/zero where required (a non-CPU
 * device needs mem_gbps, h2d_gbps and d2h_gbps > 0; matmul_gflops > 0 when
 * it runs matmul or get_rows; gflops > 0 when it runs any other op), ops
 * listing matmul/get_rows without matmul_types or kv_store/attention without
 * kv_types, types or a per-type rate without the ops that use them, "host"
 * on a device other than the CPU, a device with no ops.
 */
#ifndef EL_SCHED_DEVICES_JSON_H
#define EL_SCHED_DEVICES_JSON_H
#include <stddef.h>

#include "backend/backend.h"
#include "edgellm.h"

#define EL_DEVICES_VERSION 1
#define EL_DEVICES_MAX_BYTES (1 << 20)

/* Parses text[0..len) into devs[0..n) (devs[0]: the CPU, see above); returns
 * n (1..EL_MAX_BACKENDS), or -1 with err (EL_ERR_BAD_VALUE and the reason). */
int el_devices_parse(const char *text, size_t len, const el_device_caps *host, el_device_caps devs[EL_MAX_BACKENDS],
                     el_error *err);
/* el_devices_parse of a file (a regular file of at most 1 MiB); -1 with err
 * (EL_ERR_IO naming the path, or the parse error prefixed by the path). */
int el_devices_load(const char *path, const el_device_caps *host, el_device_caps devs[EL_MAX_BACKENDS],
                    el_error *err);

#endif
