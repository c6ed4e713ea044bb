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
 * o other, x a directory deeper than MAX_DEPTH that was not entered (what is below it
 * is not listed). OPAQUE: O for a directory marked trusted.overlay.opaque, else -.
 * PATH is relative to DIR, as raw bytes. Exit status 0, or 1 with a message on stderr.
 *
 * The guest chooses the depth and the length of its paths, so neither may break the
 * walk: the path buffer grows as needed, and only one descriptor per level is held
 * while descending (a directory's names are read first, then its buffer is freed), so
 * memory and descriptors grow with the depth, up to MAX_DEPTH levels: more than any
 * path a program can name at once (PATH_MAX is 4096 bytes, two per level at the least).
 *
 * change-watch.c includes this file (with LAYER_WALK_LIBRARY defined, so without main)
 * to list the parts of a layer that fanotify says were touched, record for record as
 * this walker lists the whole.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_DEPTH 1024

static char *path;
static size_t path_cap;

/* Makes room for a path of n bytes and its terminator. */
static int reserve(size_t n) {
  if (n + 1 <= path_cap) return 0;
  size_t cap = path_cap ? path_cap : 4096;
  while (cap < n + 1) cap *= 2;
  char *grown = realloc(path, cap);
  if (grown == NULL) return -1;
  path = grown;
  path_cap = cap;
  return 0;
}

/* The names in the open directory dirfd, NUL-separated, without . and ..; the caller frees them. */
static int read_names(int dirfd, char **names, size_t *len) {
  int fd = dup(dirfd);
  if (fd < 0) return -1;
  DIR *dir = fdopendir(fd);
  if (dir == NULL) {
    close(fd);
    return -1;
  }
  char *buf = NULL;
  size_t used = 0, cap = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    size_t n = strlen(entry->d_name) + 1;
    if (used + n > cap) {
      size_t next = cap ? cap * 2 : 1024;
      while (next < used + n) next *= 2;
      char *grown = realloc(buf, next);
      if (grown == NULL) {
        free(buf);
        closedir(dir);
        return -1;
      }
      buf = grown;
      cap = next;
    }
    memcpy(buf + used, entry->d_name, n);
    used += n;
  }
  closedir(dir);
  *names = buf;
  *len = used;
  return 0;
}

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
  char *names;
  size_t names_len;
  if (read_names(dirfd, &names, &names_len) != 0) {
    fprintf(stderr, "layer-walk: read %.*s: %s\n", (int)len, path, strerror(errno));
    close(dirfd);
    return -1;
  }
  int status = 0;
  for (size_t at = 0; at < names_len; at += strlen(names + at) + 1) {
    const char *name = names + at;
    size_t name_len = strlen(name);
    size_t next_len = len + (len > 0 ? 1 : 0) + name_len;
    if (reserve(next_len) != 0) {
      fprintf(stderr, "layer-walk: out of memory for a path of %zu bytes\n", next_len);
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
    if (depth >= MAX_DEPTH) {
      emit(&st, 'x', 0, next_len); /* too deep to enter: its contents stay unlisted */
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
  free(names);
  close(dirfd);
  return status;
}

/* One descriptor per level is held while descending: make room for the deepest walk. */
static void raise_file_limit(void) {
  struct rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < MAX_DEPTH + 64) {
    files.rlim_cur = MAX_DEPTH + 64;
    if (files.rlim_max < files.rlim_cur) files.rlim_max = files.rlim_cur; /* raising the hard limit takes root, which the walker has */
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

#ifndef LAYER_WALK_LIBRARY
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
  raise_file_limit();
  if (reserve(0) != 0) return 1;
  path[0] = '\0';
  int status = walk(root, 0, 0);
  if (fflush(stdout) != 0) return 1;
  return status == 0 ? 0 : 1;
}
#endif
