/* mv for the virtual device: `mv [-f] SRC DST`, a file onto a name that is not a directory, is one rename(2), as
 * the real mv does it, without loading coreutils' shared libraries (each deploy verify call runs one mv per file:
 * on a host running many virtual devices the process start-ups are simulation cost, not deploy cost).
 * Every other form, and every case the rename does not settle (a directory, the same file, another filesystem,
 * a missing file...), is handed to the host's /usr/bin/mv unchanged: same result, messages and exit codes.
 * The harness builds it (tests/virtual_device/tools.py) and checks it against coreutils.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int simple_rename(const char *src, const char *dst) {
    struct stat s, d;
    if (src[0] == '-' || dst[0] == '-' || lstat(src, &s) != 0 || S_ISDIR(s.st_mode)) return -1;
    if (stat(dst, &d) == 0) {
        if (S_ISDIR(d.st_mode) || (d.st_dev == s.st_dev && d.st_ino == s.st_ino)) return -1;
    } else if (errno != ENOENT) {
        return -1;
    }
    return rename(src, dst);
}

int main(int argc, char **argv) {
    int i = (argc > 1 && strcmp(argv[1], "-f") == 0) ? 2 : 1;
    if (argc - i == 2 && simple_rename(argv[i], argv[i + 1]) == 0) return 0;
    argv[0] = "mv";
    execv("/usr/bin/mv", argv);
    perror("mv: /usr/bin/mv");
    return 1;
}
