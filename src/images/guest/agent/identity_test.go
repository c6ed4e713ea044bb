// asUser and the process's identity: work done as another user leaves no thread with
// that user's identity behind, and the first thread, whose identity the kernel shows as
// the process's, keeps root's (main.go's init keeps every goroutine but main off it).
package main

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAsUserLeavesTheProcessItsIdentity(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("taking another identity needs root")
	}
	// Sequential and side by side: either way a goroutine may land on any idle thread.
	for i := 0; i < 50; i++ {
		if err := asUser(1000, 1000, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			asUser(1000, 1000, func() error { return nil })
		}()
	}
	wg.Wait()
	// A thread that Go ends may still be listed for a moment after its goroutine returned.
	var left []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left = threadsNotRoot(t)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("threads left with another identity: %v", left)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if uid := field(string(status), "Uid:"); uid != "0\t0\t0\t0" {
		t.Fatalf("the process's uids are %q", uid)
	}
	// Positive control: the work did run as the user.
	var seen int
	asUser(1000, 1000, func() error { seen = os.Geteuid(); return nil })
	if seen != 1000 {
		t.Fatalf("asUser ran its work as uid %d", seen)
	}
}

func threadsNotRoot(t *testing.T) []string {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, task := range tasks {
		status, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		if uid := field(string(status), "Uid:"); uid != "0\t0\t0\t0" {
			found = append(found, task.Name()+": "+uid)
		}
	}
	return found
}

func field(status, name string) string {
	for _, line := range strings.Split(status, "\n") {
		if strings.HasPrefix(line, name) {
			return strings.TrimSpace(line[len(name):])
		}
	}
	return ""
}
