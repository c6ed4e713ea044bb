// checkReadiness: the answers a host gets in hello for a home that is fine, missing,
// not a directory, or (as root, which can take another identity) not the user's to write.
package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadinessOfAHome(t *testing.T) {
	dir := t.TempDir()
	if got := checkReadiness(&readyCheck{Home: dir, UID: os.Getuid(), GID: os.Getgid()}); got != "" {
		t.Fatalf("a writable home: %q", got)
	}
	missing := filepath.Join(dir, "missing")
	if got := checkReadiness(&readyCheck{Home: missing, UID: os.Getuid(), GID: os.Getgid()}); !strings.Contains(got, "cannot reach its home "+missing) {
		t.Fatalf("a missing home: %q", got)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := checkReadiness(&readyCheck{Home: file, UID: os.Getuid(), GID: os.Getgid()}); !strings.Contains(got, "is not a directory") {
		t.Fatalf("a file as home: %q", got)
	}
}

func TestReadinessAsAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("taking another identity needs root")
	}
	dir := t.TempDir()
	// The test's directories are root's alone: opened up, so that only the home's own rights decide.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Root's directory, not writable by uid 1000: the command's `test -w .` would fail too.
	if got := checkReadiness(&readyCheck{Home: dir, UID: 1000, GID: 1000}); !strings.Contains(got, "cannot enter and write its home") {
		t.Fatalf("another user's home: %q", got)
	}
	if err := os.Chown(dir, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if got := checkReadiness(&readyCheck{Home: dir, UID: 1000, GID: 1000}); got != "" {
		t.Fatalf("the user's own home: %q", got)
	}
}
