// The first server's hello and the init's boot setup, which run side by side: the hello
// waits for the setup's outcome on the init's pipe, and says what failed.
package main

import (
	"os"
	"testing"
	"time"
)

func TestHelloWaitsForTheBootSetup(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	bootDone = make(chan struct{})
	bootError = ""
	go awaitBootSetup(r)
	answered := make(chan string, 1)
	go func() { answered <- bootOutcome() }()
	select {
	case got := <-answered:
		t.Fatalf("answered %q while the setup was under way", got)
	case <-time.After(100 * time.Millisecond):
	}
	w.Write([]byte("cannot mount the pids controller: operation not permitted\n"))
	w.Close()
	select {
	case got := <-answered:
		if got != "cannot mount the pids controller: operation not permitted" {
			t.Fatalf("the setup's outcome read as %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer once the setup had ended")
	}
	// A setup that went well: the pipe closed with nothing said.
	r, w, _ = os.Pipe()
	bootDone = make(chan struct{})
	go awaitBootSetup(r)
	w.Close()
	if got := bootOutcome(); got != "" {
		t.Fatalf("a setup that went well read as %q", got)
	}
}
