package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// claimLog is a ClaimSession that records claims and releases and refuses
// the ids in busy.
type claimLog struct {
	mu     sync.Mutex
	busy   map[string]bool
	events []string
}

func (c *claimLog) claim(_ context.Context, k troupe.RuntimeKey, _ troupe.Engine, id string) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy[id] {
		return nil, fmt.Errorf("conversation %s is live elsewhere: %w", id, troupe.ErrConflict)
	}
	c.events = append(c.events, "claim "+id)
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.events = append(c.events, "release "+id)
	}, nil
}

func (c *claimLog) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.events, ", ")
}

// TestC9_ResumedConversationIsClaimed: a conversation handed to an agent
// (AdoptSession) is what its next session resumes, under a claim held
// until the session ends; a conversation someone else holds is not
// resumed (the turn fails with why); no hand-off while a session runs.
func TestC9_ResumedConversationIsClaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &claimLog{busy: map[string]bool{"taken": true}}
		h := newHarnessOn(t, twoAgents(0), Options{ClaimSession: c.claim})
		ctx := t.Context()
		k := key(p1, "lead")
		if err := h.rt.AdoptSession(ctx, k, troupe.EngineFake, "conv-9"); err != nil {
			t.Fatal(err)
		}
		if req, err := h.rt.Ask(ctx, k, troupe.Person, "answer one", 0); err != nil || req.Answer != "one" {
			t.Fatalf("ask = %+v, %v", req, err)
		}
		if specs := h.eng.Specs(); len(specs) != 1 || specs[0].Resume != "conv-9" {
			t.Fatalf("resume %q, want conv-9", resumes(specs))
		}
		if got := c.log(); got != "claim conv-9" {
			t.Errorf("claims %q while the session runs", got)
		}
		if err := h.rt.AdoptSession(ctx, k, troupe.EngineFake, "conv-10"); !errors.Is(err, troupe.ErrConflict) {
			t.Errorf("hand-off while a session runs: %v, want a conflict", err)
		}
		if err := h.rt.Reset(ctx, k); err != nil {
			t.Fatal(err)
		}
		if got := c.log(); got != "claim conv-9, release conv-9" {
			t.Errorf("claims %q after the session ended", got)
		}
		if err := h.rt.AdoptSession(ctx, k, troupe.EngineFake, "taken"); err != nil {
			t.Fatal(err)
		}
		req, err := h.rt.Ask(ctx, k, troupe.Person, "answer two", 0)
		if err != nil || req.State != troupe.ReqFailed || !strings.Contains(req.Error, "live elsewhere") {
			t.Errorf("ask resuming a held conversation = %+v, %v; want failed saying why", req, err)
		}
		if n := len(h.eng.Specs()); n != 1 {
			t.Errorf("%d sessions started, want none for the held conversation", n-1)
		}
	})
}
