/* sha1sum for the virtual device: the SHA-1 of the host's libcrypto (hardware SHA instructions where the
 * CPU has them), in sha1sum's output format ("HEX  NAME", "-" for standard input).
 *
 * Why: a phone hashes on its own cores, the virtual devices hash on the host's; coreutils' portable SHA-1
 * costs 2-3x more CPU than libcrypto's, which on a host running 16 virtual devices is simulation cost, not
 * deploy cost.  Any option other than "-" is handed to the host's /usr/bin/sha1sum unchanged.
 * A regular file is hashed where it lies (mmap) instead of being copied through a read buffer first: the copy
 * is a quarter of the tool's CPU on the host, and the output is the same.
 * The harness builds it (tests/virtual_device/tools.py) and checks it against known digests; without a
 * compiler or libcrypto the devices use coreutils' sha1sum.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* libcrypto's low-level SHA-1 (declared here: the headers may not be installed, the library is) */
typedef struct { unsigned int words[32]; } sha_ctx; /* larger than libcrypto's SHA_CTX (96 bytes) */
int SHA1_Init(sha_ctx *c);
int SHA1_Update(sha_ctx *c, const void *data, size_t len);
int SHA1_Final(unsigned char *md, sha_ctx *c);

static unsigned char buf[128 * 1024];

static void print_digest(const unsigned char *md, const char *name) {
    for (int i = 0; i < 20; i++) printf("%02x", md[i]);
    printf("  %s\n", name);
}

/* A non-empty regular file, hashed in place; -1: not one (or not mappable), read it instead. */
static int hash_mapped(int fd, const char *name) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return -1;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) return -1;
    sha_ctx ctx;
    unsigned char md[20];
    SHA1_Init(&ctx);
    SHA1_Update(&ctx, p, (size_t)st.st_size);
    SHA1_Final(md, &ctx);
    munmap(p, (size_t)st.st_size);
    print_digest(md, name);
    return 0;
}

static int hash_fd(int fd, const char *name) {
    sha_ctx ctx;
    unsigned char md[20];
    ssize_t n;
    if (fd != 0 && hash_mapped(fd, name) == 0) return 0;
    SHA1_Init(&ctx);
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "sha1sum: %s: %s\n", name, strerror(errno));
            return 1;
        }
        SHA1_Update(&ctx, buf, (size_t)n);
    }
    SHA1_Final(md, &ctx);
    print_digest(md, name);
    return 0;
}

int main(int argc, char **argv) {
    int status = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0') { /* an option: the real tool's business */
            argv[0] = "sha1sum";
            execv("/usr/bin/sha1sum", argv);
            perror("sha1sum: /usr/bin/sha1sum");
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
            fprintf(stderr, "sha1sum: %s: %s\n", argv[i], strerror(errno));
            status = 1;
            continue;
        }
        status |= hash_fd(fd, argv[i]);
        close(fd);
    }
    fflush(stdout);
    return status;
}
