// The bounds of what the agent keeps for a client that attaches again (attach.go): the
// output ring, the replay from an offset, the ended commands kept.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"testing"
	"time"
)

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// frames reads back what an attachment was sent.
func frames(t *testing.T, raw []byte) (kinds []byte, payloads [][]byte) {
	t.Helper()
	r := bufio.NewReader(bytes.NewReader(raw))
	for {
		kind, payload, err := readFrame(r)
		if err != nil {
			return
		}
		kinds = append(kinds, kind)
		payloads = append(payloads, payload)
	}
}

func TestOutputIsKeptWithinItsBoundAndReplayedFromAnOffset(t *testing.T) {
	c := newCommandRecord("c1", false, nil, nil)
	c.keep = 10
	c.emit(frameStdout, []byte("0123456"))
	c.emit(frameStderr, []byte("789abcdef"))
	if c.total != 16 || c.kept != 10 {
		t.Fatalf("total %d kept %d, want 16 and 10", c.total, c.kept)
	}
	var out bytes.Buffer
	a := newAttachment(newFrameWriter(&out), nopCloser{})
	c.attach(a, 2)
	kinds, payloads := frames(t, out.Bytes())
	var reply attachReply
	if len(kinds) != 3 || kinds[0] != frameReply || json.Unmarshal(payloads[0], &reply) != nil {
		t.Fatalf("want a reply and two output frames, got %q", kinds)
	}
	if reply.Offset != 6 || reply.Dropped != 4 || reply.OutputBytes != 16 || !reply.Running {
		t.Fatalf("reply %+v: want offset 6, dropped 4, output_bytes 16, running", reply)
	}
	if kinds[1] != frameStdout || string(payloads[1]) != "6" || kinds[2] != frameStderr || string(payloads[2]) != "789abcdef" {
		t.Fatalf("replayed %q %q", payloads[1], payloads[2])
	}
	// Live output goes to the attached connection; its end ends the attachment.
	out.Reset()
	c.emit(frameStdout, []byte("g"))
	c.finish(execEnd{ExitCode: 3})
	kinds, payloads = frames(t, out.Bytes())
	if len(kinds) != 2 || string(payloads[0]) != "g" || kinds[1] != frameEnd {
		t.Fatalf("live frames %q", kinds)
	}
	select {
	case <-a.gone:
	default:
		t.Fatal("the attachment is still held after the end")
	}
}

func TestAnAttachFromTheEndGetsTheEndAtOnce(t *testing.T) {
	c := newCommandRecord("", true, nil, nil)
	c.pid = 42
	c.emit(frameStdout, []byte("hello"))
	c.finish(execEnd{ExitCode: 0})
	var out bytes.Buffer
	c.attach(newAttachment(newFrameWriter(&out), nopCloser{}), 5)
	kinds, payloads := frames(t, out.Bytes())
	var reply attachReply
	json.Unmarshal(payloads[0], &reply)
	if len(kinds) != 2 || kinds[1] != frameEnd || reply.Running || reply.Offset != 5 || reply.Dropped != 0 || !reply.PTY {
		t.Fatalf("frames %q reply %+v", kinds, reply)
	}
}

func TestEndedCommandsAreKeptWithinTheirCountAndTime(t *testing.T) {
	g := &registry{byID: map[string]*commandRecord{}, byPid: map[int]*commandRecord{}, endedKept: 2, endedKeepMs: 60_000}
	var records []*commandRecord
	for i := 1; i <= 3; i++ {
		c := newCommandRecord(string(rune('a'+i)), false, nil, nil)
		c.pid = i
		g.add(c)
		records = append(records, c)
	}
	running := records[2]
	for _, c := range records[:2] {
		c.endedAt = time.Now()
		g.ended(c)
	}
	if g.find("", 1) == nil || g.find("c", 0) == nil {
		t.Fatal("two ended commands are within the count")
	}
	other := newCommandRecord("z", false, nil, nil)
	other.pid = 9
	g.add(other)
	other.endedAt = time.Now()
	g.ended(other)
	if g.find("", 1) != nil || g.find("b", 0) != nil {
		t.Fatal("the oldest ended command is kept beyond the count")
	}
	if g.find("", 3) != running {
		t.Fatal("a running command is dropped")
	}
	records[1].endedAt = time.Now().Add(-2 * time.Minute)
	g.endedKeepMs = 60_000
	if g.find("c", 0) != nil {
		t.Fatal("an ended command is kept past its time")
	}
}

func TestAnAttachIsNotHeldUpByAWriteBlockedOnTheOldConnection(t *testing.T) {
	c := newCommandRecord("c2", false, nil, nil)
	// A connection nobody reads: a write on it blocks, as on one a pause dropped.
	stuck, other := net.Pipe()
	defer other.Close()
	c.attachFirst(newAttachment(newFrameWriter(stuck), stuck))
	emitted := make(chan struct{})
	go func() {
		c.emit(frameStdout, []byte("while away"))
		close(emitted)
	}()
	time.Sleep(50 * time.Millisecond)
	var out bytes.Buffer
	attached := make(chan struct{})
	go func() {
		c.attach(newAttachment(newFrameWriter(&out), nopCloser{}), 0)
		close(attached)
	}()
	select {
	case <-attached:
	case <-time.After(2 * time.Second):
		t.Fatal("the attach waited for a write blocked on the old connection")
	}
	select {
	case <-emitted:
	case <-time.After(2 * time.Second):
		t.Fatal("the blocked write did not end when the attach closed its connection")
	}
	kinds, payloads := frames(t, out.Bytes())
	if len(kinds) != 2 || string(payloads[1]) != "while away" {
		t.Fatalf("the new connection got %q", kinds)
	}
}
