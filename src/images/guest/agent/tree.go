// Changes to the shape of the file tree: making a directory, renaming, removing a whole
// directory. Like files.go's operations, each runs with the identity of the user the
// host names, so the guest's permissions decide, and a new directory belongs to that
// user with the agent's umask (0755).
package main

import (
	"os"
	"path/filepath"
	"syscall"
)

func makeDirectory(w *frameWriter, req *request) {
	path := string(req.Path)
	created := false
	err := asUser(req.UID, req.GID, func() error {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err == nil {
			if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				return &fileError{failNotADirectory, path + " exists and is not a directory"}
			}
			return nil
		}
		if err := os.MkdirAll(path, 0o777); err != nil {
			return err
		}
		created = true
		return nil
	})
	if err != nil {
		failWith(w, err)
		return
	}
	w.sendJSON(frameReply, mkdirReply{Created: created})
}

func renamePath(w *frameWriter, req *request) {
	path, target := string(req.Path), string(req.Target)
	err := asUser(req.UID, req.GID, func() error {
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o777); err != nil {
			return err
		}
		return syscall.Rename(path, target)
	})
	if err != nil {
		failWith(w, err)
		return
	}
	w.sendJSON(frameReply, renameReply{})
}

// removeTree removes a path and, for a directory, everything under it; a link is
// removed itself, never followed.
func removeTree(w *frameWriter, req *request) {
	path := string(req.Path)
	err := asUser(req.UID, req.GID, func() error {
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return err
		}
		if filepath.Clean(path) == "/" {
			return &fileError{failInvalidPath, "the root directory is not removed"}
		}
		return os.RemoveAll(path)
	})
	if err != nil {
		failWith(w, err)
		return
	}
	w.sendJSON(frameReply, rmtreeReply{})
}
