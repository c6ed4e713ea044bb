/*
 * Preloaded into every process of an instance (through /etc/ld.so.preload).
 *
 * The gVisor release Debian ships answers statx() and fstatat() with EINVAL when the
 * flags carry AT_NO_AUTOMOUNT, and coreutils 9 (ls, stat, du, ...) always passes that
 * flag, so `ls` fails on every path. A sandbox has no automount points, so the flag
 * changes nothing there: these wrappers drop it and make the system call.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

int fstatat(int dirfd, const char *path, struct stat *buf, int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}

int fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}
