package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ActivityMeter keeps a session's activity token (C3) for an engine: Bump
// it on every output of any kind, Load it for Session.Activity. The zero
// value is ready; it is safe for concurrent use.
type ActivityMeter struct {
	mu sync.Mutex // guards a
	a  Activity
}

// Bump advances the token and sets its time to now.
func (m *ActivityMeter) Bump() {
	now := time.Now()
	m.mu.Lock()
	m.a.Count++
	m.a.At = now
	m.mu.Unlock()
}

// Load returns the token.
func (m *ActivityMeter) Load() Activity {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.a
}

// Check says what is wrong with a turn's input before an engine sends it:
// it needs a turn id and at least one message.
func (in Input) Check() error {
	if in.Turn == "" {
		return errors.New("send turn: empty turn id")
	}
	if len(in.Messages) == 0 {
		return fmt.Errorf("send turn %s: no messages", in.Turn)
	}
	return nil
}
