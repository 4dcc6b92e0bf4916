package runtime

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
			"Delegate": func() error { _, err := h.rt.Delegate(ctx, r, "lead", over); return err },
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
