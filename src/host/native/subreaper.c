/*
 * subreaper: runs a program whose children outlive it, and reaps those children the
 * moment they end. `runsc create` and `runsc restore` leave the sandbox and its gofer
 * running as daemons; without this they are reparented to the host's init, which on
 * some hosts reaps only every second or so, and `runsc delete` waits until the dead
 * sandbox's pid is gone (1.0-1.8 s measured; 20-30 ms when reaped at once). A sandbox's
 * record must be deleted before a sandbox of the same id starts again (a resume).
 *
 *   subreaper PROGRAM ARGS...
 *
 * The first process (the one the caller started) forks a keeper, which marks itself a
 * child subreaper, runs PROGRAM as its child and tells the first process how it ended;
 * the first process then exits the same way, so the caller sees PROGRAM's exit as its
 * own. The keeper lets go of the caller's stdio and stays, reaping whatever PROGRAM left
 * behind as each ends, until nothing is left; then it exits too. A caller that kills the
 * first process (a deadline) kills PROGRAM with it while PROGRAM runs (parent-death
 * signals), as if it had killed PROGRAM itself; what PROGRAM left behind once it ended
 * is not touched.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    len -= (size_t)n;
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: subreaper PROGRAM ARGS...\n");
    return 2;
  }
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    perror("subreaper: pipe");
    return 126;
  }
  pid_t first = getpid();
  pid_t keeper = fork();
  if (keeper < 0) {
    perror("subreaper: fork");
    return 126;
  }
  if (keeper == 0) {
    close(report[0]);
    /* Dies with the first process until PROGRAM has ended (a caller's deadline). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != first) _exit(126);
    /* Out of the caller's process group: a terminal's signals to it do not reach what stays. */
    setsid();
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
      perror("subreaper: PR_SET_CHILD_SUBREAPER");
      _exit(126);
    }
    pid_t self = getpid();
    pid_t program = fork();
    if (program < 0) {
      perror("subreaper: fork");
      _exit(126);
    }
    if (program == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != self) _exit(126);
      execvp(argv[1], argv + 1);
      fprintf(stderr, "subreaper: cannot run %s: %s\n", argv[1], strerror(errno));
      _exit(127);
    }
    /* The caller's stdio belongs to PROGRAM: the keeper holds none of it open. */
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      if (null > 2) close(null);
    }
    int status = 0;
    while (waitpid(program, &status, 0) < 0) {
      if (errno != EINTR) {
        status = 126 << 8;
        break;
      }
    }
    /* From here the keeper outlives the first process: it must, to reap. */
    prctl(PR_SET_PDEATHSIG, 0);
    write_all(report[1], &status, sizeof status);
    close(report[1]);
    for (;;) {
      if (wait(NULL) < 0 && errno != EINTR) break;
    }
    _exit(0);
  }
  close(report[1]);
  int status = 0;
  ssize_t got;
  do {
    got = read(report[0], &status, sizeof status);
  } while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof status) {
    fprintf(stderr, "subreaper: the keeper ended before %s did\n", argv[1]);
    return 126;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    /* Ends the same way, so that the caller sees the signal. */
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
  }
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
