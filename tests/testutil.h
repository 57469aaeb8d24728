/* testutil.h — tiny test harness: CHECK macros, fixture lookup, skip, child processes. */
#ifndef EL_TESTUTIL_H
#define EL_TESTUTIL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "edgellm.h"

extern int el_test_failures;
extern int el_test_checks;

#define CHECK(cond) do { el_test_checks++; if (!(cond)) { el_test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { el_test_checks++; if (!(cond)) { el_test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Reproducible random numbers for a test: xorshift64 over the test's own
 * state (each test keeps its seed, so its sequence is its own).
 * el_test_rnd: 32 bits; el_test_rndf: a float in [-1, 1) from them. */
static inline uint32_t el_test_rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 16);
}
static inline float el_test_rndf(uint64_t *s) { return (float)((double)el_test_rnd(s) / 4294967296.0 * 2.0 - 1.0); }

/* Path under the fixtures' reference/ ($EL_FIXTURE_DIR, else the build's
 * EL_FIXTURE_DIR; tests/fixtures/make_fixtures.py writes them) — static
 * buffer, valid until the next call. */
const char *el_test_ref_path(const char *rel);
/* True if the fixtures are complete (reference/README.md, written last).
 * Under CI=true a missing set does not return: FAIL and exit 1, so that no
 * test skips what it should check. */
int el_test_have_ref(void);
/* True for a llama.cpp vocabulary file (reference/tokenizer/NAME) whose
 * tokenizer edgellm does not implement (WPM, UGM, Gemma 4's BPE, Qwen 3.5's
 * pre-tokenizer): test_tokenizer checks each is refused cleanly; the tests
 * that walk every vocabulary leave them out. */
bool el_test_vocab_refused(const char *name);
/* Exit 77 (ctest: skipped) with a reason. Under CI=true `make test`'s summary
 * (tools/test-summary.py) counts such a skip as a failure: what a test needs
 * that the project installs must be there. */
void el_test_skip(const char *why);
/* Exit 77 for hardware this machine lacks (an OpenCL device, a SIMD level):
 * the one kind of skip the summary accepts under CI=true. */
void el_test_skip_hw(const char *why);
/* Reads a file descriptor to EOF (malloc'd, NUL-terminated; *len if len); NULL on failure. */
char *el_test_read_fd(int fd, size_t *len);
/* Reads a whole file (malloc'd, NUL-terminated); NULL on failure. */
char *el_test_read_file(const char *path, size_t *len);
/* The names of dir's *.json files containing filter (NULL: all), sorted, as
 * malloc'd strings in names[0..return); at most cap. -1 if dir cannot be opened. */
int el_test_list_json(const char *dir, const char *filter, char **names, int cap);
/* A finished child process: exit code (or 128 + signal), stdout and stderr
 * (malloc'd, NUL-terminated). */
typedef struct el_test_proc {
    int status;
    bool timed_out; /* el_test_run_timeout killed it (status 128 + SIGKILL) */
    char *out;
    size_t out_len;
    char *err;
} el_test_proc;
/* Runs exe with args (NULL-terminated, argv[0] excluded); stdout through a
 * pipe, stderr through a temporary file (no deadlock on either). False if the
 * process could not be run or its output not read. */
bool el_test_run(const char *exe, const char *const *args, el_test_proc *r);
/* el_test_run, but the process is killed (SIGKILL) once it has run timeout_s
 * seconds (0: no limit): a hang fails the test instead of blocking it. */
bool el_test_run_timeout(const char *exe, const char *const *args, double timeout_s, el_test_proc *r);
/* el_test_run_timeout with `input` (NUL-terminated; NULL: the test's own
 * stdin) as the process's stdin. */
bool el_test_run_input(const char *exe, const char *const *args, const char *input, double timeout_s,
                       el_test_proc *r);
void el_test_proc_free(el_test_proc *r);
#ifdef EL_CLI_PATH
/* el_test_run of the built `edgellm` binary. */
static inline bool el_test_run_cli(const char *const *args, el_test_proc *r) { return el_test_run(EL_CLI_PATH, args, r); }
static inline bool el_test_run_cli_timeout(const char *const *args, double timeout_s, el_test_proc *r) {
    return el_test_run_timeout(EL_CLI_PATH, args, timeout_s, r);
}
static inline bool el_test_run_cli_input(const char *const *args, const char *input, el_test_proc *r) {
    return el_test_run_input(EL_CLI_PATH, args, input, 0, r);
}
#endif

/* ---- hostile GGUF files: a copy of a fixture with one field changed ---- */
/* Offset of a GGUF string (its u64 length, then the bytes) equal to s in buf,
 * or 0 when there is none. */
size_t el_test_gguf_str_at(const char *buf, size_t len, const char *s);
typedef enum {
    EL_TEST_PATCH_U32,  /* key `name` (a UINT32 value) set to v */
    EL_TEST_PATCH_NAME, /* the last byte of key or tensor `name` made 'X' */
    EL_TEST_PATCH_NE,   /* tensor `name`'s dimension (v >> 32) set to (uint32_t)v */
} el_test_patch_kind;
/* Patches buf in place; false (and a failed CHECK naming it) when `name` or
 * the field is not found where the kind expects it. */
bool el_test_gguf_patch(char *buf, size_t len, el_test_patch_kind kind, const char *name, uint64_t v);
/* Writes len bytes to path (created or truncated); false on any failure. */
bool el_test_write_file(const char *path, const void *buf, size_t len);
/* Writes buf to path and loads it as a model (one thread); the load's error,
 * {EL_OK, "loaded"} when it loaded (the model is freed). Inline, so that
 * testutil.c itself needs no model loader: tools/check-neon links it into
 * kernel tests cross-built without PCRE2. */
static inline el_error el_test_load_bytes(const char *path, const char *buf, size_t len) {
    el_error err = {EL_OK, ""};
    const bool ok = el_test_write_file(path, buf, len);
    CHECKF(ok, "cannot write %s", path);
    if (!ok) return (el_error){EL_ERR_IO, "write"};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    el_model *m = el_model_load(path, &mp, &err);
    if (m) err = (el_error){EL_OK, "loaded"};
    el_model_free(m);
    return err;
}

/* Prints "N passed, N failed"-style summary and returns the exit code. */
int el_test_finish(const char *name);

#endif
