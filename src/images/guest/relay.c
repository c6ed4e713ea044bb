/*
 * relay [--stdout-only] PROGRAM [ARG...]: runs PROGRAM with its stdout and stderr on one
 * pipe inside the instance (only its stdout with --stdout-only; its stderr is then the
 * relay's own) and copies that pipe to its own stdout, then exits with PROGRAM's status
 * (128+n when a signal n ended it).
 *
 * Why: a command's stdout is a descriptor the sandbox got from the host, and this gVisor
 * release answers a write to it with EAGAIN whenever the host pipe is full, even to a
 * program that never asked for non-blocking output: `tr` or `cat` then fail and output is
 * lost when roomkit reads more slowly than the command writes. Pipes inside the sandbox
 * block as they should, so the command writes into one of those, and only this relay
 * meets the host pipe, where it waits for room and writes again.
 *
 * Processes the command leaves in the background may keep the pipe open after PROGRAM
 * exits. The relay then answers with PROGRAM's status at once and a child of it goes on
 * copying (or, once roomkit stops reading, discarding) until the pipe closes, so those
 * processes never die of a broken pipe.
 *
 * relay --heads N: reads NUL-separated file paths on stdin and writes, for each in turn,
 * the count of its first bytes (at most N; 0 for anything but a readable regular file),
 * a newline, and those bytes. roomkit sniffs the types of changed files from them: one
 * process for all the files, where a shell loop of `head` costs a fork per file (about
 * 100 ms each under gVisor). Paths come on stdin so that any bytes can name a file.
 *
 * Built statically, so it runs in any image.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char buf[65536];
/* Whether stdout still takes output; after a write error the rest is read and dropped. */
static int out_open = 1;

static void write_out(const char *data, size_t n) {
  int waits = 0;
  while (n > 0 && out_open) {
    ssize_t w = write(STDOUT_FILENO, data, n);
    if (w > 0) {
      data += w;
      n -= (size_t)w;
      waits = 0;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && errno == EAGAIN) {
      struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
      /* Paced if readiness is reported while the write still cannot proceed. */
      if (poll(&p, 1, 100) > 0 && ++waits > 1) {
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};
        nanosleep(&pause, NULL);
      }
    } else {
      out_open = 0;
    }
  }
}

/* Copies from fd until it ends; with `until_empty`, also stops when nothing is there now. */
static int copy(int fd, int until_empty) {
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r > 0) {
      write_out(buf, (size_t)r);
      continue;
    }
    if (r == 0) return 1; /* every writer is gone */
    if (errno == EINTR) continue;
    if (errno == EAGAIN && until_empty) return 0;
    return 1;
  }
}

/* Signals meant for the command (a kill request sends them to all its processes) must not
 * end the relay before the command has answered them; a handler, unlike ignoring them,
 * is not inherited by the program. */
static void for_the_command(int sig) { (void)sig; }

#define MAX_HEADS_INPUT (1 << 20)
#define MAX_HEAD 4096

static int heads(long n) {
  static char paths[MAX_HEADS_INPUT + 1];
  static char head[MAX_HEAD];
  if (n < 0 || n > MAX_HEAD) n = MAX_HEAD;
  size_t len = 0;
  for (;;) {
    ssize_t r = read(STDIN_FILENO, paths + len, MAX_HEADS_INPUT - len);
    if (r > 0) len += (size_t)r;
    else if (r < 0 && errno == EINTR) continue;
    else break;
    if (len == MAX_HEADS_INPUT) break;
  }
  paths[len] = 0;
  for (size_t at = 0; at < len; at += strlen(paths + at) + 1) {
    /* Non-blocking, so a FIFO put in a file's place cannot hold the answer. */
    int fd = open(paths + at, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    ssize_t got = 0;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      while (got < n) {
        ssize_t r = read(fd, head + got, (size_t)(n - got));
        if (r > 0) got += r;
        else if (r < 0 && errno == EINTR) continue;
        else break;
      }
    }
    if (fd >= 0) close(fd);
    char count[32];
    int c = snprintf(count, sizeof count, "%zd\n", got);
    write_out(count, (size_t)c);
    write_out(head, (size_t)got);
  }
  return 0;
}

static int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--heads") == 0) return heads(atol(argv[2]));
  int both = 1;
  if (argc > 1 && strcmp(argv[1], "--stdout-only") == 0) {
    both = 0;
    argv++;
    argc--;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: relay [--stdout-only] PROGRAM [ARG...]\n");
    return 127;
  }
  signal(SIGPIPE, SIG_IGN);
  struct sigaction pass = {.sa_handler = for_the_command, .sa_flags = SA_RESTART};
  sigemptyset(&pass.sa_mask);
  sigaction(SIGTERM, &pass, NULL);
  sigaction(SIGINT, &pass, NULL);
  sigaction(SIGHUP, &pass, NULL);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    perror("relay: pipe");
    return 127;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("relay: fork");
    return 127;
  }
  if (child == 0) {
    signal(SIGPIPE, SIG_DFL);
    if (dup2(p[1], STDOUT_FILENO) < 0 || (both && dup2(p[1], STDERR_FILENO) < 0)) _exit(127);
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    _exit(127);
  }
  close(p[1]);

  /* Copy while the program runs, and look at it after every read or quiet spell (a
   * background process may keep the pipe busy after the program has ended). */
  int status = 0;
  for (;;) {
    struct pollfd in = {.fd = p[0], .events = POLLIN};
    if (poll(&in, 1, 50) > 0) {
      ssize_t r = read(p[0], buf, sizeof buf);
      if (r > 0) write_out(buf, (size_t)r);
      if (r == 0) break; /* every writer is gone: the program too, or soon */
    }
    pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) {
      /* What the program wrote before it ended is in the pipe: pass it on. */
      fcntl(p[0], F_SETFL, O_NONBLOCK);
      if (!copy(p[0], 1)) {
        /* Background processes still hold the pipe: a child copies on, the answer goes now. */
        if (fork() == 0) {
          fcntl(p[0], F_SETFL, 0);
          copy(p[0], 0);
          _exit(0);
        }
      }
      return exit_code(status);
    }
  }
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return exit_code(status);
}
