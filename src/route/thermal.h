/*
 * thermal.h — the thermal monitor (layer L6): samples the device's
 * temperature (the hottest /sys/class/thermal/thermal_zoneN/temp, or one
 * sensor file given with `serve --thermal-source FILE`, read the same way)
 * and the CPU frequency (cpufreq: scaling_cur_freq / cpuinfo_max_freq) at a
 * low rate, and turns them into a level with hysteresis and a derating
 * factor that the server and the router read.
 *
 * Contract:
 *   - Levels: NORMAL → DERATED at temp >= derate_c, → HOT at temp >= hot_c;
 *     a level is left only once the temperature is below its threshold minus
 *     hysteresis_c (HOT → DERATED or NORMAL, DERATED → NORMAL), so a
 *     temperature hovering at a threshold does not flap.
 *   - Fail safe: a sensor that was configured (or found) and then cannot be
 *     read, or reads anything but an integer in millidegrees within
 *     -100000..250000, is HOT (reason says why) until it reads sanely again.
 *     A device with no thermal zone at all and no --thermal-source has no
 *     sensor: NORMAL, sensor "none".
 *   - factor: NORMAL 1.0, DERATED 0.5, HOT 0.0, times the CPU frequency
 *     ratio when cpufreq is readable (1.0 otherwise): the share of the
 *     measured local speed the router may count on.
 *   - el_thermal_get never blocks on I/O (it copies the last sample under a
 *     mutex); the sampler thread alone reads files.
 */
#ifndef EL_SERVICE_THERMAL_H
#define EL_SERVICE_THERMAL_H
#include <stdbool.h>
#include <stddef.h>

typedef enum { EL_THERMAL_NORMAL = 0, EL_THERMAL_DERATED = 1, EL_THERMAL_HOT = 2 } el_thermal_level;

typedef struct el_thermal_cfg {
    const char *source;  /* a sensor file (millidegrees C), or NULL: the sysfs thermal zones */
    const char *sysfs_root; /* NULL: "/sys"; tests may point it elsewhere */
    double derate_c, hot_c, hysteresis_c;
    int sample_ms;
    /* optional: called from the sampler thread after each level change
     * (not for the first sample), outside the monitor's lock */
    void (*on_change)(void *user, el_thermal_level from, el_thermal_level to);
    void *user;
} el_thermal_cfg;

typedef struct el_thermal_state {
    el_thermal_level level;
    bool has_sensor;     /* false: no sensor on this device (level NORMAL) */
    bool sensor_ok;      /* the last read gave a sane temperature */
    double temp_c;       /* last sane reading (hottest zone) */
    double freq_ratio;   /* CPU frequency now / max (1 when unknown) */
    double factor;       /* derating factor, 0..1 */
    long transitions;    /* level changes since start */
    long samples;
    char why[160];       /* the last sample in words */
} el_thermal_state;

typedef struct el_thermal el_thermal;

/* Takes a first sample synchronously, then starts the sampler thread. NULL
 * (with msg) only when the thread cannot start or memory runs out. */
el_thermal *el_thermal_start(const el_thermal_cfg *cfg, char *msg, size_t cap);
el_thermal_state el_thermal_get(el_thermal *t);
void el_thermal_stop(el_thermal *t); /* NULL is fine */

const char *el_thermal_level_name(el_thermal_level l);
/* Pure pieces (tested directly). Parses sysfs millidegrees ("45000\n"):
 * true with *c set, false for anything else. */
bool el_thermal_parse_millideg(const char *buf, size_t n, double *c);
/* The next level from cur for a reading (ok false: unreadable → HOT). */
el_thermal_level el_thermal_step(el_thermal_level cur, bool ok, double temp_c, const el_thermal_cfg *cfg);

#endif
