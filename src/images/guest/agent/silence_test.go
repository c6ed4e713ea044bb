// Tests of the silence limit: silence past the limit ends the command once, output
// before the limit moves it, and a stopped watch never fires.
package main

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestSilenceFiresAfterLimitWithoutOutput(t *testing.T) {
	start := time.Now()
	fired := make(chan time.Duration, 2)
	w := watchSilence(80*time.Millisecond, func() time.Time { return start }, func() { fired <- time.Since(start) })
	defer w.stop()
	select {
	case after := <-fired:
		if after < 80*time.Millisecond {
			t.Fatalf("fired after %v, before the limit", after)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a silent command was not ended")
	}
	select {
	case <-fired:
		t.Fatal("fired twice")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestSilenceMovedByOutput(t *testing.T) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var fired atomic.Bool
	w := watchSilence(100*time.Millisecond, func() time.Time { return time.Unix(0, last.Load()) }, func() { fired.Store(true) })
	defer w.stop()
	// Output every 40 ms for 400 ms: four times the limit, never silent that long.
	for i := 0; i < 10; i++ {
		time.Sleep(40 * time.Millisecond)
		last.Store(time.Now().UnixNano())
	}
	if fired.Load() {
		t.Fatal("a command printing more often than its limit was ended")
	}
	deadline := time.Now().Add(2 * time.Second)
	for !fired.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !fired.Load() {
		t.Fatal("the silence after the output did not end it")
	}
}

func TestSilenceStopped(t *testing.T) {
	start := time.Now()
	var fired atomic.Bool
	w := watchSilence(50*time.Millisecond, func() time.Time { return start }, func() { fired.Store(true) })
	w.stop()
	time.Sleep(150 * time.Millisecond)
	if fired.Load() {
		t.Fatal("a stopped watch fired")
	}
}
