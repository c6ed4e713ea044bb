// roomkit's agent inside an instance. One static program, two roles:
//
//	agent init   the instance's first process (PID 1): starts `agent serve`, starts it
//	             again whenever it ends, and reaps every orphaned process of the instance.
//	             Guest root cannot kill it: PID 1 ignores signals it does not handle.
//	agent serve  answers the host on a TCP port of the instance's address: runs commands
//	             (as the VM user or root, with stdin, output split into stdout and stderr,
//	             a time limit, a terminal when asked) and reads, writes, lists and deletes
//	             files with the VM user's rights.
//
// The host writes the instance's key into a file only guest root can read (keyFile);
// every connection must present it. Standard library only.
package main

import (
	"fmt"
	"os"
	"runtime"
)

// The main goroutine keeps the process's first thread to itself, so that no other
// goroutine ever runs there. Work done with the VM user's identity (asUser) runs on a
// thread locked for it, which Go ends when the work returns: every thread but the
// first, which Go never ends (it would park it for good, with the identity it took).
// The first thread leads the thread group, and its identity is the process's as the
// kernel shows it: /proc/PID's owner and status, and who may signal or trace the
// process. Parked as the VM user, it would give that user the agent's /proc files and
// take the agent's capabilities from what guest root sees.
func init() {
	runtime.LockOSThread()
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agent init|serve")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "init":
		runInit()
	case "serve":
		runServe()
	default:
		fmt.Fprintf(os.Stderr, "agent: unknown role %q (init or serve)\n", os.Args[1])
		os.Exit(2)
	}
}
