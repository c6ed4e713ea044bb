// The wire format between roomkit (the host) and this agent: one TCP connection per
// operation, carrying frames both ways. A frame is one byte of type, four bytes of
// payload length (big-endian) and the payload. The host opens with a request frame
// (JSON, with the instance's key); the agent answers with a reply frame (JSON) or a
// failure frame, then, depending on the operation, output or data frames and an end
// frame. docs/architecture.md describes the operations.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// Frame types.
const (
	frameRequest = 'Q' // host → agent: the operation (JSON)
	frameReply   = 'R' // agent → host: the operation started or is done (JSON)
	frameFail    = 'F' // agent → host: the operation failed (JSON {kind, message})
	frameStdout  = 'o' // agent → host: output of a command (stdout, or the terminal)
	frameStderr  = 'e' // agent → host: stderr of a command
	frameEnd     = 'x' // agent → host: a command ended (JSON), or a read's data ended
	frameData    = 'd' // agent → host: file content being read
	frameInput   = 'i' // host → agent: stdin of a command, or content of a file being written
	frameClose   = 'c' // host → agent: end of that input
	frameResize  = 'z' // host → agent: a terminal's new size (JSON {cols, rows})
	frameSignal  = 'k' // host → agent: a signal for a command's processes (JSON {signal})
)

// maxFrame bounds what the agent accepts in one frame from the host.
const maxFrame = 16 << 20

// frameWriter sends frames on a connection; safe for concurrent use.
type frameWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

func (f *frameWriter) send(kind byte, payload []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	var head [5]byte
	head[0] = kind
	binary.BigEndian.PutUint32(head[1:], uint32(len(payload)))
	if _, err := f.w.Write(head[:]); err != nil {
		f.err = err
		return err
	}
	if _, err := f.w.Write(payload); err != nil {
		f.err = err
		return err
	}
	f.err = f.w.Flush()
	return f.err
}

func (f *frameWriter) sendJSON(kind byte, value any) error {
	payload, err := json.Marshal(value)
	if err != nil {
		return err
	}
	return f.send(kind, payload)
}

// failure is what a frameFail carries: a kind the host maps to its errors, and a message.
type failure struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (f *frameWriter) fail(kind, message string) error {
	return f.sendJSON(frameFail, failure{Kind: kind, Message: message})
}

var errFrameTooLarge = errors.New("frame too large")

// readFrame reads one frame.
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxFrame {
		return 0, nil, errFrameTooLarge
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return head[0], payload, nil
}
