/* chmod for the virtual device: `chmod OCTAL FILE...` on files that are not directories is one chmod(2) per
 * file, as the real chmod does it, without loading coreutils' shared libraries (see mv.c for why).  A symbolic
 * mode, an option, a directory, and every failure are handed to the host's /usr/bin/chmod unchanged (it sets
 * again what was set: same result, messages and exit codes).
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static int simple_chmod(int argc, char **argv) {
    const char *m = argv[1];
    if (strlen(m) == 0 || strlen(m) > 4 || strspn(m, "01234567") != strlen(m)) return -1;
    mode_t mode = (mode_t)strtol(m, NULL, 8);
    for (int i = 2; i < argc; i++) {
        struct stat st;
        if (argv[i][0] == '-' || stat(argv[i], &st) != 0 || S_ISDIR(st.st_mode) || chmod(argv[i], mode) != 0)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && simple_chmod(argc, argv) == 0) return 0;
    argv[0] = "chmod";
    execv("/usr/bin/chmod", argv);
    perror("chmod: /usr/bin/chmod");
    return 1;
}
