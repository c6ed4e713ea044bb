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
 * Built statically, so it runs in any image.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
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

static int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int main(int argc, char **argv) {
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
