// Commands: started in a session of their own, as the user the host names, with their
// output passed on as it comes (stdout and stderr apart, or one terminal) and kept for a
// client that attaches later (attach.go), their input from the host, a time limit and a
// silence limit (silence.go), and their whole process tree killed when asked.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func runExec(conn io.Closer, r *bufio.Reader, w *frameWriter, req *request) {
	if len(req.Argv) == 0 {
		w.fail(failBadRequest, "no program to run")
		return
	}
	program, err := lookPath(req.Argv[0], req.Env)
	if err != nil {
		w.fail(failNotFound, err.Error())
		return
	}
	sys := &syscall.SysProcAttr{Setsid: true}
	if req.UID != 0 || req.GID != 0 {
		sys.Credential = &syscall.Credential{Uid: uint32(req.UID), Gid: uint32(req.GID), Groups: []uint32{}}
	}
	var (
		childFiles []*os.File
		output     commandOutput
		record     *commandRecord
	)
	closeChildFiles := func() {
		for _, f := range childFiles {
			f.Close()
		}
	}
	if req.PTY != nil {
		master, slave, err := openPTY(req.UID, req.GID, *req.PTY)
		if err != nil {
			w.fail(failPTYFailed, err.Error())
			return
		}
		record = newCommandRecord(req.CommandID, true, master, master)
		childFiles = []*os.File{slave, slave, slave}
		sys.Setctty = true
		sys.Ctty = 0
		output = newTerminalOutput(master, record)
	} else {
		var in, stdin *os.File
		if req.Stdin {
			pr, pw, err := os.Pipe()
			if err != nil {
				w.fail(failStartFailed, err.Error())
				return
			}
			in, stdin = pr, pw
		} else if in, err = os.Open(os.DevNull); err != nil {
			w.fail(failStartFailed, err.Error())
			return
		}
		record = newCommandRecord(req.CommandID, false, stdin, nil)
		pipes, outW, errW, err := newPipesOutput(record)
		if err != nil {
			in.Close()
			if stdin != nil {
				stdin.Close()
			}
			w.fail(failStartFailed, "cannot make pipes: "+err.Error())
			return
		}
		childFiles = []*os.File{in, outW, errW}
		output = pipes
	}
	process, err := os.StartProcess(program, req.Argv, &os.ProcAttr{Dir: req.Dir, Env: req.Env, Files: childFiles, Sys: sys})
	closeChildFiles()
	if err != nil {
		output.abandon()
		if record.stdin != nil && record.stdin != record.terminal {
			record.stdin.Close()
		}
		kind := failStartFailed
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			kind = failNotFound
		}
		w.fail(kind, err.Error())
		return
	}
	pid := process.Pid
	record.pid = pid
	commands.add(record)
	w.sendJSON(frameReply, execReply{Pid: pid})
	// Attached before any output is read, so this connection gets all of it.
	first := newAttachment(w, conn)
	record.attachFirst(first)
	go serveInput(r, record, first)
	go output.pump()
	go record.writeInput()

	// The first limit to pass ends the command; its end says which.
	const (
		endedByTime int32 = iota + 1
		endedBySilence
	)
	var limitHit atomic.Int32
	endBy := func(limit int32) func() {
		return func() {
			if limitHit.CompareAndSwap(0, limit) {
				killTree(req.CommandID, pid, syscall.SIGKILL, true)
			}
		}
	}
	var deadline *time.Timer
	if req.TimeoutMs > 0 {
		deadline = time.AfterFunc(time.Duration(req.TimeoutMs)*time.Millisecond, endBy(endedByTime))
	}
	var silence *silenceWatch
	if req.IdleOutputMs > 0 {
		silence = watchSilence(time.Duration(req.IdleOutputMs)*time.Millisecond, record.lastOutputAt, endBy(endedBySilence))
	}

	// The command is waited for whether or not a connection carries it: its end is kept
	// for one that attaches later.
	state, waitErr := process.Wait()
	if deadline != nil {
		deadline.Stop()
	}
	if silence != nil {
		silence.stop()
	}
	close(record.exited)
	output.afterExit()
	select {
	case <-output.complete():
	case <-time.After(outputDrainMax):
		output.finish()
	}
	result := execEnd{TimedOut: limitHit.Load() != 0, NoOutput: limitHit.Load() == endedBySilence}
	if waitErr != nil {
		result.ExitCode = -1
	} else if status, ok := state.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		result.ExitCode = 128 + int(status.Signal())
		result.Signal = signalName(status.Signal())
	} else {
		result.ExitCode = state.ExitCode()
	}
	record.finish(result)
}

// commandInput applies what the host sends on one connection while the command runs:
// input, its end, a terminal's size, signals. It returns when that connection ends; the
// command's input stays open for another connection that attaches.
func commandInput(r *bufio.Reader, c *commandRecord) {
	for {
		kind, payload, err := readFrame(r)
		if err != nil {
			return
		}
		switch kind {
		case frameInput:
			select {
			case c.input <- payload:
			case <-c.exited:
			}
		case frameClose:
			select {
			case c.input <- nil:
			case <-c.exited:
			}
		case frameResize:
			var size winsize
			if c.terminal != nil && json.Unmarshal(payload, &size) == nil {
				setWinsize(c.terminal, size)
			}
		case frameSignal:
			var s signalRequest
			if json.Unmarshal(payload, &s) == nil {
				killTree(c.commandID, c.pid, signalNumber(s.Signal), false)
			}
		}
	}
}

// lookPath finds a program the way a shell would, in the PATH of the command's environment.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			path = e[len("PATH="):]
		}
	}
	for _, dir := range filepath.SplitList(path) {
		candidate := filepath.Join(dir, name)
		if st, err := os.Stat(candidate); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", errors.New(name + ": not found in PATH")
}

var signalNumbers = map[string]syscall.Signal{"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT}

func signalNumber(name string) syscall.Signal {
	if s, ok := signalNumbers[strings.TrimPrefix(name, "SIG")]; ok {
		return s
	}
	return syscall.SIGKILL
}

func signalName(s syscall.Signal) string {
	for name, n := range signalNumbers {
		if n == s {
			return "SIG" + name
		}
	}
	return "SIG" + strconv.Itoa(int(s))
}

// killTree signals every process marked with the command's id and every process in
// their sessions (which covers children that cleared their environment), and the
// session of `pid` when given. With `repeat`, again until none is left (a process may
// fork meanwhile). Returns how many processes it signalled.
func killTree(commandID string, pid int, sig syscall.Signal, repeat bool) int {
	hit := 0
	for round := 0; round < 40; round++ {
		targets := map[int]bool{}
		sessions := map[int]bool{}
		if pid > 0 {
			sessions[pid] = true // the command's first process leads its session
		}
		procs, _ := os.ReadDir("/proc")
		self := os.Getpid()
		type proc struct{ pid, sid int }
		var all []proc
		for _, entry := range procs {
			p, err := strconv.Atoi(entry.Name())
			if err != nil || p == 1 || p == self {
				continue
			}
			sid := sessionOf(p)
			all = append(all, proc{p, sid})
			if commandID != "" && hasMarker(p, commandID) {
				targets[p] = true
				if sid > 1 {
					sessions[sid] = true
				}
			}
		}
		for _, p := range all {
			if sessions[p.sid] {
				targets[p.pid] = true
			}
		}
		if len(targets) == 0 {
			return hit
		}
		if sig == syscall.SIGKILL {
			// Everything is held still first: killed one by one, a shell whose child died
			// before it would print "Killed" into the command's output.
			for p := range targets {
				syscall.Kill(p, syscall.SIGSTOP)
			}
		}
		for p := range targets {
			if syscall.Kill(p, sig) == nil {
				hit++
			}
		}
		if !repeat {
			return hit
		}
		time.Sleep(50 * time.Millisecond)
	}
	return hit
}

func hasMarker(pid int, commandID string) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	want := []byte(commandMarker + "=" + commandID)
	for _, entry := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(entry, want) {
			return true
		}
	}
	return false
}

// sessionOf reads a process's session id from /proc/PID/stat (0 when it is gone).
func sessionOf(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The name (field 2) is in parentheses and may hold spaces: count from its end.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0
	}
	fields := strings.Fields(string(stat[end+1:]))
	// state ppid pgrp session ...
	if len(fields) < 4 {
		return 0
	}
	sid, _ := strconv.Atoi(fields[3])
	return sid
}
