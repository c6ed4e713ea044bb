// The first bytes of files, for the host to sniff their types from (files_changed's
// MIME types): read as root, since root may have made them, in one operation for a
// command's whole list of changed files.
package main

import (
	"syscall"
)

// maxHeadBytes bounds how much of each file the host may ask for.
const maxHeadBytes = 4096

// maxHeadPaths bounds how many files one operation reads.
const maxHeadPaths = 1000

// headsOf answers, for each path in turn, its first req.Bytes bytes (fewer when the
// file is shorter; none for anything but a readable regular file).
func headsOf(w *frameWriter, req *request) {
	n := req.Bytes
	if n <= 0 || n > maxHeadBytes {
		n = maxHeadBytes
	}
	if len(req.Paths) > maxHeadPaths {
		w.fail(failBadRequest, "too many paths")
		return
	}
	heads := make([][]byte, len(req.Paths))
	buf := make([]byte, n)
	for i, path := range req.Paths {
		heads[i] = headOf(string(path), buf)
	}
	w.sendJSON(frameReply, headsReply{Heads: heads})
}

func headOf(path string, buf []byte) []byte {
	// Non-blocking, so a FIFO put in a file's place cannot hold the answer.
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return []byte{}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return []byte{}
	}
	got := 0
	for got < len(buf) {
		r, err := syscall.Read(fd, buf[got:])
		if r > 0 {
			got += r
			continue
		}
		if err == syscall.EINTR {
			continue
		}
		break
	}
	return append([]byte{}, buf[:got]...)
}
