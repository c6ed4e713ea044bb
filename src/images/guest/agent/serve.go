// The agent's server: accepts the host's connections, checks the instance's key, and
// hands each operation to its handler.
package main

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// defaultPort is where the agent listens unless ROOMKIT_AGENT_PORT says otherwise. It is
// below 1024, so a process without root cannot take it while the agent restarts.
const defaultPort = "905"

// keyFile holds the instance's key, written by the host before the sandbox starts, in a
// directory only root can enter (this gVisor lets every user read /proc/1/environ, so
// the environment is no place for it).
const keyFile = "/run/roomkit-agent/key"

// requestTimeout bounds how long a new connection may take to say what it wants.
const requestTimeout = 10 * time.Second

var startedAt = time.Now()

// bootError is what the init's boot setup could not do ("" when all went well).
var bootError string

// request is every operation's parameters; each operation reads the fields it needs.
type request struct {
	Key string `json:"key"`
	Op  string `json:"op"`

	// exec
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir"`
	UID       int      `json:"uid"`
	GID       int      `json:"gid"`
	CommandID string   `json:"command_id"`
	TimeoutMs int64    `json:"timeout_ms"`
	Stdin     bool     `json:"stdin"`
	PTY       *winsize `json:"pty"`

	// files: the path's bytes (names need not be UTF-8), base64 in JSON
	Path   []byte `json:"path"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Limit  int    `json:"limit"`

	// kill
	Signal string `json:"signal"`

	// heads: paths' bytes, base64 in JSON, and how many bytes of each
	Paths [][]byte `json:"paths"`
	Bytes int      `json:"bytes"`
}

func runServe() {
	bootError = os.Getenv("ROOMKIT_BOOT_ERROR")
	os.Unsetenv("ROOMKIT_BOOT_ERROR")
	port := os.Getenv("ROOMKIT_AGENT_PORT")
	if port == "" {
		port = defaultPort
	}
	// Read at each start, so that a server started again has it too. Only guest root
	// can read the file; nothing this process starts gets the key.
	raw, err := os.ReadFile(keyFile)
	key := strings.TrimSpace(string(raw))
	if err != nil || key == "" {
		fmt.Fprintln(os.Stderr, "agent serve: no key in "+keyFile+": refusing to serve without one")
		os.Exit(1)
	}
	syscall.Umask(0o022)
	var listener net.Listener
	for {
		var err error
		listener, err = net.Listen("tcp", ":"+port)
		if err == nil {
			break
		}
		fmt.Fprintln(os.Stderr, "agent serve: cannot listen yet:", err)
		time.Sleep(200 * time.Millisecond)
	}
	for {
		conn, err := listener.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent serve: accept:", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go handle(conn, key)
	}
}

func handle(conn net.Conn, key string) {
	defer conn.Close()
	r := bufio.NewReaderSize(conn, 64<<10)
	w := newFrameWriter(conn)
	conn.SetReadDeadline(time.Now().Add(requestTimeout))
	kind, payload, err := readFrame(r)
	if err != nil || kind != frameRequest {
		return
	}
	conn.SetReadDeadline(time.Time{})
	var req request
	if err := json.Unmarshal(payload, &req); err != nil {
		w.fail("bad_request", "the request is not valid JSON: "+err.Error())
		return
	}
	if subtle.ConstantTimeCompare([]byte(req.Key), []byte(key)) != 1 {
		w.fail("unauthorized", "wrong key")
		return
	}
	switch req.Op {
	case "hello":
		w.sendJSON(frameReply, map[string]any{"agent": "roomkit", "protocol": 1, "pid": os.Getpid(), "uptime_ms": time.Since(startedAt).Milliseconds(), "boot_error": bootError})
	case "exec":
		runExec(r, w, &req)
	case "kill":
		n := killTree(req.CommandID, 0, signalNumber(req.Signal), req.Signal == "KILL")
		w.sendJSON(frameReply, map[string]int{"signalled": n})
	case "stat":
		statFile(w, &req)
	case "read":
		readFile(w, &req)
	case "write":
		writeFile(r, w, &req)
	case "list":
		listDirectory(w, &req)
	case "delete":
		deleteFile(w, &req)
	case "heads":
		headsOf(w, &req)
	default:
		w.fail("bad_request", fmt.Sprintf("unknown operation %q", req.Op))
	}
}
