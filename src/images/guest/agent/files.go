// Files, read and changed with the rights of the user the host names (the VM user):
// each operation runs on an OS thread of its own that takes that user's identity and
// ends with the operation, so paths (links, `..` and all) resolve in the guest with the
// guest's permissions, and no other code ever runs with that identity.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// fileError is a failure the host maps to an API error.
type fileError struct{ kind, message string }

func (e *fileError) Error() string { return e.message }

// asUser runs fn with the identity of uid:gid (no supplementary groups).
func asUser(uid, gid int, fn func() error) error {
	if uid == 0 && gid == 0 {
		return fn()
	}
	result := make(chan error, 1)
	go func() {
		// Never unlocked: when this goroutine returns, the runtime ends the thread, so
		// its changed identity dies with it. (The runtime makes new threads from a clean
		// template thread, never by cloning a locked one.)
		runtime.LockOSThread()
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			result <- e
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			result <- e
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			result <- e
			return
		}
		result <- fn()
	}()
	return <-result
}

// kindOf maps an error of a file operation to the protocol's kinds of failure.
func kindOf(err error) string {
	var fe *fileError
	switch {
	case errors.As(err, &fe):
		return fe.kind
	case errors.Is(err, syscall.ENOENT):
		return failNotFound
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return failPermissionDenied
	case errors.Is(err, syscall.EISDIR):
		return failIsADirectory
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EEXIST):
		return failNotADirectory
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return failNoSpace
	case errors.Is(err, syscall.ELOOP):
		return failNotFound
	default:
		return failIOError
	}
}

func failWith(w *frameWriter, err error) {
	w.fail(kindOf(err), err.Error())
}

func infoOf(st *syscall.Stat_t) fileInfo {
	return fileInfo{Size: st.Size, MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano(), Ino: st.Ino}
}

// openRegular opens a regular file for reading and describes it through the opened
// descriptor: the guest may swap the path for a link, a directory or a pipe at any time.
func openRegular(path string) (*os.File, fileInfo, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, fileInfo{}, &fileError{failNotFound, path + ": a component of the path is not a directory"}
		}
		return nil, fileInfo{}, err
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return nil, fileInfo{}, &fileError{failIsADirectory, path + " is a directory"}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fileInfo{}, &fileError{failInvalidPath, path + " is not a regular file"}
	}
	// O_NONBLOCK: should the path have become a pipe since, opening it must not block.
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fileInfo{}, err
	}
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, fileInfo{}, &fileError{failChanged, err.Error()}
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		syscall.Close(fd)
		return nil, fileInfo{}, &fileError{failIsADirectory, path + " is a directory"}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, fileInfo{}, &fileError{failInvalidPath, path + " is not a regular file"}
	}
	// Back to blocking reads for a regular file.
	syscall.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), path), infoOf(&st), nil
}

func statFile(w *frameWriter, req *request) {
	var info fileInfo
	err := asUser(req.UID, req.GID, func() error {
		f, i, err := openRegular(string(req.Path))
		if err != nil {
			return err
		}
		f.Close()
		info = i
		return nil
	})
	if err != nil {
		failWith(w, err)
		return
	}
	w.sendJSON(frameReply, info)
}

func readFile(w *frameWriter, req *request) {
	var file *os.File
	var info fileInfo
	err := asUser(req.UID, req.GID, func() error {
		var err error
		file, info, err = openRegular(string(req.Path))
		return err
	})
	if err != nil {
		failWith(w, err)
		return
	}
	defer file.Close()
	if w.sendJSON(frameReply, info) != nil {
		return
	}
	var reader io.Reader = file
	if req.Offset > 0 {
		if _, err := file.Seek(req.Offset, io.SeekStart); err != nil {
			w.fail(failIOError, err.Error())
			return
		}
	}
	// Never more than the size announced: the file may grow while it is read.
	left := info.Size - req.Offset
	if req.Length >= 0 && req.Length < left {
		left = req.Length
	}
	if left < 0 {
		left = 0
	}
	reader = io.LimitReader(file, left)
	buf := make([]byte, 256<<10)
	for {
		n, err := reader.Read(buf)
		if n > 0 && w.send(frameData, buf[:n]) != nil {
			return
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			w.fail(failIOError, err.Error())
			return
		}
	}
	w.sendJSON(frameEnd, readEnd{})
}

// writeFile creates or replaces a file with what the host sends after the agent says
// it is ready, making the parent directories first.
func writeFile(r *bufio.Reader, w *frameWriter, req *request) {
	path := string(req.Path)
	var file *os.File
	existed := false
	err := asUser(req.UID, req.GID, func() error {
		var st syscall.Stat_t
		if syscall.Stat(path, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			return &fileError{failIsADirectory, path + " is a directory"}
		}
		existed = syscall.Lstat(path, &st) == nil
		if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
			return err
		}
		var err error
		file, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
		return err
	})
	if err != nil {
		failWith(w, err)
		return
	}
	defer file.Close()
	if w.sendJSON(frameReply, writeReply{Ready: true}) != nil {
		return
	}
	var writeErr error
	for {
		kind, payload, err := readFrame(r)
		if err != nil {
			return // the host went away: the file stays as far as it got
		}
		if kind == frameClose {
			break
		}
		if kind == frameInput && writeErr == nil {
			_, writeErr = file.Write(payload)
		}
	}
	if writeErr != nil {
		failWith(w, writeErr)
		return
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(file.Fd()), &st); err != nil {
		w.fail(failChanged, err.Error())
		return
	}
	w.sendJSON(frameEnd, writeEnd{Info: infoOf(&st), Existed: existed})
}

func listDirectory(w *frameWriter, req *request) {
	path := string(req.Path)
	var entries []entry
	err := asUser(req.UID, req.GID, func() error {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return &fileError{failNotADirectory, path + " is not a directory"}
		}
		dir, err := os.Open(path)
		if err != nil {
			return err
		}
		defer dir.Close()
		limit := req.Limit
		if limit <= 0 {
			limit = 1000
		}
		names, err := dir.Readdirnames(limit)
		if err != nil && err != io.EOF {
			return err
		}
		for _, name := range names {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(path, name), &st); err != nil {
				continue // gone since
			}
			entries = append(entries, entry{Name: []byte(name), Type: typeOf(st.Mode), Size: st.Size, Mode: fmt.Sprintf("%o", st.Mode&0o7777), MtimeNs: st.Mtim.Nano()})
		}
		return nil
	})
	if err != nil {
		failWith(w, err)
		return
	}
	if entries == nil {
		entries = []entry{}
	}
	w.sendJSON(frameReply, listReply{Entries: entries})
}

func typeOf(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return entryFile
	case syscall.S_IFDIR:
		return entryDirectory
	case syscall.S_IFLNK:
		return entrySymlink
	default:
		return entryOther
	}
}

func deleteFile(w *frameWriter, req *request) {
	path := string(req.Path)
	err := asUser(req.UID, req.GID, func() error {
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return err
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			return &fileError{failIsADirectory, path + " is a directory"}
		}
		return syscall.Unlink(path)
	})
	if err != nil {
		failWith(w, err)
		return
	}
	w.sendJSON(frameReply, deleteReply{})
}
