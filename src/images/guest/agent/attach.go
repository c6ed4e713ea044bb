// Commands kept for a client that attaches again. Every command started by exec has a
// record here: the last keptOutputBytes of its output (stdout and stderr as they came,
// with a running count of every output byte, so a client that attaches says from where
// it wants them and hears how many are gone), the connection that carries it now (none
// once that connection ended), and its end once it has one. A connection that ends
// while its command runs (the host went away, or a pause of the instance dropped it)
// takes nothing with it: the command goes on, its output is kept, and `attach` picks it
// up again, by command id or by pid. Ended commands are kept endedKeepMs, at most
// endedKept of them, for a client that missed the end; a running one is kept until
// it ends, its output within the bound.
package main

import (
	"bufio"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// outputChunk is one read of a command's output, as it was passed on.
type outputChunk struct {
	kind byte
	data []byte
}

// attachment is one connection carrying a command's output and end to the host.
type attachment struct {
	w    *frameWriter
	conn io.Closer
	gone chan struct{} // closed once it carries the command no more
	once sync.Once
}

func newAttachment(w *frameWriter, conn io.Closer) *attachment {
	return &attachment{w: w, conn: conn, gone: make(chan struct{})}
}

func (a *attachment) release() { a.once.Do(func() { close(a.gone) }) }

// commandRecord is one command's output, input, connection and end.
type commandRecord struct {
	commandID string
	pid       int
	pty       bool
	// What input frames go to (the command's stdin, or its terminal), from any connection.
	stdin, terminal *os.File
	input           chan []byte // nil: the end of input
	exited          chan struct{}

	mu      sync.Mutex
	chunks  []outputChunk
	kept    int64 // bytes in chunks
	total   int64 // output bytes ever
	att     *attachment
	end     *execEnd
	endedAt time.Time
	keep    int64 // keptOutputBytes, smaller in tests
	// When output last came (unix ns), or the command started: its silence limit's clock.
	lastOutput atomic.Int64
}

func newCommandRecord(commandID string, pty bool, stdin, terminal *os.File) *commandRecord {
	c := &commandRecord{commandID: commandID, pty: pty, stdin: stdin, terminal: terminal, input: make(chan []byte, 64), exited: make(chan struct{}), keep: keptOutputBytes}
	c.lastOutput.Store(time.Now().UnixNano())
	return c
}

// lastOutputAt is when the command last printed, or started.
func (c *commandRecord) lastOutputAt() time.Time { return time.Unix(0, c.lastOutput.Load()) }

// emit keeps a piece of output and passes it to the attached connection, if any; a
// connection that cannot take it is let go (the output stays kept). The send is made
// outside the lock: a connection that a pause dropped may block a write until attach
// closes it, and attach must be able to. emit is called by one goroutine per command,
// so its sends keep their order.
func (c *commandRecord) emit(kind byte, data []byte) {
	if len(data) > 0 {
		c.lastOutput.Store(time.Now().UnixNano())
	}
	c.mu.Lock()
	c.chunks = append(c.chunks, outputChunk{kind, append([]byte(nil), data...)})
	c.kept += int64(len(data))
	c.total += int64(len(data))
	for c.kept > c.keep {
		excess := c.kept - c.keep
		first := c.chunks[0].data
		if int64(len(first)) <= excess {
			c.chunks[0] = outputChunk{}
			c.chunks = c.chunks[1:]
			c.kept -= int64(len(first))
		} else {
			c.chunks[0].data = first[excess:]
			c.kept -= excess
		}
	}
	a := c.att
	c.mu.Unlock()
	if a != nil && a.w.send(kind, data) != nil {
		c.detach(a)
	}
}

// finish records the command's end and sends it on the attached connection, if any.
func (c *commandRecord) finish(end execEnd) {
	c.mu.Lock()
	c.end = &end
	c.endedAt = time.Now()
	a := c.att
	c.att = nil
	c.mu.Unlock()
	if a != nil {
		a.w.sendJSON(frameEnd, end)
		a.release()
	}
	commands.ended(c)
}

// attach makes `a` the command's connection: the previous one is closed, the reply and
// the kept output from `offset` are sent, and then the end, when there is one already.
func (c *commandRecord) attach(a *attachment, offset int64) {
	c.mu.Lock()
	old := c.att
	c.att = nil
	c.mu.Unlock()
	if old != nil {
		// Closed outside the lock: a send blocked on it holds the lock until it fails.
		old.conn.Close()
		old.release()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.total - c.kept
	from, dropped := offset, int64(0)
	if from < start {
		dropped, from = start-from, start
	}
	if from > c.total {
		from = c.total
	}
	reply := attachReply{Pid: c.pid, CommandID: c.commandID, Offset: from, Dropped: dropped, OutputBytes: c.total, PTY: c.pty, Running: c.end == nil}
	if a.w.sendJSON(frameReply, reply) != nil {
		a.release()
		return
	}
	at := start
	for _, chunk := range c.chunks {
		next := at + int64(len(chunk.data))
		if next > from {
			skip := int64(0)
			if from > at {
				skip = from - at
			}
			if a.w.send(chunk.kind, chunk.data[skip:]) != nil {
				a.release()
				return
			}
		}
		at = next
	}
	if c.end != nil {
		a.w.sendJSON(frameEnd, attachEnd{ExitCode: c.end.ExitCode, Signal: c.end.Signal, TimedOut: c.end.TimedOut})
		a.release()
		return
	}
	c.att = a
}

// attachFirst makes `a`, exec's own connection, the command's before any output.
func (c *commandRecord) attachFirst(a *attachment) {
	c.mu.Lock()
	c.att = a
	c.mu.Unlock()
}

// detach lets `a` go if it is still the command's connection (its host went away).
func (c *commandRecord) detach(a *attachment) {
	c.mu.Lock()
	if c.att == a {
		c.att = nil
	}
	c.mu.Unlock()
	a.release()
}

// writeInput writes what the host sends to the command's stdin (or terminal) until the
// command's first process exits. Whichever connection it came on, it goes through this
// one queue, so a command that does not read cannot hold up a signal.
func (c *commandRecord) writeInput() {
	defer func() {
		if c.stdin != nil && c.stdin != c.terminal {
			c.stdin.Close()
		}
	}()
	for {
		select {
		case chunk := <-c.input:
			if chunk == nil {
				if c.stdin != nil && c.stdin != c.terminal {
					c.stdin.Close()
				} else if c.terminal != nil {
					c.terminal.Write([]byte{4}) // ^D: end of input on a terminal
				}
				continue
			}
			if c.stdin != nil {
				c.stdin.Write(chunk)
			}
		case <-c.exited:
			return
		}
	}
}

// registry is every command the agent keeps, by command id and by pid.
type registry struct {
	mu         sync.Mutex
	byID       map[string]*commandRecord
	byPid      map[int]*commandRecord
	endedOrder []*commandRecord // oldest first
	// The bounds on ended commands; constants but for tests.
	endedKept   int
	endedKeepMs int64
}

var commands = &registry{byID: map[string]*commandRecord{}, byPid: map[int]*commandRecord{}, endedKept: endedKept, endedKeepMs: endedKeepMs}

func (g *registry) add(c *commandRecord) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.commandID != "" {
		g.byID[c.commandID] = c
	}
	g.byPid[c.pid] = c
}

// find is the command of this id, or (with no id) of this pid; nil when none is kept.
func (g *registry) find(commandID string, pid int) *commandRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune(time.Now())
	if commandID != "" {
		return g.byID[commandID]
	}
	return g.byPid[pid]
}

func (g *registry) ended(c *commandRecord) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.endedOrder = append(g.endedOrder, c)
	g.prune(time.Now())
}

// prune drops ended commands past their time, and the oldest beyond the count.
func (g *registry) prune(now time.Time) {
	for len(g.endedOrder) > 0 {
		oldest := g.endedOrder[0]
		if len(g.endedOrder) <= g.endedKept && now.Sub(oldest.endedAt) < time.Duration(g.endedKeepMs)*time.Millisecond {
			return
		}
		g.endedOrder[0] = nil
		g.endedOrder = g.endedOrder[1:]
		if g.byID[oldest.commandID] == oldest {
			delete(g.byID, oldest.commandID)
		}
		if g.byPid[oldest.pid] == oldest {
			delete(g.byPid, oldest.pid)
		}
	}
}

// runAttach answers attach: the command's kept output from the asked offset, then its
// live output and end; input, resizes and signals on this connection act on it.
func runAttach(conn io.Closer, r *bufio.Reader, w *frameWriter, req *request) {
	c := commands.find(req.CommandID, req.Pid)
	if c == nil {
		w.fail(failNotFound, "no such command is running or kept (an ended one is kept for a while, the newest ones only)")
		return
	}
	a := newAttachment(w, conn)
	c.attach(a, req.Offset)
	go serveInput(r, c, a)
	<-a.gone
}

// serveInput applies what the host sends on an attached connection until it ends, and
// then closes it at once: a connection left half closed until the command ends would be
// one more for a pause's checkpoint to carry.
func serveInput(r *bufio.Reader, c *commandRecord, a *attachment) {
	commandInput(r, c)
	c.detach(a)
	a.conn.Close()
}
