// The instance's PID 1: keeps `agent serve` running (the first one started beside the
// boot setup, boot.go) and reaps orphans. Its stdio is
// moved off the host's descriptors before anything else: a sandbox whose processes hold
// host descriptors cannot be restored from a checkpoint (runsc: "no host FD available"),
// so what init and the server print goes to a log file in the guest, which the host
// reads from the instance's root filesystem while it boots.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// initLog is where init and the server print, in the guest's root filesystem.
const initLog = "/var/log/roomkit-agent.log"

// What the init tells a server it starts, in its environment: that the boot setup is
// under way and its outcome comes on descriptor 3 (the first server), or what the
// setup could not do (a server started again).
const (
	bootPendingEnv = "ROOMKIT_BOOT_PENDING"
	bootErrorEnv   = "ROOMKIT_BOOT_ERROR"
)

func runInit() {
	ownStdio()
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	children := make(chan os.Signal, 64)
	signal.Notify(children, syscall.SIGCHLD)

	devnull, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent init:", err)
		os.Exit(1)
	}
	env := os.Environ()
	var servePid int
	var startedAt time.Time
	backoff := 100 * time.Millisecond
	restart := time.NewTimer(time.Hour)
	restart.Stop()
	start := func(env []string, files ...uintptr) {
		pid, err := syscall.ForkExec(self, []string{self, "serve"}, &syscall.ProcAttr{
			Dir:   "/",
			Env:   env,
			Files: append([]uintptr{devnull.Fd(), os.Stdout.Fd(), os.Stderr.Fd()}, files...),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent init: cannot start the server:", err)
			servePid = 0
			restart.Reset(time.Second)
			return
		}
		servePid = pid
		startedAt = time.Now()
	}
	// The server starts beside the boot setup rather than after it: its own start (a
	// second Go program) and the setup each take a good part of a boot. It drops
	// CAP_SYS_ADMIN before anything else, and is told the setup's outcome on a pipe
	// (descriptor 3), which its hello waits for, so that the host hears what failed.
	var outcome [2]int
	if err := syscall.Pipe2(outcome[:], syscall.O_CLOEXEC); err != nil {
		fmt.Fprintln(os.Stderr, "agent init:", err)
		os.Exit(1)
	}
	start(append(env, bootPendingEnv+"=1"), uintptr(outcome[0]))
	syscall.Close(outcome[0])
	setupErr := bootSetup()
	if setupErr != nil {
		fmt.Fprintln(os.Stderr, "agent init: boot setup:", setupErr)
		syscall.Write(outcome[1], []byte(setupErr.Error()))
		// A server started again later finds the outcome in its environment.
		env = append(env, bootErrorEnv+"="+setupErr.Error())
	}
	syscall.Close(outcome[1])
	for {
		select {
		case <-children:
		case <-restart.C:
			start(env)
			continue
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid == servePid {
				servePid = 0
				// A server that keeps failing at once is started again less often.
				if time.Since(startedAt) > 5*time.Second {
					backoff = 100 * time.Millisecond
				} else if backoff < 2*time.Second {
					backoff *= 2
				}
				fmt.Fprintf(os.Stderr, "agent init: the server ended (%v); starting it again in %v\n", status, backoff)
				restart.Reset(backoff)
			}
		}
	}
}

// ownStdio replaces the host's descriptors 0, 1 and 2 with guest files: /dev/null for
// input, the log file (or /dev/null when it cannot be made) for output.
func ownStdio() {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent init: cannot open /dev/null:", err)
		return
	}
	out := null
	if f, err := os.OpenFile(initLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
		out = f
	} else {
		fmt.Fprintln(os.Stderr, "agent init: cannot open its log, printing nothing:", err)
	}
	for fd, f := range []*os.File{null, out, out} {
		if err := syscall.Dup3(int(f.Fd()), fd, 0); err != nil {
			fmt.Fprintln(os.Stderr, "agent init: cannot move its stdio off the host:", err)
		}
	}
	if out != null {
		out.Close()
	}
	null.Close()
}
