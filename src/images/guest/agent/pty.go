// Terminals: a pseudo-terminal pair for a command that asked for one.
package main

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

func ioctl(f *os.File, request uintptr, arg uintptr) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var callErr error
	// Through SyscallConn, not Fd(): Fd() would put the descriptor in blocking mode,
	// and read deadlines would no longer work on it.
	err = conn.Control(func(fd uintptr) {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, request, arg); e != 0 {
			callErr = e
		}
	})
	if err != nil {
		return err
	}
	return callErr
}

// openPTY opens a terminal pair whose terminal end belongs to the command's user.
func openPTY(uid, gid int, size winsize) (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var number uint32
	if err = ioctl(master, syscall.TIOCGPTN, uintptr(unsafe.Pointer(&number))); err != nil {
		master.Close()
		return nil, nil, err
	}
	var unlock int32
	if err = ioctl(master, syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); err != nil {
		master.Close()
		return nil, nil, err
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(number), 10)
	slave, err = os.OpenFile(name, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	if uid != 0 {
		os.Chown(name, uid, gid)
	}
	setWinsize(master, size)
	return master, slave, nil
}

func setWinsize(terminal *os.File, size winsize) {
	if size.Cols == 0 || size.Rows == 0 {
		return
	}
	ws := struct{ rows, cols, x, y uint16 }{size.Rows, size.Cols, 0, 0}
	ioctl(terminal, syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&ws)))
}
