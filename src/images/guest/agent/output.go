// A command's output on its way to the host: its stdout and stderr pipes read by one
// loop (pipesOutput), or its terminal (terminalOutput), until the result is complete,
// each read handed to the command's record (attach.go), which keeps it and passes it to
// whichever connection carries the command.
package main

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// After a command's first process exits, its output is still read until the pipes
// close, or stay quiet this long, or at most outputDrainMax: processes it left in the
// background may hold them open for as long as they run. What they print later is read
// and dropped, so that they do not die of a closed pipe.
const (
	outputQuiet    = 30 * time.Millisecond
	outputDrainMax = 2 * time.Second
)

// commandOutput is what runExec needs of a command's output, whichever kind it is.
type commandOutput interface {
	// pump passes output on until every writer has closed; run on its own goroutine.
	pump()
	// afterExit starts the quiet window: the result ends when the output closes or is quiet.
	afterExit()
	// complete is closed when the result has all of the output.
	complete() <-chan struct{}
	// finish ends the result's output now; what comes later is dropped.
	finish()
	// abandon closes the reading ends of a command that did not start.
	abandon()
}

// resultEnd is the part shared by both kinds: the signal that the result is complete.
type resultEnd struct {
	done chan struct{}
	once sync.Once
}

func (e *resultEnd) complete() <-chan struct{} { return e.done }
func (e *resultEnd) finish()                   { e.once.Do(func() { close(e.done) }) }

func (e *resultEnd) finished() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// pipesOutput reads a command's stdout and stderr in one loop, in the order epoll lists
// them as readable, which is the order in which they became readable. So `output` keeps
// the order of the command's writes to the two streams, except for writes that come
// closer together than the loop takes to read one chunk (then the pipe that became
// readable first is read first, with all it holds). Two goroutines reading a pipe each
// lost the order much more often: the scheduler picked between them.
type pipesOutput struct {
	resultEnd
	rec    *commandRecord
	ep     int
	fds    [2]int // reading ends of stdout and stderr, non-blocking; -1 once closed
	kinds  [2]byte
	wake   [2]int // afterExit writes a byte to wake[1]
	exited atomic.Bool
}

// newPipesOutput makes the two pipes; the writing ends are the command's stdout and
// stderr, for the caller to pass to the process and then close.
func newPipesOutput(rec *commandRecord) (p *pipesOutput, stdout, stderr *os.File, err error) {
	p = &pipesOutput{resultEnd: resultEnd{done: make(chan struct{})}, rec: rec, ep: -1, fds: [2]int{-1, -1}, wake: [2]int{-1, -1}, kinds: [2]byte{frameStdout, frameStderr}}
	var writers [2]int
	fail := func(e error) (*pipesOutput, *os.File, *os.File, error) {
		p.abandon()
		for _, fd := range writers {
			if fd > 0 {
				syscall.Close(fd)
			}
		}
		return nil, nil, nil, e
	}
	for i := range p.fds {
		var ends [2]int
		if err := syscall.Pipe2(ends[:], syscall.O_CLOEXEC); err != nil {
			return fail(err)
		}
		p.fds[i], writers[i] = ends[0], ends[1]
		if err := syscall.SetNonblock(ends[0], true); err != nil {
			return fail(err)
		}
	}
	if err := syscall.Pipe2(p.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return fail(err)
	}
	if p.ep, err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); err != nil {
		return fail(err)
	}
	for _, fd := range []int{p.fds[0], p.fds[1], p.wake[0]} {
		// Edge-triggered: a pipe joins the end of the ready list when it is written to
		// after it was read empty, so the list is in the order of those writes.
		event := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | -syscall.EPOLLET, Fd: int32(fd)}
		if err := syscall.EpollCtl(p.ep, syscall.EPOLL_CTL_ADD, fd, &event); err != nil {
			return fail(err)
		}
	}
	return p, os.NewFile(uintptr(writers[0]), "stdout"), os.NewFile(uintptr(writers[1]), "stderr"), nil
}

func (p *pipesOutput) afterExit() {
	p.exited.Store(true)
	syscall.Write(p.wake[1], []byte{1})
}

func (p *pipesOutput) abandon() {
	for _, fd := range []int{p.ep, p.fds[0], p.fds[1], p.wake[0], p.wake[1]} {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
	p.ep, p.fds, p.wake = -1, [2]int{-1, -1}, [2]int{-1, -1}
}

func (p *pipesOutput) pump() {
	defer p.abandon()
	defer p.finish()
	buf := make([]byte, 32<<10)
	events := make([]syscall.EpollEvent, 3)
	var quietFrom time.Time // once exited: the exit, or the last read after it
	for p.fds[0] >= 0 || p.fds[1] >= 0 {
		timeout := -1
		if !quietFrom.IsZero() && !p.finished() {
			timeout = int(time.Until(quietFrom.Add(outputQuiet))/time.Millisecond) + 1
		}
		n, err := syscall.EpollWait(p.ep, events, timeout)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return
		}
		if n == 0 {
			p.finish() // quiet since the exit: the result is complete
			continue
		}
		for _, event := range events[:n] {
			fd := int(event.Fd)
			if fd == p.wake[0] {
				for got, _ := syscall.Read(fd, buf); got > 0; got, _ = syscall.Read(fd, buf) {
				}
				quietFrom = time.Now()
				continue
			}
			i := 0
			if fd == p.fds[1] {
				i = 1
			}
			// Read empty (an edge comes only after that), or to its end.
			for {
				got, err := syscall.Read(fd, buf)
				if got > 0 {
					if p.exited.Load() {
						quietFrom = time.Now()
					}
					if !p.finished() {
						p.rec.emit(p.kinds[i], buf[:got])
					}
					continue
				}
				if errors.Is(err, syscall.EINTR) {
					continue
				}
				if !errors.Is(err, syscall.EAGAIN) {
					syscall.EpollCtl(p.ep, syscall.EPOLL_CTL_DEL, fd, nil)
					syscall.Close(fd)
					p.fds[i] = -1
				}
				break
			}
		}
	}
}

// terminalOutput reads a command's terminal and passes it to the host until the
// result is complete, then drops what comes after.
type terminalOutput struct {
	resultEnd
	file   *os.File
	rec    *commandRecord
	exited atomic.Bool
}

func newTerminalOutput(file *os.File, rec *commandRecord) *terminalOutput {
	return &terminalOutput{resultEnd: resultEnd{done: make(chan struct{})}, file: file, rec: rec}
}

func (t *terminalOutput) abandon() { t.file.Close() }

func (t *terminalOutput) pump() {
	defer t.file.Close()
	defer t.finish()
	buf := make([]byte, 32<<10)
	for {
		n, err := t.file.Read(buf)
		if n > 0 {
			if !t.finished() {
				t.rec.emit(frameStdout, buf[:n])
			}
			if t.exited.Load() {
				t.file.SetReadDeadline(time.Now().Add(outputQuiet))
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// Go refuses a read past its deadline without trying it: what the terminal
				// holds already is read now, so that a late-scheduled loop loses nothing.
				t.readWaiting(buf)
				t.finish()
				t.file.SetReadDeadline(time.Time{})
				continue
			}
			return // EIO once every holder of the terminal closed it
		}
	}
}

// readWaiting passes on what can be read without waiting.
func (t *terminalOutput) readWaiting(buf []byte) {
	raw, err := t.file.SyscallConn()
	if err != nil {
		return
	}
	for {
		got := 0
		raw.Read(func(fd uintptr) bool {
			got, _ = syscall.Read(int(fd), buf)
			return true // one try: never wait
		})
		if got <= 0 {
			return
		}
		t.rec.emit(frameStdout, buf[:got])
	}
}

func (t *terminalOutput) afterExit() {
	t.exited.Store(true)
	t.file.SetReadDeadline(time.Now().Add(outputQuiet))
}
