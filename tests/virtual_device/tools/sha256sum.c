/* sha256sum for the virtual device: the SHA-256 of the host's libcrypto (hardware SHA instructions where the
 * CPU has them), in sha256sum's output format ("HEX  NAME", "-" for standard input).
 *
 * Why: a phone hashes on its own cores, the virtual devices hash on the host's; coreutils' portable SHA-256
 * costs 2-3x more CPU than libcrypto's, which on a host running 16 virtual devices is simulation cost, not
 * deploy cost.  Any option other than "-" is handed to the host's /usr/bin/sha256sum unchanged.
 * A regular file is hashed where it lies (mmap) instead of being copied through a read buffer first: the copy
 * is a quarter of the tool's CPU on the host, and the output is the same.
 * The harness builds it (tests/virtual_device/tools.py) and checks it against known digests; without a
 * compiler or libcrypto the devices use coreutils' sha256sum.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* libcrypto's low-level SHA-256 (declared here: the headers may not be installed, the library is) */
typedef struct { unsigned int words[32]; } sha_ctx; /* larger than libcrypto's SHA256_CTX (112 bytes) */
int SHA256_Init(sha_ctx *c);
int SHA256_Update(sha_ctx *c, const void *data, size_t len);
int SHA256_Final(unsigned char *md, sha_ctx *c);

static unsigned char buf[128 * 1024];

static void print_digest(const unsigned char *md, const char *name) {
    for (int i = 0; i < 32; i++) printf("%02x", md[i]);
    printf("  %s\n", name);
}

/* A non-empty regular file, hashed in place; -1: not one (or not mappable), read it instead. */
static int hash_mapped(int fd, const char *name) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return -1;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) return -1;
    sha_ctx ctx;
    unsigned char md[32];
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, p, (size_t)st.st_size);
    SHA256_Final(md, &ctx);
    munmap(p, (size_t)st.st_size);
    print_digest(md, name);
    return 0;
}

static int hash_fd(int fd, const char *name) {
    sha_ctx ctx;
    unsigned char md[32];
    ssize_t n;
    if (fd != 0 && hash_mapped(fd, name) == 0) return 0;
    SHA256_Init(&ctx);
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "sha256sum: %s: %s\n", name, strerror(errno));
            return 1;
        }
        SHA256_Update(&ctx, buf, (size_t)n);
    }
    SHA256_Final(md, &ctx);
    print_digest(md, name);
    return 0;
}

int main(int argc, char **argv) {
    int status = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0') { /* an option: the real tool's business */
            argv[0] = "sha256sum";
            execv("/usr/bin/sha256sum", argv);
            perror("sha256sum: /usr/bin/sha256sum");
            return 1;
        }
    }
    if (argc == 1) return hash_fd(0, "-");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-") == 0) {
            status |= hash_fd(0, "-");
            continue;
        }
        int fd = open(argv[i], O_RDONLY);
        if (fd < 0) {
            fprintf(stderr, "sha256sum: %s: %s\n", argv[i], strerror(errno));
            status = 1;
            continue;
        }
        status |= hash_fd(fd, argv[i]);
        close(fd);
    }
    fflush(stdout);
    return status;
}
