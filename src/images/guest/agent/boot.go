// What the init sets up while the server it has just started comes up, holding
// CAP_SYS_ADMIN meanwhile (the instance's first process alone is given it; the server
// drops it as it starts, init.go): a pids cgroup of gVisor's own for the root service
// (rootd, through which `sudo` works), the cgroup's mount covered so that no one can
// raise its limit or leave it, the capability dropped for good, and then the service
// started in that group. Before the agent did this, the host made three `runsc exec`
// round trips for it at every boot.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

const (
	// Where gVisor's pids controller is mounted; covered by a read-only tmpfs once set up.
	pidsMount     = "/run/.roomkit-pids"
	rootService   = "/usr/local/lib/roomkit/rootd"
	capSysAdmin   = 21
	prCapbsetDrop = 24
	capVersion3   = 0x20080522
)

// bootSetup runs in the init beside the server's start, before anything else of the
// guest. An error leaves the instance without a working sudo; the host refuses such an
// instance (hello's boot_error). Only a failure to drop CAP_SYS_ADMIN is fatal here.
func bootSetup() error {
	defer func() {
		if err := dropSysAdmin(); err != nil {
			fmt.Fprintln(os.Stderr, "agent init: cannot drop CAP_SYS_ADMIN:", err)
			os.Exit(1)
		}
	}()
	if err := os.MkdirAll(pidsMount, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("roomkit", pidsMount, "cgroup", 0, "pids"); err != nil {
		return fmt.Errorf("cannot mount the pids controller: %w", err)
	}
	group := pidsMount + "/sudo"
	if err := os.Mkdir(group, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	// rootServiceTasks (protocol_gen.go) bounds every user the service switches to
	// together (RLIMIT_NPROC binds each uid alone): a fork past it fails with EAGAIN long
	// before the sandbox reaches its host task limit.
	if err := os.WriteFile(group+"/pids.max", []byte(strconv.Itoa(rootServiceTasks)), 0); err != nil {
		return fmt.Errorf("cannot limit the root service: %w", err)
	}
	// The two groups' process lists, opened before the cover hides them: the init moves
	// itself into the service's group for the fork that starts it, and back.
	join, err := os.OpenFile(group+"/cgroup.procs", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cannot open the root service's pids group: %w", err)
	}
	defer join.Close()
	leave, err := os.OpenFile(pidsMount+"/cgroup.procs", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cannot open the pids hierarchy's root group: %w", err)
	}
	defer leave.Close()
	// Unmounting would drop the hierarchy and its limit; covering it keeps both.
	if err := syscall.Mount("roomkit", pidsMount, "tmpfs", syscall.MS_RDONLY, "mode=000,size=4k"); err != nil {
		return fmt.Errorf("cannot hide the pids controller: %w", err)
	}
	// Dropped before the service starts, so that it can never hold the capability.
	if err := dropSysAdmin(); err != nil {
		fmt.Fprintln(os.Stderr, "agent init: cannot drop CAP_SYS_ADMIN:", err)
		os.Exit(1)
	}
	return startRootService(join, leave)
}

// startRootService starts rootd (python3) in its pids group from its first
// instruction: the init joins the group, forks the service, which starts in it, and
// leaves the group at once (the server, started before, was never in it). Images
// without python3 or rootd have no sudo.
func startRootService(join, leave *os.File) error {
	if _, err := os.Stat(rootService); err != nil {
		return nil
	}
	python, err := lookPath("python3", nil)
	if err != nil {
		return nil
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	self := []byte(strconv.Itoa(os.Getpid()))
	// One write on each descriptor: its first, at the start of the file.
	if _, err := join.Write(self); err != nil {
		return fmt.Errorf("cannot join the root service's pids group: %w", err)
	}
	_, err = syscall.ForkExec(python, []string{"python3", rootService}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"},
		Files: []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if _, lerr := leave.Write(self); lerr != nil {
		// The init's later children (a server started again) would count against the
		// service's limit: no use going on with a guest where that is so.
		fmt.Fprintln(os.Stderr, "agent init: cannot leave the root service's pids group:", lerr)
		os.Exit(1)
	}
	if err != nil {
		return fmt.Errorf("cannot start the root service: %w", err)
	}
	return nil
}

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct {
	effective, permitted, inheritable uint32
}

// dropSysAdmin takes CAP_SYS_ADMIN out of the bounding, permitted, effective and
// inheritable sets of every thread of this process (capabilities are per thread, and
// Go runs several), then checks that it is gone.
func dropSysAdmin() error {
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, prCapbsetDrop, capSysAdmin, 0); e != 0 {
		return fmt.Errorf("PR_CAPBSET_DROP: %w", e)
	}
	header := capHeader{version: capVersion3}
	var data [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capget: %w", e)
	}
	data[0].effective &^= 1 << capSysAdmin
	data[0].permitted &^= 1 << capSysAdmin
	data[0].inheritable &^= 1 << capSysAdmin
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(status), "\n") {
		for _, field := range []string{"CapEff:", "CapPrm:", "CapBnd:"} {
			if strings.HasPrefix(line, field) {
				var mask uint64
				if _, err := fmt.Sscanf(strings.TrimSpace(line[len(field):]), "%x", &mask); err != nil || mask&(1<<capSysAdmin) != 0 {
					return fmt.Errorf("still held: %s", line)
				}
			}
		}
	}
	return nil
}
