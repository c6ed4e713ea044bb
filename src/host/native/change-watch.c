/*
 * change-watch: tells the service which paths of each instance's writable layer were
 * touched, so that a command's files_changed costs what the command changed instead of
 * a walk of the whole layer (runtimes/gvisor/change-watch.ts runs one of these for all
 * instances). Each instance's layer is its own ext4 file system: one fanotify group per
 * instance holds a FAN_MARK_FILESYSTEM mark on it, reporting the directory and name of
 * every entry created, deleted, moved, written or changed in its attributes. Root only.
 *
 * The events are read as they come (epoll over every group) into a set of touched
 * paths per instance, relative to the overlay's upper directory; directories are found
 * from their file handles with open_by_handle_at on the layer's root. Events outside
 * the upper directory (the overlay's work directory) are dropped. When asked, the
 * helper lists each touched path as it is now, record for record as layer-walk.c lists
 * a whole layer (it includes that file), walking down from the upper directory one
 * component at a time with O_NOFOLLOW, so a guest-made link is never followed.
 *
 * Requests on stdin, one per line, answered in order on stdout:
 *   add ID LAYER UPPER    start watching (the paths hex-encoded); answered with a
 *                         listing of all of UPPER
 *   sync ID               what was touched since the last sync (or add)
 *   scan ID HEX...        lists these paths (hex-encoded bytes) as they are now
 *   remove ID             stop watching; the layer's descriptors are closed
 * Answers are NUL-terminated records, ending with "E" (done) or "F message" (failed):
 *   R '\t' PATH          forget PATH and everything below it ("" is the whole layer)
 *   <walker record>      PATH as it is now (see layer-walk.c); a directory listed after
 *                        its R comes with everything below it
 *   I INO                a file's attributes changed where no name was reported (its
 *                        link count): every path of that inode is touched
 *   O WHY                events were lost (the kernel's queue overflowed, or more paths
 *                        than max_touched were touched, or one could not be resolved):
 *                        the answer is a listing of the whole layer instead
 * The helper exits when its stdin closes or its parent dies.
 */
#define _GNU_SOURCE
#define LAYER_WALK_LIBRARY
#include "layer-walk.c"

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/fanotify.h>
#include <sys/prctl.h>
#include <signal.h>

/* Distinct paths (and inodes) one instance may touch between two syncs before the
 * helper stops counting them and answers the next sync with a whole listing: the
 * first argument (the service's ROOMKIT_CHANGE_TRACKING_MAX_PATHS). */
static size_t max_touched = 65536;

/* FAN_CLOSE_WRITE too: a file written through a shared mapping reports no FAN_MODIFY,
 * but its descriptor's close does. */
#define WATCH_MASK (FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE | FAN_ONDIR)

struct touched {
  char *path; /* relative to upper, NUL-terminated (guest names contain no NUL) */
  size_t len;
  int subtree; /* list what is below it too (it was created, moved or deleted) */
};

struct deferred {
  struct file_handle *handle; /* a copy */
  char *name;                 /* the entry in that directory, or NULL: the handle is the file (is_inode) */
  int dirent;
  int is_inode;
};

/* At most this many events wait for a second try per instance; beyond, events are lost. */
#define MAX_DEFERRED 4096

struct instance {
  char *id;
  int fan;       /* the fanotify group */
  int layer_fd;  /* the layer's root: where file handles are opened */
  int upper_fd;  /* the overlay's upper directory */
  char *upper;   /* the upper directory's path as /proc/self/fd shows it */
  size_t upper_len;
  const char *overflowed; /* why events were lost, or NULL */
  /* touched paths in the order first seen, and an open-addressing index over them */
  struct touched *list;
  size_t count, cap;
  size_t *slots; /* index + 1 into list, 0 for free */
  size_t nslots;
  unsigned long long *inodes;
  size_t ninodes, inodes_cap;
  /* events whose handle could not be opened yet (the kernel can fail to reconnect a
   * directory that is being removed or moved meanwhile, with ENOMEM): tried again at
   * the next sync, when what happened to it is settled */
  struct deferred *deferred;
  size_t ndeferred, deferred_cap;
  struct instance *next;
};

static struct instance *instances;
static int epfd;

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n);
  if (q == NULL) {
    fprintf(stderr, "change-watch: out of memory\n");
    exit(1);
  }
  return q;
}

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

static struct touched *find_touched(struct instance *in, const char *p, size_t n) {
  if (in->nslots == 0) return NULL;
  for (size_t i = hash_bytes(p, n) & (in->nslots - 1);; i = (i + 1) & (in->nslots - 1)) {
    size_t s = in->slots[i];
    if (s == 0) return NULL;
    struct touched *t = &in->list[s - 1];
    if (t->len == n && memcmp(t->path, p, n) == 0) return t;
  }
}

static void clear_touched(struct instance *in) {
  for (size_t i = 0; i < in->ndeferred; i++) {
    free(in->deferred[i].handle);
    free(in->deferred[i].name);
  }
  free(in->deferred);
  in->deferred = NULL;
  in->ndeferred = in->deferred_cap = 0;
  for (size_t i = 0; i < in->count; i++) free(in->list[i].path);
  free(in->list);
  free(in->slots);
  free(in->inodes);
  in->list = NULL;
  in->slots = NULL;
  in->inodes = NULL;
  in->count = in->cap = in->nslots = in->ninodes = in->inodes_cap = 0;
}

static void overflow(struct instance *in, const char *why) {
  clear_touched(in);
  if (in->overflowed == NULL) in->overflowed = why;
}

static void add_touched(struct instance *in, const char *p, size_t n, int subtree) {
  if (in->overflowed) return;
  struct touched *t = find_touched(in, p, n);
  if (t != NULL) {
    t->subtree |= subtree;
    return;
  }
  if (in->count >= max_touched) return overflow(in, "more paths touched than kept");
  if (in->count + 1 > in->cap) {
    in->cap = in->cap ? in->cap * 2 : 64;
    in->list = xrealloc(in->list, in->cap * sizeof *in->list);
  }
  if ((in->count + 1) * 2 > in->nslots) { /* grow the index, keeping it at most half full */
    size_t nslots = in->nslots ? in->nslots * 2 : 128;
    free(in->slots);
    in->slots = calloc(nslots, sizeof *in->slots);
    if (in->slots == NULL) return overflow(in, "out of memory");
    in->nslots = nslots;
    for (size_t k = 0; k < in->count; k++) {
      size_t i = hash_bytes(in->list[k].path, in->list[k].len) & (nslots - 1);
      while (in->slots[i] != 0) i = (i + 1) & (nslots - 1);
      in->slots[i] = k + 1;
    }
  }
  char *copy = xrealloc(NULL, n + 1);
  memcpy(copy, p, n);
  copy[n] = '\0';
  in->list[in->count] = (struct touched){copy, n, subtree};
  size_t i = hash_bytes(p, n) & (in->nslots - 1);
  while (in->slots[i] != 0) i = (i + 1) & (in->nslots - 1);
  in->slots[i] = ++in->count;
}

static void add_inode(struct instance *in, unsigned long long ino) {
  if (in->overflowed) return;
  for (size_t i = in->ninodes; i > 0 && i + 8 > in->ninodes; i--)
    if (in->inodes[i - 1] == ino) return; /* the same file again, as a burst of writes does */
  if (in->ninodes >= max_touched) return overflow(in, "more inodes touched than kept");
  if (in->ninodes + 1 > in->inodes_cap) {
    in->inodes_cap = in->inodes_cap ? in->inodes_cap * 2 : 64;
    in->inodes = xrealloc(in->inodes, in->inodes_cap * sizeof *in->inodes);
  }
  in->inodes[in->ninodes++] = ino;
}

/* The directory a file handle names, as a path relative to upper in out[0..*len);
 * 1 when it is upper or below it, 0 when elsewhere or gone, -1 when it cannot be told,
 * -2 when the handle could not be opened now (worth another try). */
static char link_buf[PATH_MAX + 1];
static int resolve_dir(struct instance *in, struct file_handle *fh, size_t *start, size_t *len) {
  int fd = open_by_handle_at(in->layer_fd, fh, O_PATH | O_DIRECTORY);
  if (fd < 0) return errno == ESTALE || errno == ENOENT || errno == ENOTDIR ? 0 : -2;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_nlink == 0) {
    close(fd);
    return 0; /* removed: its removal was reported in its parent */
  }
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(proc, link_buf, sizeof link_buf);
  close(fd);
  if (n < 0 || (size_t)n >= sizeof link_buf) return -1; /* too long for the kernel to name */
  if ((size_t)n < in->upper_len || memcmp(link_buf, in->upper, in->upper_len) != 0) return 0;
  if ((size_t)n == in->upper_len) {
    *start = (size_t)n;
    *len = 0;
    return 1;
  }
  if (link_buf[in->upper_len] != '/') return 0; /* a sibling such as "upper2" */
  *start = in->upper_len + 1;
  *len = (size_t)n - *start;
  return 1;
}

/*
 * The inode number of a file whose link count changed, or 0 when it has no name left
 * (an unlink of its last one, reported in its directory too): what is left of it then
 * is in nobody's listing. -1 when it cannot be told, -2 when it could not be opened now.
 */
static int handle_inode(struct instance *in, struct file_handle *fh, unsigned long long *ino) {
  int fd = open_by_handle_at(in->layer_fd, fh, O_PATH);
  if (fd < 0) return errno == ESTALE || errno == ENOENT ? 0 : -2;
  struct stat st;
  int ok = fstat(fd, &st);
  close(fd);
  if (ok != 0) return -1;
  if (st.st_nlink == 0) return 0;
  *ino = (unsigned long long)st.st_ino;
  return 1;
}

static void defer(struct instance *in, struct file_handle *fh, const char *name, int dirent, int is_inode) {
  if (in->ndeferred >= MAX_DEFERRED) return overflow(in, "too many changes could not be found by their handles");
  if (in->ndeferred + 1 > in->deferred_cap) {
    in->deferred_cap = in->deferred_cap ? in->deferred_cap * 2 : 16;
    in->deferred = xrealloc(in->deferred, in->deferred_cap * sizeof *in->deferred);
  }
  size_t hlen = sizeof(struct file_handle) + fh->handle_bytes;
  struct file_handle *copy = xrealloc(NULL, hlen);
  memcpy(copy, fh, hlen);
  in->deferred[in->ndeferred++] = (struct deferred){copy, name ? strdup(name) : NULL, dirent, is_inode};
}

static char *joined;
static size_t joined_cap;

/* Adds what an event in the directory at link_buf[start..start+len) touched. */
static void note(struct instance *in, size_t start, size_t len, const char *name, int dirent) {
  if (name == NULL || (name[0] == '.' && name[1] == '\0')) {
    /* An event on the directory itself (its attributes); upper itself is not listed. */
    if (len > 0) add_touched(in, link_buf + start, len, 0);
    return;
  }
  size_t name_len = strlen(name);
  size_t total = len + (len ? 1 : 0) + name_len;
  if (total + 1 > joined_cap) {
    joined_cap = total + 1 > 4096 ? (total + 1) * 2 : 4096;
    joined = xrealloc(joined, joined_cap);
  }
  memcpy(joined, link_buf + start, len);
  if (len) joined[len] = '/';
  memcpy(joined + len + (len ? 1 : 0), name, name_len);
  add_touched(in, joined, total, dirent);
}

/* The second try of deferred events, at a sync: what still cannot be told is lost. */
static void retry_deferred(struct instance *in) {
  size_t n = in->ndeferred;
  struct deferred *list = in->deferred;
  in->deferred = NULL;
  in->ndeferred = in->deferred_cap = 0;
  for (size_t i = 0; i < n; i++) {
    struct deferred *d = &list[i];
    if (!in->overflowed) {
      if (d->is_inode) {
        unsigned long long ino = 0;
        int known = handle_inode(in, d->handle, &ino);
        if (known > 0) add_inode(in, ino);
        else if (known < 0) overflow(in, "a changed file could not be found by its handle");
      } else {
        size_t start = 0, len = 0;
        int found = resolve_dir(in, d->handle, &start, &len);
        if (found < 0) overflow(in, "a directory's path could not be read");
        else if (found > 0) note(in, start, len, d->name, d->dirent);
      }
    }
    free(d->handle);
    free(d->name);
  }
  free(list);
}

static char event_buf[256 * 1024] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
/* Reads every event queued for the instance into its touched set. */
static void drain(struct instance *in) {
  for (;;) {
    ssize_t n = read(in->fan, event_buf, sizeof event_buf);
    if (n <= 0) return; /* EAGAIN: nothing more for now */
    /* One directory's path per batch is kept: writes into one directory come in runs. */
    unsigned char last_handle[MAX_HANDLE_SZ + sizeof(struct file_handle)];
    size_t last_handle_len = 0, last_start = 0, last_len = 0;
    int last_found = 0;
    struct fanotify_event_metadata *md = (struct fanotify_event_metadata *)event_buf;
    for (; FAN_EVENT_OK(md, n); md = FAN_EVENT_NEXT(md, n)) {
      if (md->mask & FAN_Q_OVERFLOW) {
        overflow(in, "the kernel's event queue overflowed");
        continue;
      }
      if (md->fd >= 0) close(md->fd);
      struct file_handle *dir = NULL, *object = NULL;
      const char *name = NULL;
      for (size_t off = md->metadata_len; off + sizeof(struct fanotify_event_info_header) <= md->event_len;) {
        struct fanotify_event_info_header *hdr = (struct fanotify_event_info_header *)((char *)md + off);
        if (hdr->len == 0) break;
        struct fanotify_event_info_fid *fid = (struct fanotify_event_info_fid *)hdr;
        struct file_handle *fh = (struct file_handle *)fid->handle;
        if (hdr->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME) {
          dir = fh;
          name = (const char *)fh->f_handle + fh->handle_bytes;
        } else if (hdr->info_type == FAN_EVENT_INFO_TYPE_DFID) {
          dir = fh;
        } else if (hdr->info_type == FAN_EVENT_INFO_TYPE_FID) {
          object = fh;
        }
        off += hdr->len;
      }
      if (in->overflowed) continue;
      if (dir == NULL) {
        /* A file's link count changed (a link made or removed elsewhere): no name. */
        unsigned long long ino = 0;
        int known = object != NULL && !(md->mask & FAN_ONDIR) ? handle_inode(in, object, &ino) : -1;
        if (known > 0) add_inode(in, ino);
        else if (known == -2) defer(in, object, NULL, 0, 1);
        else if (known < 0) overflow(in, "a changed file could not be found by its handle");
        continue;
      }
      size_t hlen = sizeof(struct file_handle) + dir->handle_bytes;
      int found;
      size_t start = 0, len = 0;
      if (last_handle_len == hlen && memcmp(last_handle, dir, hlen) == 0) {
        found = last_found;
        start = last_start;
        len = last_len;
      } else {
        found = resolve_dir(in, dir, &start, &len);
        if (hlen <= sizeof last_handle) {
          memcpy(last_handle, dir, hlen);
          last_handle_len = hlen;
          last_found = found;
          last_start = start;
          last_len = len;
        }
      }
      int dirent = (md->mask & (FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO)) != 0;
      if (found == -2) {
        defer(in, dir, name, dirent, 0);
        last_handle_len = 0; /* tried again for each event, not from the cache */
        continue;
      }
      if (found < 0) {
        overflow(in, "a directory's path could not be read");
        continue;
      }
      if (found == 0) continue;
      note(in, start, len, name, dirent);
    }
  }
}

static struct instance *find_instance(const char *id) {
  for (struct instance *in = instances; in != NULL; in = in->next)
    if (strcmp(in->id, id) == 0) return in;
  return NULL;
}

static void fail(const char *fmt, const char *what, int err) {
  printf("F ");
  printf(fmt, what);
  if (err) printf(": %s", strerror(err));
  putchar('\0');
}

static void reset(const char *rel, size_t len) {
  fputs("R\t", stdout);
  fwrite(rel, 1, len, stdout);
  putchar('\0');
}

/*
 * Lists rel (relative to upper) as it is now: with subtree, R first and everything
 * below a directory; without, the entry alone (R first unless it is a directory, so
 * nothing stale stays below a name that stopped being one). Returns -1 on an error.
 */
static int list_path(struct instance *in, const char *rel, size_t len, int subtree) {
  if (len == 0) {
    reset("", 0);
    int fd = openat(in->upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    path[0] = '\0';
    return walk(fd, 0, 0);
  }
  /* Below a directory too deep for the walker (listed as x): not listed, as by a walk. */
  size_t slashes = 0;
  for (size_t i = 0; i < len; i++) slashes += rel[i] == '/';
  if (slashes > MAX_DEPTH) return 0;
  /* Down from upper one component at a time, never through a link. */
  int dirfd = dup(in->upper_fd);
  if (dirfd < 0) return -1;
  size_t at = 0;
  int depth = 0;
  for (;;) {
    const char *slash = memchr(rel + at, '/', len - at);
    if (slash == NULL) break;
    size_t n = (size_t)(slash - (rel + at));
    char *component = strndup(rel + at, n);
    int next = component ? openat(dirfd, component, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    free(component);
    close(dirfd);
    if (next < 0) { /* a parent is gone, or is no longer a directory: so is rel */
      reset(rel, len);
      return 0;
    }
    dirfd = next;
    at += n + 1;
    depth++;
  }
  const char *name = rel + at;
  if (reserve(len) != 0) {
    close(dirfd);
    return -1;
  }
  memcpy(path, rel, len);
  path[len] = '\0';
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    close(dirfd);
    reset(rel, len);
    return 0;
  }
  char type = type_of(&st);
  if (type != 'd') {
    close(dirfd);
    reset(rel, len);
    emit(&st, type, 0, len);
    return 0;
  }
  if (subtree) reset(rel, len);
  if (depth >= MAX_DEPTH) {
    close(dirfd);
    emit(&st, 'x', 0, len);
    return 0;
  }
  int child = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  close(dirfd);
  if (child < 0) {
    if (!subtree) reset(rel, len);
    return 0; /* swapped while we looked: its own events follow */
  }
  struct stat opened;
  if (fstat(child, &opened) != 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
    close(child);
    if (!subtree) reset(rel, len);
    return 0;
  }
  emit(&opened, 'd', opaque(child), len);
  if (!subtree) {
    close(child);
    return 0;
  }
  return walk(child, len, depth + 1);
}

/* Whether a proper ancestor of t is touched with its subtree (which lists t too). */
static int covered(struct instance *in, const struct touched *t) {
  for (size_t i = t->len; i > 0; i--) {
    if (t->path[i - 1] != '/') continue;
    struct touched *up = find_touched(in, t->path, i - 1);
    if (up != NULL && up->subtree) return 1;
  }
  return 0;
}

static void answer_sync(struct instance *in) {
  drain(in);
  retry_deferred(in);
  int status = 0;
  if (in->overflowed) {
    printf("O %s%c", in->overflowed, '\0');
    in->overflowed = NULL;
    clear_touched(in);
    status = list_path(in, "", 0, 1);
  } else {
    for (size_t i = 0; i < in->count && status == 0; i++) {
      struct touched *t = &in->list[i];
      if (covered(in, t)) continue;
      status = list_path(in, t->path, t->len, t->subtree);
    }
    for (size_t i = 0; i < in->ninodes; i++) printf("I %llu%c", in->inodes[i], '\0');
    clear_touched(in);
  }
  if (status != 0) {
    in->overflowed = "a listing failed"; /* what was sent is partial: the next answer lists everything */
    fail("listing the layer of %s failed", in->id, 0);
  } else {
    fputs("E", stdout);
    putchar('\0');
  }
}

static void remove_instance(struct instance *in) {
  struct instance **p = &instances;
  while (*p != in) p = &(*p)->next;
  *p = in->next;
  epoll_ctl(epfd, EPOLL_CTL_DEL, in->fan, NULL);
  close(in->fan);
  close(in->layer_fd);
  close(in->upper_fd);
  clear_touched(in);
  free(in->id);
  free(in->upper);
  free(in);
}

static void add_instance(const char *id, const char *layer, const char *upper) {
  struct instance *old = find_instance(id);
  if (old != NULL) remove_instance(old);
  struct instance *in = calloc(1, sizeof *in);
  if (in == NULL) return fail("out of memory adding %s", id, 0);
  in->fan = in->layer_fd = in->upper_fd = -1;
  in->id = strdup(id);
  in->fan = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME | FAN_REPORT_FID, O_RDONLY | O_CLOEXEC);
  if (in->fan < 0) goto failed;
  in->layer_fd = open(layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (in->layer_fd < 0) goto failed;
  in->upper_fd = openat(in->layer_fd, upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (in->upper_fd < 0) goto failed;
  /* Marked before the first listing, so nothing changed after it goes unseen. */
  if (fanotify_mark(in->fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, WATCH_MASK, in->layer_fd, NULL) != 0) goto failed;
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", in->upper_fd);
  ssize_t n = readlink(proc, link_buf, sizeof link_buf);
  if (n < 0 || (size_t)n >= sizeof link_buf) goto failed;
  in->upper = strndup(link_buf, (size_t)n);
  in->upper_len = (size_t)n;
  struct epoll_event ev = {.events = EPOLLIN};
  ev.data.ptr = in;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, in->fan, &ev) != 0) goto failed;
  in->next = instances;
  instances = in;
  if (list_path(in, "", 0, 1) != 0) {
    in->overflowed = "a listing failed";
    return fail("listing the layer of %s failed", id, 0);
  }
  fputs("E", stdout);
  putchar('\0');
  return;
failed: {
  int err = errno;
  if (in->fan >= 0) close(in->fan);
  if (in->layer_fd >= 0) close(in->layer_fd);
  if (in->upper_fd >= 0) close(in->upper_fd);
  free(in->id);
  free(in->upper);
  free(in);
  fail("cannot watch the layer of %s", id, err);
}
}

static int unhex(const char *s, size_t n, char *out) {
  for (size_t i = 0; i < n; i += 2) {
    unsigned v;
    if (sscanf(s + i, "%2x", &v) != 1) return -1;
    out[i / 2] = (char)v;
  }
  return 0;
}

static void answer_scan(struct instance *in, char *args) {
  drain(in); /* events queued now are answered by the next sync, which lists them again */
  int status = 0;
  for (char *save = NULL, *tok = strtok_r(args, " ", &save); tok != NULL && status == 0; tok = strtok_r(NULL, " ", &save)) {
    size_t n = strlen(tok);
    if (n % 2 != 0) continue;
    char *rel = malloc(n / 2 + 1);
    if (rel == NULL || unhex(tok, n, rel) != 0) {
      free(rel);
      continue;
    }
    status = list_path(in, rel, n / 2, 0);
    free(rel);
  }
  if (status != 0) {
    in->overflowed = "a listing failed";
    fail("listing the layer of %s failed", in->id, 0);
  } else {
    fputs("E", stdout);
    putchar('\0');
  }
}

static void handle_line(char *line) {
  char *save = NULL;
  char *op = strtok_r(line, " ", &save);
  char *id = op ? strtok_r(NULL, " ", &save) : NULL;
  if (op == NULL || id == NULL) {
    fail("bad request %s", op ? op : "", 0);
  } else if (strcmp(op, "add") == 0) {
    char *layer_hex = strtok_r(NULL, " ", &save);
    char *upper_hex = layer_hex ? strtok_r(NULL, " ", &save) : NULL;
    size_t ln = layer_hex ? strlen(layer_hex) : 0, un = upper_hex ? strlen(upper_hex) : 0;
    char *layer = malloc(ln / 2 + 1), *upper = malloc(un / 2 + 1);
    if (upper_hex == NULL || layer == NULL || upper == NULL || ln % 2 || un % 2 || unhex(layer_hex, ln, layer) || unhex(upper_hex, un, upper)) {
      fail("bad request for %s", id, 0);
    } else {
      layer[ln / 2] = upper[un / 2] = '\0';
      add_instance(id, layer, upper);
    }
    free(layer);
    free(upper);
  } else {
    struct instance *in = find_instance(id);
    if (in == NULL) fail("%s is not watched", id, 0);
    else if (strcmp(op, "sync") == 0) answer_sync(in);
    else if (strcmp(op, "scan") == 0) answer_scan(in, save ? save : (char *)"");
    else if (strcmp(op, "remove") == 0) {
      remove_instance(in);
      fputs("E", stdout);
      putchar('\0');
    } else fail("unknown request %s", op, 0);
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc > 1 && atol(argv[1]) > 0) max_touched = (size_t)atol(argv[1]);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1; /* the service is already gone */
  raise_file_limit();
  static char out[1 << 20];
  setvbuf(stdout, out, _IOFBF, sizeof out);
  if (reserve(0) != 0) return 1;
  epfd = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  ev.data.ptr = NULL;
  if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, 0, &ev) != 0) return 1;
  char *line = NULL;
  size_t used = 0, cap = 0;
  for (;;) {
    struct epoll_event events[64];
    int n = epoll_wait(epfd, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    /* Events first: a request below may remove an instance that is in this batch. */
    int request = 0;
    for (int i = 0; i < n; i++) {
      if (events[i].data.ptr != NULL) drain(events[i].data.ptr);
      else request = 1;
    }
    if (request) {
      if (used + 65536 > cap) {
        cap = cap ? cap * 2 : 131072;
        line = xrealloc(line, cap);
      }
      ssize_t got = read(0, line + used, cap - used);
      if (got <= 0) return 0; /* the service closed its end */
      used += (size_t)got;
      char *nl;
      while ((nl = memchr(line, '\n', used)) != NULL) {
        *nl = '\0';
        size_t taken = (size_t)(nl - line) + 1;
        handle_line(line);
        memmove(line, line + taken, used - taken);
        used -= taken;
      }
    }
  }
}
