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

// defaultPort (where the agent listens unless ROOMKIT_AGENT_PORT says otherwise) is
// below 1024, so a process without root cannot take it while the agent restarts.
// keyFile holds the instance's key, written by the host before the sandbox starts, in a
// directory only root can enter (this gVisor lets every user read /proc/1/environ, so
// the environment is no place for it). Both are protocol_gen.go's.

// requestTimeout bounds how long a new connection may take to say what it wants.
const requestTimeout = 10 * time.Second

var startedAt = time.Now()

// bootError is what the init's boot setup could not do ("" when all went well).
var bootError string

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
		w.fail(failBadRequest, "the request is not valid JSON: "+err.Error())
		return
	}
	if subtle.ConstantTimeCompare([]byte(req.Key), []byte(key)) != 1 {
		w.fail(failUnauthorized, "wrong key")
		return
	}
	switch req.Op {
	case opHello:
		w.sendJSON(frameReply, helloReply{Agent: "roomkit", Protocol: protocolVersion, Pid: os.Getpid(), UptimeMs: time.Since(startedAt).Milliseconds(), BootError: bootError})
	case opExec:
		runExec(conn, r, w, &req)
	case opAttach:
		runAttach(conn, r, w, &req)
	case opKill:
		n := killTree(req.CommandID, 0, signalNumber(req.Signal), req.Signal == "KILL")
		w.sendJSON(frameReply, killReply{Signalled: n})
	case opStat:
		statFile(w, &req)
	case opRead:
		readFile(w, &req)
	case opWrite:
		writeFile(r, w, &req)
	case opList:
		listDirectory(w, &req)
	case opDelete:
		deleteFile(w, &req)
	case opHeads:
		headsOf(w, &req)
	case opMkdir:
		makeDirectory(w, &req)
	case opRename:
		renamePath(w, &req)
	case opRmtree:
		removeTree(w, &req)
	default:
		w.fail(failBadRequest, fmt.Sprintf("unknown operation %q", req.Op))
	}
}
