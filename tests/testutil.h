/* testutil.h — tiny test harness: CHECK macros, shared-data lookup, skip. */
#ifndef EL_TESTUTIL_H
#define EL_TESTUTIL_H
#include <stdio.h>
#include <stdlib.h>

extern int el_test_failures;
extern int el_test_checks;

#define CHECK(cond) do { el_test_checks++; if (!(cond)) { el_test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { el_test_checks++; if (!(cond)) { el_test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Path under ../shared/reference (static buffer, valid until next call). */
const char *el_test_ref_path(const char *rel);
/* True if ../shared/reference exists. */
int el_test_have_ref(void);
/* Exit 77 (ctest: skipped) with a reason. */
void el_test_skip(const char *why);
/* Reads a file descriptor to EOF (malloc'd, NUL-terminated; *len if len); NULL on failure. */
char *el_test_read_fd(int fd, size_t *len);
/* Reads a whole file (malloc'd, NUL-terminated); NULL on failure. */
char *el_test_read_file(const char *path, size_t *len);
/* Prints "N passed, N failed"-style summary and returns the exit code. */
int el_test_finish(const char *name);

#endif
