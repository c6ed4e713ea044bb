// A command's silence limit: the command is ended when it has printed nothing (on
// stdout, stderr or its terminal) for as long as its exec asked (idle_output_ms), as
// its time limit ends it, but with an end that says `no_output`.
package main

import (
	"sync"
	"time"
)

// silenceWatch calls onSilent once when the command's latest output (from `last`) is
// `limit` old. It sleeps until the earliest moment the limit could pass, from the last
// output it knows of, rather than polling: a command that prints often costs nothing
// but a clock read per output.
type silenceWatch struct {
	limit    time.Duration
	last     func() time.Time
	onSilent func()
	mu       sync.Mutex
	timer    *time.Timer
	stopped  bool
}

// watchSilence starts watching; `last` gives the time of the command's latest output
// (its start while it has printed nothing).
func watchSilence(limit time.Duration, last func() time.Time, onSilent func()) *silenceWatch {
	s := &silenceWatch{limit: limit, last: last, onSilent: onSilent}
	s.mu.Lock()
	s.timer = time.AfterFunc(limit, s.check)
	s.mu.Unlock()
	return s
}

func (s *silenceWatch) check() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	left := s.limit - time.Since(s.last())
	if left > 0 {
		s.timer.Reset(left)
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	s.onSilent()
}

// stop ends the watch: after it returns, onSilent is not called unless it had begun.
func (s *silenceWatch) stop() {
	s.mu.Lock()
	s.stopped = true
	s.timer.Stop()
	s.mu.Unlock()
}
