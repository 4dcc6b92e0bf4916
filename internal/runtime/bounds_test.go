package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// A message over MaxMessageBytes is refused where it enters, by every
// door (the tools of an agent and the runtime's calls the API makes), with
// an error that names the cap and the way round it; nothing is stored. A
// text of exactly the cap goes in.
func TestAMessageOverTheCapIsRefusedWhereItEnters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{})
		ctx := t.Context()
		r := key(p1, "researcher")
		over := strings.Repeat("x", MaxMessageBytes+1)
		arg := func(k, v string) json.RawMessage {
			b, _ := json.Marshal(map[string]string{"to": "researcher", k: v})
			return b
		}
		tools := h.rt.Tools(key(p1, "lead"))
		doors := map[string]func() error{
			"Send":     func() error { _, err := h.rt.Send(ctx, r, troupe.Person, troupe.KindMessage, over); return err },
			"Ask":      func() error { _, err := h.rt.Ask(ctx, r, troupe.Person, over, time.Second); return err },
			"Delegate": func() error { _, err := h.rt.Delegate(ctx, r, "lead", over, "", 0); return err },
			"Reply":    func() error { return h.rt.Reply(ctx, r, over) },
			"send_message": func() error {
				_, err := tools.Call(ctx, "send_message", arg("text", over))
				return err
			},
			"ask_agent": func() error { _, err := tools.Call(ctx, "ask_agent", arg("question", over)); return err },
			"delegate":  func() error { _, err := tools.Call(ctx, "delegate", arg("task", over)); return err },
		}
		for name, call := range doors {
			err := call()
			if !errors.Is(err, troupe.ErrInvalid) || !strings.Contains(err.Error(), "1 MB") || !strings.Contains(err.Error(), "file") {
				t.Errorf("%s of %d bytes: err = %v, want ErrInvalid naming the 1 MB cap and a file", name, len(over), err)
			}
		}
		if conv, _ := h.store.Conversation(ctx, p1, inbox.Page{}); len(conv) != 0 {
			t.Errorf("after the refusals the conversation holds %d messages, want none", len(conv))
		}
		if _, err := h.rt.Send(ctx, r, "lead", troupe.KindMessage, over[1:]); err != nil {
			t.Errorf("Send of exactly MaxMessageBytes: %v, want it accepted", err)
		}
		synctest.Wait()
	})
}

// A removed project's oversize-message files go with it; another
// project's stay.
func TestARemovedProjectsMessageFilesGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "messages")
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{MessageDir: dir})
		for _, p := range []troupe.ProjectID{p1, "p-other"} {
			if err := os.MkdirAll(filepath.Join(dir, string(p)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, string(p), "7.txt"), []byte("big"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		h.rt.ProjectRemoved(p1)
		if _, err := os.Stat(filepath.Join(dir, string(p1))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the removed project's message files: %v, want them gone", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "p-other", "7.txt")); err != nil {
			t.Errorf("another project's message file: %v, want it kept", err)
		}
	})
}

// Past MaxSessions, an agent with mail waits for a slot in state waiting,
// saying so, without holding its loop (the person's reset goes through);
// a session that ends its turn gives its slot up while someone waits, and
// the waiters are served in order; never more sessions than the bound.
func TestSessionsPastTheBoundWaitForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		teams := staticTeams{p1: {spec("lead", 10*time.Minute), spec("researcher", 10*time.Minute), spec("qa", 10*time.Minute)}}
		h := newHarnessOn(t, teams, Options{MaxSessions: 1})
		ctx := t.Context()
		lead, res, qa := key(p1, "lead"), key(p1, "researcher"), key(p1, "qa")
		send := func(k troupe.RuntimeKey, text string) {
			t.Helper()
			if _, err := h.rt.Send(ctx, k, troupe.Person, troupe.KindMessage, text); err != nil {
				t.Fatal(err)
			}
		}
		send(lead, "silent 1m then done")
		synctest.Wait()
		send(res, "hello")
		synctest.Wait()
		send(qa, "hi")
		synctest.Wait()
		for _, k := range []troupe.RuntimeKey{res, qa} {
			if st, why := h.rt.AgentState(k); st != troupe.StateWaiting || !strings.Contains(why, "waiting for a session slot (1 live") {
				t.Errorf("%s while lead works: %s (%s), want waiting for a session slot", k.Agent, st, why)
			}
		}
		if n := len(h.eng.Specs()); n != 1 {
			t.Fatalf("%d sessions started, want lead's only", n)
		}
		// Its loop is free: the person's reset is served at once.
		if err := h.rt.Reset(ctx, res); err != nil {
			t.Errorf("reset of a waiting agent: %v", err)
		}
		synctest.Wait()
		if st, _ := h.rt.AgentState(res); st != troupe.StateWaiting {
			t.Errorf("after the reset researcher is %s, want waiting again (its mail is queued)", st)
		}
		// Lead's turn ends: its slot goes to researcher, then qa's turn.
		time.Sleep(time.Minute)
		synctest.Wait()
		var order []troupe.AgentID
		for _, s := range h.eng.Specs() {
			order = append(order, s.Agent.Name)
		}
		if fmt.Sprint(order) != "[lead researcher qa]" {
			t.Errorf("sessions started in order %v, want [lead researcher qa]", order)
		}
		for _, k := range []troupe.RuntimeKey{res, qa} {
			if ms, _ := h.store.Conversation(ctx, p1, inbox.Page{Agent: k.Agent}); len(ms) == 0 || ms[0].State != troupe.MsgDelivered {
				t.Errorf("%s's message: %+v, want delivered", k.Agent, ms)
			}
		}
		if st, why := h.rt.AgentState(lead); st != troupe.StateStopped || !strings.Contains(why, "slot") {
			t.Errorf("lead after its turn: %s (%s), want stopped to free a slot", st, why)
		}
		if p := h.eng.Peak(); p != 1 {
			t.Errorf("%d sessions live at once, want at most 1", p)
		}
	})
}

// A turn's final text over MaxMessageBytes answers its ask cut, the cut
// stated, the whole text kept in a file; so does a delegation's result,
// which is a message of the delegator's inbox.
func TestAnAnswerOverTheCapIsCutAndKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "messages")
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{MessageDir: dir})
		ctx := t.Context()
		r := key(p1, "researcher")
		n := MaxMessageBytes + 1000
		whole := strings.Repeat("é", n/2)
		req, err := h.rt.Ask(ctx, r, troupe.Person, fmt.Sprint("big ", n), 0)
		if err != nil || req.State != troupe.ReqAnswered {
			t.Fatalf("ask = %+v, %v; want answered", req, err)
		}
		path := filepath.Join(dir, string(p1), string(req.ID)+".txt")
		if len(req.Answer) > excerptBytes+1024 || !strings.HasPrefix(req.Answer, "[troupe: this answer is 1 MB, more than a message may hold (1 MB)") ||
			!strings.Contains(req.Answer, path) || !utf8.ValidString(req.Answer) {
			t.Errorf("answer: %d bytes starting %.200q; want a notice naming %s and the first 64 KB", len(req.Answer), req.Answer, path)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != whole {
			t.Errorf("the answer's file: %d bytes, %v; want the whole %d", len(b), err, len(whole))
		}
		dreq, err := h.rt.Delegate(ctx, r, "lead", fmt.Sprint("big ", n), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		conv, _ := h.store.Conversation(ctx, p1, inbox.Page{Agent: "lead"})
		for _, m := range conv {
			if m.Request == dreq.ID && m.Kind == troupe.KindResult {
				if full, _ := h.store.Text(ctx, p1, m.ID, 0); full.Size > MaxMessageBytes {
					t.Errorf("the delegation's result message is %d bytes, over the cap", full.Size)
				}
				return
			}
		}
		t.Errorf("no result message of the delegation in lead's conversation")
	})
}

// Waiting for a session slot is no activity: an ask to an agent that waits
// a whole turn_timeout for one ends no_reply, saying why (the slots may
// all be held by agents that wait on it).
func TestAnAskToAnAgentWaitingForASlotEndsSayingSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The lead holds the one slot, silent, past the researcher's window
		// (its own turn_timeout is longer: were both 10 min, the lead's cut
		// and the ask's end would fall on the same instant, in either order).
		h := newHarnessOn(t, staticTeams{p1: {spec("lead", 2*time.Hour), spec("researcher", 10*time.Minute)}}, Options{MaxSessions: 1})
		ctx := t.Context()
		if _, err := h.rt.Send(ctx, key(p1, "lead"), troupe.Person, troupe.KindMessage, "silent 1h then done"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		start := time.Now()
		req, err := h.rt.Ask(ctx, key(p1, "researcher"), troupe.Person, "are you there?", 0)
		if err != nil || req.State != troupe.ReqNoReply || !strings.Contains(req.Error, "waiting for a session slot") {
			t.Fatalf("ask = %+v, %v; want no_reply naming the slot", req, err)
		}
		if d := time.Since(start); d != 10*time.Minute {
			t.Errorf("the ask ended after %v, want its target's turn_timeout of 10m", d)
		}
	})
}
