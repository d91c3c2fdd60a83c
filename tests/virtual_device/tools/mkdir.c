/* mkdir for the virtual device: `mkdir DIR` (one operand, no option) is one mkdir(2), as the real mkdir does it,
 * without loading coreutils' shared libraries (a deploy takes its device lock with it; see mv.c for why).  Every
 * other form, and every failure (the lock is taken, the parent is missing...), is handed to the host's
 * /usr/bin/mkdir unchanged: same result, messages and exit codes.
 */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc == 2 && argv[1][0] != '-' && mkdir(argv[1], 0777) == 0) return 0;
    argv[0] = "mkdir";
    execv("/usr/bin/mkdir", argv);
    perror("mkdir: /usr/bin/mkdir");
    return 1;
}
