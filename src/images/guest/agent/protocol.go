// The wire format between roomkit (the host) and this agent: one TCP connection per
// operation, carrying frames both ways. A frame is one byte of type, four bytes of
// payload length (big-endian) and the payload. The host opens with a request frame
// (JSON, with the instance's key); the agent answers with a reply frame (JSON) or a
// failure frame, then, depending on the operation, output or data frames and an end
// frame. The frame types, operations, their fields and the kinds of failure are
// protocol_gen.go's, generated from the protocol's one definition, which the host's
// client follows too (src/runtimes/agent/protocol.ts).
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

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
