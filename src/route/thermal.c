/*
 * thermal.c — the thermal monitor (contract in thermal.h).
 *
 * One sampler thread per monitor wakes every sample_ms (a condition variable
 * with a deadline, so stopping is immediate), reads the sensor(s) and the
 * CPU frequency, steps the level and stores the state under the mutex.
 * Files are read with el_open_regular (a FIFO or device given as the
 * source is refused, never blocked on) and at most 64 bytes of each.
 */
#include "route/thermal.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/file.h"

struct el_thermal {
    el_thermal_cfg cfg;
    char *source, *root;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    pthread_t th;
    bool started;
    el_thermal_state st;
    bool had_zones; /* sysfs: zones were present at start (their vanishing is a failure) */
};

const char *el_thermal_level_name(el_thermal_level l) {
    return l == EL_THERMAL_HOT ? "hot" : l == EL_THERMAL_DERATED ? "derated" : "normal";
}

bool el_thermal_parse_millideg(const char *buf, size_t n, double *c) {
    size_t i = 0;
    while (i < n && (buf[i] == ' ' || buf[i] == '\t')) i++;
    bool neg = false;
    if (i < n && buf[i] == '-') { neg = true; i++; }
    size_t d0 = i;
    long long v = 0;
    while (i < n && buf[i] >= '0' && buf[i] <= '9') {
        v = v * 10 + (buf[i] - '0');
        if (v > 10000000) return false;
        i++;
    }
    if (i == d0) return false;
    while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r')) i++;
    if (i != n) return false;
    if (neg) v = -v;
    if (v < -100000 || v > 250000) return false;
    *c = (double)v / 1000.0;
    return true;
}

el_thermal_level el_thermal_step(el_thermal_level cur, bool ok, double t, const el_thermal_cfg *cfg) {
    if (!ok) return EL_THERMAL_HOT;
    const double h = cfg->hysteresis_c;
    if (t >= cfg->hot_c) return EL_THERMAL_HOT;
    if (cur == EL_THERMAL_HOT && t >= cfg->hot_c - h) return EL_THERMAL_HOT;
    if (t >= cfg->derate_c) return EL_THERMAL_DERATED;
    if (cur != EL_THERMAL_NORMAL && t >= cfg->derate_c - h) return EL_THERMAL_DERATED;
    return EL_THERMAL_NORMAL;
}

/* The hottest zone under root/class/thermal; returns zones read sanely, -1 if none exist. */
static int read_zones(const char *root, double *hottest, int *bad) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/class/thermal", root);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int found = 0, ok = 0;
    *bad = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "thermal_zone", 12)) continue;
        char path[800], buf[64];
        snprintf(path, sizeof path, "%s/%s/temp", dir, e->d_name);
        found++;
        double c;
        int n = el_read_small(path, buf, sizeof buf);
        if (n < 0 || !el_thermal_parse_millideg(buf, (size_t)n, &c)) { (*bad)++; continue; }
        if (!ok || c > *hottest) *hottest = c;
        ok++;
    }
    closedir(d);
    return found ? ok : -1;
}

/* Mean cur/max over the CPUs with cpufreq; 1.0 when unknown. */
static double read_freq_ratio(const char *root) {
    double sum = 0;
    int n = 0;
    for (int cpu = 0; cpu < 1024; cpu++) {
        char p1[512], p2[512], b1[64], b2[64];
        snprintf(p1, sizeof p1, "%s/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", root, cpu);
        snprintf(p2, sizeof p2, "%s/devices/system/cpu/cpu%d/cpufreq/cpuinfo_max_freq", root, cpu);
        int n1 = el_read_small(p1, b1, sizeof b1);
        if (n1 < 0) break;
        int n2 = el_read_small(p2, b2, sizeof b2);
        if (n2 < 0) break;
        long long cur = atoll(b1), max = atoll(b2);
        if (cur > 0 && max > 0) {
            double r = (double)cur / (double)max;
            sum += r > 1 ? 1 : r;
            n++;
        }
    }
    return n ? sum / n : 1.0;
}

static void sample(el_thermal *t) {
    double c = 0;
    bool ok = false, has = true;
    char why[160];
    if (t->source) {
        char buf[64];
        int n = el_read_small(t->source, buf, sizeof buf);
        if (n < 0) snprintf(why, sizeof why, "sensor %.100s cannot be read (%s)", t->source, strerror(errno));
        else if (!el_thermal_parse_millideg(buf, (size_t)n, &c))
            snprintf(why, sizeof why, "sensor %.100s does not hold millidegrees", t->source);
        else ok = true;
    } else {
        int bad = 0;
        int n = read_zones(t->root, &c, &bad);
        if (n < 0 && !t->had_zones) {
            has = false;
            snprintf(why, sizeof why, "no thermal sensor on this device");
        } else if (n <= 0) {
            snprintf(why, sizeof why, "thermal zones unreadable");
        } else {
            ok = true;
        }
    }
    double fr = read_freq_ratio(t->root);
    pthread_mutex_lock(&t->mu);
    el_thermal_state *s = &t->st;
    s->has_sensor = has;
    s->sensor_ok = ok;
    if (ok) s->temp_c = c;
    s->freq_ratio = fr;
    el_thermal_level next = has ? el_thermal_step(s->level, ok, c, &t->cfg) : EL_THERMAL_NORMAL;
    const el_thermal_level prev = s->level;
    const bool changed = next != s->level && s->samples > 0;
    if (changed) s->transitions++;
    s->level = next;
    s->factor = (next == EL_THERMAL_HOT ? 0.0 : next == EL_THERMAL_DERATED ? 0.5 : 1.0) * fr;
    if (ok) snprintf(why, sizeof why, "%.1f C (%s)", c, el_thermal_level_name(next));
    snprintf(s->why, sizeof s->why, "%s", why);
    s->samples++;
    pthread_mutex_unlock(&t->mu);
    if (changed && t->cfg.on_change) t->cfg.on_change(t->cfg.user, prev, next);
}

static void *sampler_main(void *arg) {
    el_thermal *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(t->cfg.sample_ms % 1000) * 1000000L;
        ts.tv_sec += t->cfg.sample_ms / 1000 + ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        while (!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &ts) != ETIMEDOUT) {}
        if (t->stop) break;
        pthread_mutex_unlock(&t->mu);
        sample(t);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

el_thermal *el_thermal_start(const el_thermal_cfg *cfg, char *msg, size_t cap) {
    el_thermal *t = calloc(1, sizeof *t);
    if (!t) {
        if (msg && cap) snprintf(msg, cap, "out of memory");
        return NULL;
    }
    t->cfg = *cfg;
    if (t->cfg.sample_ms < 10) t->cfg.sample_ms = 10;
    t->source = cfg->source ? strdup(cfg->source) : NULL;
    t->root = strdup(cfg->sysfs_root ? cfg->sysfs_root : "/sys");
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->st.freq_ratio = 1.0;
    t->st.factor = 1.0;
    if ((cfg->source && !t->source) || !t->root) {
        el_thermal_stop(t);
        if (msg && cap) snprintf(msg, cap, "out of memory");
        return NULL;
    }
    if (!t->source) {
        double c;
        int bad;
        t->had_zones = read_zones(t->root, &c, &bad) >= 0;
    }
    sample(t);
    if (pthread_create(&t->th, NULL, sampler_main, t)) {
        el_thermal_stop(t);
        if (msg && cap) snprintf(msg, cap, "cannot start the thermal sampler thread");
        return NULL;
    }
    t->started = true;
    return t;
}

el_thermal_state el_thermal_get(el_thermal *t) {
    el_thermal_state s;
    memset(&s, 0, sizeof s);
    if (!t) {
        s.factor = s.freq_ratio = 1.0;
        snprintf(s.why, sizeof s.why, "no thermal monitor");
        return s;
    }
    pthread_mutex_lock(&t->mu);
    s = t->st;
    pthread_mutex_unlock(&t->mu);
    return s;
}

void el_thermal_stop(el_thermal *t) {
    if (!t) return;
    if (t->started) {
        pthread_mutex_lock(&t->mu);
        t->stop = true;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->th, NULL);
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t->source);
    free(t->root);
    free(t);
}
