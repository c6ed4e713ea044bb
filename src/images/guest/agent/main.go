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
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agent init|serve|rootd")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "init":
		runInit()
	case "serve":
		runServe()
	case "rootd":
		runRootdLauncher(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "agent: unknown role %q (init or serve)\n", os.Args[1])
		os.Exit(2)
	}
}
