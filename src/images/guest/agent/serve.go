// The agent's server: accepts the host's connections, checks the instance's key, and
// hands each operation to its handler.
package main

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
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

// bootSetupMax bounds how long a hello waits for the init's boot setup.
const bootSetupMax = 10 * time.Second

// bootError is what the init's boot setup could not do ("" when all went well), known
// once bootDone is closed.
var (
	bootError string
	bootDone  = make(chan struct{})
)

func runServe() {
	if os.Getenv(bootPendingEnv) != "" {
		// The first server starts beside the init's boot setup (init.go), with the
		// capabilities the init holds for it: CAP_SYS_ADMIN goes before anything else.
		syscall.CloseOnExec(3)
		if err := dropSysAdmin(); err != nil {
			fmt.Fprintln(os.Stderr, "agent serve: cannot drop CAP_SYS_ADMIN:", err)
			os.Exit(1)
		}
		go awaitBootSetup(os.NewFile(3, "boot setup outcome"))
	} else {
		bootError = os.Getenv(bootErrorEnv)
		close(bootDone)
	}
	os.Unsetenv(bootPendingEnv)
	os.Unsetenv(bootErrorEnv)
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
	// Accepted on a goroutine of its own: the main goroutine keeps the first thread
	// (main.go), and every connection it accepted would wait for that thread to wake.
	go accept(listener, key)
	select {}
}

func accept(listener net.Listener, key string) {
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

// awaitBootSetup reads what the init's boot setup could not do, until the init closes
// the pipe at the setup's end.
func awaitBootSetup(outcome *os.File) {
	said, _ := io.ReadAll(outcome)
	outcome.Close()
	bootError = strings.TrimSpace(string(said))
	close(bootDone)
}

// bootOutcome is what the boot setup could not do, once it has ended.
func bootOutcome() string {
	select {
	case <-bootDone:
		return bootError
	case <-time.After(bootSetupMax):
		return "the boot setup did not end within " + bootSetupMax.String()
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
		// Readiness first: the boot setup may still be under way meanwhile.
		var ready *readiness
		if req.ReadyCheck != nil {
			ready = &readiness{Error: checkReadiness(req.ReadyCheck)}
		}
		booted := bootOutcome()
		w.sendJSON(frameReply, helloReply{Agent: "roomkit", Protocol: protocolVersion, Pid: os.Getpid(), UptimeMs: time.Since(startedAt).Milliseconds(), BootError: booted, Ready: ready})
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
