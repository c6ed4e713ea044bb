// What the init sets up while the server it has just started comes up, holding
// CAP_SYS_ADMIN meanwhile (the instance's first process alone is given it; the server
// drops it as it starts, init.go): the root service (rootd, through which `sudo`
// works) in a pids cgroup of gVisor's own, the cgroup's mount covered so that no one
// can raise its limit or leave it, and then the capability dropped for good. Before the
// agent did this, the host made three `runsc exec` round trips for it at every boot.
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
	if err := startRootService(group); err != nil {
		return err
	}
	// Unmounting would drop the hierarchy and its limit; covering it keeps both.
	if err := syscall.Mount("roomkit", pidsMount, "tmpfs", syscall.MS_RDONLY, "mode=000,size=4k"); err != nil {
		return fmt.Errorf("cannot hide the pids controller: %w", err)
	}
	return nil
}

// startRootService starts rootd through `agent rootd`, which joins the group, drops
// CAP_SYS_ADMIN and becomes python3. Images without python3 or rootd have no sudo.
func startRootService(group string) error {
	if _, err := os.Stat(rootService); err != nil {
		return nil
	}
	python, err := lookPath("python3", nil)
	if err != nil {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var status [2]int
	if err := syscall.Pipe2(status[:], syscall.O_CLOEXEC); err != nil {
		return err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	_, err = syscall.ForkExec(self, []string{self, "rootd", group, python, rootService}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"},
		Files: []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd(), uintptr(status[1])},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	syscall.Close(status[1])
	if err != nil {
		syscall.Close(status[0])
		return fmt.Errorf("cannot start the root service: %w", err)
	}
	// Nothing before the end of the pipe: the launcher reached exec (the end is close-on-exec there).
	failure := make([]byte, 512)
	n, _ := syscall.Read(status[0], failure)
	syscall.Close(status[0])
	if n > 0 {
		return fmt.Errorf("cannot start the root service: %s", strings.TrimSpace(string(failure[:n])))
	}
	return nil
}

// runRootdLauncher is `agent rootd GROUP PYTHON SCRIPT`: joins GROUP, gives up
// CAP_SYS_ADMIN and becomes PYTHON SCRIPT. A failure is written to descriptor 3.
func runRootdLauncher(args []string) {
	fail := func(err error) {
		syscall.Write(3, []byte(err.Error()))
		os.Exit(1)
	}
	if len(args) != 3 {
		fail(errors.New("usage: agent rootd GROUP PYTHON SCRIPT"))
	}
	syscall.CloseOnExec(3)
	if err := os.WriteFile(args[0]+"/cgroup.procs", []byte(fmt.Sprint(os.Getpid())), 0); err != nil {
		fail(fmt.Errorf("cannot join its pids group: %w", err))
	}
	if err := dropSysAdmin(); err != nil {
		fail(fmt.Errorf("cannot drop CAP_SYS_ADMIN: %w", err))
	}
	fail(syscall.Exec(args[1], []string{"python3", args[2]}, os.Environ()))
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
