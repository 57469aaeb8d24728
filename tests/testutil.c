#include "testutil.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

int el_test_failures = 0;
int el_test_checks = 0;

const char *el_test_ref_path(const char *rel) {
    static char buf[4096];
    const char *base = getenv("EL_SHARED_DIR");
    if (!base || !*base) base = EL_SHARED_DIR;
    snprintf(buf, sizeof buf, "%s/reference/%s", base, rel);
    return buf;
}

int el_test_have_ref(void) {
    struct stat st;
    return stat(el_test_ref_path("README.md"), &st) == 0;
}

void el_test_skip(const char *why) {
    printf("SKIPPED: %s\n", why);
    exit(77);
}

char *el_test_read_fd(int fd, size_t *len) {
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    for (;;) {
        if (n + 1 >= cap) {
            char *p = realloc(b, cap *= 2);
            if (!p) { free(b); return NULL; }
            b = p;
        }
        ssize_t r = read(fd, b + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    b[n] = 0;
    if (len) *len = n;
    return b;
}

char *el_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (!b) { fclose(f); return NULL; }
    size_t r = fread(b, 1, (size_t)n, f);
    fclose(f);
    b[r] = 0;
    if (len) *len = r;
    return b;
}

int el_test_finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, el_test_checks, el_test_failures);
    return el_test_failures ? 1 : 0;
}
