/*
 * layer-walk DIR: lists every entry under DIR (an instance's overlay upper directory)
 * with its metadata, for the files_changed diff. The guest controls what is in DIR and
 * may swap a directory for a symbolic link while this runs, so the walk never resolves
 * a path: each directory is opened relative to its parent's descriptor with O_NOFOLLOW,
 * and its device and inode are checked against what fstatat saw before descending.
 * File contents are never opened.
 *
 * Output: one record per entry, NUL-terminated:
 *   TYPE MODE SIZE MTIME_NS CTIME_NS INO OPAQUE '\t' PATH
 * TYPE: f regular, d directory, l symlink, w overlay whiteout (char device 0:0),
 * o other. OPAQUE: O for a directory marked trusted.overlay.opaque, else -.
 * PATH is relative to DIR. Exit status 0, or 1 with a message on stderr.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_DEPTH 512
#define MAX_PATH 16384

static char path[MAX_PATH];

static char type_of(const struct stat *st) {
  if (S_ISREG(st->st_mode)) return 'f';
  if (S_ISDIR(st->st_mode)) return 'd';
  if (S_ISLNK(st->st_mode)) return 'l';
  if (S_ISCHR(st->st_mode) && major(st->st_rdev) == 0 && minor(st->st_rdev) == 0) return 'w';
  return 'o';
}

static int opaque(int fd) {
  char value[4];
  ssize_t n = fgetxattr(fd, "trusted.overlay.opaque", value, sizeof value);
  return n == 1 && value[0] == 'y';
}

static void emit(const struct stat *st, char type, int is_opaque, size_t len) {
  printf("%c %o %lld %lld%09ld %lld%09ld %llu %c\t", type, (unsigned)(st->st_mode & 07777), (long long)st->st_size,
         (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec,
         (unsigned long long)st->st_ino, is_opaque ? 'O' : '-');
  fwrite(path, 1, len, stdout);
  putchar('\0');
}

/* Walks the open directory dirfd, whose path (relative to the root) is path[0..len). */
static int walk(int dirfd, size_t len, int depth) {
  if (depth > MAX_DEPTH) {
    fprintf(stderr, "layer-walk: deeper than %d directories at %.*s\n", MAX_DEPTH, (int)len, path);
    close(dirfd);
    return -1;
  }
  DIR *dir = fdopendir(dirfd);
  if (dir == NULL) {
    close(dirfd);
    return -1;
  }
  int status = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    const char *name = entry->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    size_t name_len = strlen(name);
    size_t next_len = len + (len > 0 ? 1 : 0) + name_len;
    if (next_len >= MAX_PATH) {
      fprintf(stderr, "layer-walk: path too long under %.*s\n", (int)len, path);
      status = -1;
      break;
    }
    if (len > 0) path[len] = '/';
    memcpy(path + len + (len > 0 ? 1 : 0), name, name_len);
    path[next_len] = '\0';

    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue; /* removed while we looked */
      fprintf(stderr, "layer-walk: stat %s: %s\n", path, strerror(errno));
      status = -1;
      break;
    }
    char type = type_of(&st);
    if (type != 'd') {
      emit(&st, type, 0, next_len);
      continue;
    }
    int child = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue; /* swapped while we looked */
      fprintf(stderr, "layer-walk: open %s: %s\n", path, strerror(errno));
      status = -1;
      break;
    }
    struct stat opened;
    if (fstat(child, &opened) != 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
      close(child); /* not the directory we stat'ed: it was swapped; skip it */
      continue;
    }
    emit(&opened, 'd', opaque(child), next_len);
    if (walk(child, next_len, depth + 1) != 0) {
      status = -1;
      break;
    }
  }
  closedir(dir);
  return status;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: layer-walk DIR\n");
    return 2;
  }
  int root = open(argv[1], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) {
    fprintf(stderr, "layer-walk: open %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  path[0] = '\0';
  int status = walk(root, 0, 0);
  if (fflush(stdout) != 0) return 1;
  return status == 0 ? 0 : 1;
}
