/* rm for the virtual device: `rm -rf PATH...` where each PATH is missing, a file, or a directory holding only
 * files (a deploy's lock and its marks) is a few unlink(2)/rmdir(2) calls, as the real rm does them, without
 * loading coreutils' shared libraries (see mv.c for why).  Every other form, and any path it does not settle
 * (a subdirectory, a failure...), is handed to the host's /usr/bin/rm unchanged, which removes what is left.
 */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int remove_flat_dir(const char *path) {
    DIR *d = opendir(path);
    if (d == NULL) return -1;
    int fd = dirfd(d), bad = 0;
    struct dirent *e;
    while (!bad && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        struct stat st;
        bad = fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)
              || unlinkat(fd, e->d_name, 0) != 0;
    }
    closedir(d);
    return bad ? -1 : rmdir(path);
}

static int simple_remove(const char *path) {
    struct stat st;
    if (path[0] == '-' || strcmp(path, ".") == 0 || strcmp(path, "..") == 0 || strcmp(path, "/") == 0) return -1;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    return S_ISDIR(st.st_mode) ? remove_flat_dir(path) : unlink(path);
}

int main(int argc, char **argv) {
    int ok = argc > 2 && strcmp(argv[1], "-rf") == 0;
    for (int i = 2; ok && i < argc; i++) ok = simple_remove(argv[i]) == 0;
    if (ok) return 0;
    argv[0] = "rm";
    execv("/usr/bin/rm", argv);
    perror("rm: /usr/bin/rm");
    return 1;
}
