/*
 * log.c — routing the library's log to the application, and checking that
 * the header and the library agree on the version. The library prints
 * nothing itself; with a log callback in el_model_params it reports what it
 * does (model loaded, session sized, load failures) at a level.
 * Usage: log MODEL.gguf
 * Prints "version: X" and "[app-log LEVEL] message" lines; a second load of a
 * missing file shows the error both as a log line and as the returned el_error.
 */
#include <edgellm.h>
#include <stdio.h>
#include <string.h>

static void app_log(el_log_level level, const char *msg, void *user) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    int *count = user;
    (*count)++;
    printf("[app-log %s] %s\n", level <= EL_LOG_DEBUG ? names[level] : "?", msg);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]); return 2; }
    printf("version: %s (header %s)\n", el_version(), EL_VERSION_STRING);
    if (strcmp(el_version(), EL_VERSION_STRING) != 0) return 1;
    int count = 0;
    el_model_params mp = el_model_default_params();
    mp.log_cb = app_log;
    mp.log_user = &count;
    el_error err;
    el_model *m = el_model_load(argv[1], &mp, &err);
    if (!m) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 256;
    el_session *s = el_session_new(m, &sp, &err);
    if (!s) { fprintf(stderr, "error: %s\n", err.msg); el_model_free(m); return 1; }
    el_session_free(s);
    el_model_free(m);
    el_model *bad = el_model_load("/nonexistent/model.gguf", &mp, &err);
    printf("missing file: %s (%s)\n", bad ? "loaded?!" : el_status_name(err.code), err.msg);
    printf("%d log lines\n", count);
    return bad != NULL;
}
