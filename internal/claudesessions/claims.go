package claudesessions

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Holder is who holds a session id inside troupe: a person's `troupe
// resume` (a process: the claim lasts while it runs) or a team agent's
// session (until released).
type Holder struct {
	Name  string // shown in refusals: "troupe resume (pid 123)", "agent app/architect"
	PID   int    // 0: not tied to a process
	start string // the process's start time, read when claimed
}

// Claims is the one-writer rule inside troupe (C9): at most one holder per
// Claude session id. A claim tied to a process ends when the process does
// (checked like the registry: pid and start time). Safe for concurrent use.
type Claims struct {
	reg *Registry // to read a holder's start time

	mu sync.Mutex // guards m
	m  map[string]claim
}

type claim struct {
	h     Holder
	token string
}

func newClaims(reg *Registry) *Claims { return &Claims{reg: reg, m: map[string]claim{}} }

// holder returns id's current holder, dropping a claim whose process ended.
func (c *Claims) holder(id string) (Holder, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holderLocked(id)
}

func (c *Claims) holderLocked(id string) (Holder, bool) {
	cl, ok := c.m[id]
	if !ok {
		return Holder{}, false
	}
	if cl.h.PID > 0 {
		stat, err := c.reg.readStat(cl.h.PID)
		if err != nil && !os.IsNotExist(err) && err != errNoProcess {
			return cl.h, true // in doubt: held
		}
		start := ""
		if err == nil {
			start, _ = ProcStartTime(stat)
		}
		if err != nil || start != cl.h.start {
			delete(c.m, id)
			return Holder{}, false
		}
	}
	return cl.h, true
}

// take claims id for h unless someone holds it; check runs under the
// claims' lock, after the holder test (the registry's liveness), so that
// the check and the claim are one step. It returns the claim's token.
func (c *Claims) take(id string, h Holder, check func() error) (string, error) {
	if h.PID > 0 {
		stat, err := c.reg.readStat(h.PID)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNoProcess) {
			return "", fmt.Errorf("claim session %s: no process %d runs: %w: give the pid of the process that runs the resume", id, h.PID, troupe.ErrInvalid)
		}
		if err != nil {
			return "", fmt.Errorf("claim session %s: process %d: %w", id, h.PID, err)
		}
		if h.start, err = ProcStartTime(stat); err != nil {
			return "", fmt.Errorf("claim session %s: %w", id, err)
		}
		if h.Name == "" {
			h.Name = "process " + strconv.Itoa(h.PID)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if other, ok := c.holderLocked(id); ok {
		return "", fmt.Errorf("session %s is held inside troupe by %s: %w", id, other.Name, troupe.ErrConflict)
	}
	if check != nil {
		if err := check(); err != nil {
			return "", err
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	c.m[id] = claim{h: h, token: tok}
	return tok, nil
}

// release ends id's claim if token is its token.
func (c *Claims) release(id, token string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.m[id]; ok && cl.token == token {
		delete(c.m, id)
		return true
	}
	return false
}
