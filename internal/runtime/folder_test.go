package runtime

import (
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// folders is a Stat for Options: every folder exists but those gone.
type folders struct {
	mu    sync.Mutex // guards the fields below
	gone  bool       // every folder is gone
	stats int        // calls while gone
}

func (f *folders) stat(name string) (fs.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		f.stats++
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return nil, nil
}

func (f *folders) set(gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gone = gone
}

func (f *folders) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// goneFolder starts a harness whose folders are all gone and sends the
// researcher text, which stays queued.
func goneFolder(t *testing.T, text string) (*harness, *folders, troupe.RuntimeKey, troupe.Message) {
	t.Helper()
	f := &folders{gone: true}
	h := newHarnessOn(t, twoAgents(10*time.Minute), Options{Stat: f.stat})
	k := key(p1, "researcher")
	m, err := h.rt.Send(t.Context(), k, troupe.Person, troupe.KindMessage, text)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return h, f, k, m
}

// TestVanishedFolderBlocksThenRetries: the project's folder is gone when a
// message arrives: the agent is blocked, saying why, its mail stays queued,
// troupe looks again on a backoff (not in a loop); when the folder is back
// the message is delivered.
func TestVanishedFolderBlocksThenRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f, k, m := goneFolder(t, "hello")
		st, why := h.rt.AgentState(k)
		if st != troupe.StateBlocked || !strings.Contains(why, "/nonexistent/p1") || !strings.Contains(why, "gone") {
			t.Fatalf("agent = %s (%s), want blocked naming the folder", st, why)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		// 1+2+4+…+32 s, then every minute: 7 + 8 in 10 min, plus the first look.
		if n := f.calls(); n > 20 {
			t.Fatalf("%d looks at the folder in 10 min: a tight loop", n)
		}
		if conv, _ := h.store.Conversation(t.Context(), p1, inbox.Page{Agent: "researcher"}); conv[0].State != troupe.MsgQueued {
			t.Fatalf("message while the folder is gone = %s (%s), want queued", conv[0].State, conv[0].Reason)
		}
		f.set(false)
		time.Sleep(maxRetry)
		synctest.Wait()
		conv, _ := h.store.Conversation(t.Context(), p1, inbox.Page{Agent: "researcher"})
		if conv[0].ID != m.ID || conv[0].State != troupe.MsgDelivered {
			t.Fatalf("message after the folder came back = %+v, want delivered", conv[0])
		}
		if st, _ := h.rt.AgentState(k); st != troupe.StateIdle {
			t.Fatalf("agent after its turn = %s, want idle", st)
		}
	})
}

// TestVanishedFolderNewMailLooksAtOnce: new mail makes the blocked actor
// look again without waiting for its timer.
func TestVanishedFolderNewMailLooksAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f, k, _ := goneFolder(t, "one")
		time.Sleep(5 * time.Minute) // the backoff is at a minute now
		synctest.Wait()
		f.set(false)
		start := time.Now()
		req, err := h.rt.Ask(t.Context(), k, troupe.Person, "answer two", 0)
		if err != nil || req.Answer != "two" {
			t.Fatalf("ask once the folder is back = %+v, %v", req, err)
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("answered after %v, want at once", took)
		}
	})
}

// TestVanishedFolderMailExpiresWhenTheProjectIsRemoved: mail waiting for a
// folder is never stuck: removing the project expires it (C5).
func TestVanishedFolderMailExpiresWhenTheProjectIsRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, _, _ := goneFolder(t, "hello")
		h.rt.ProjectRemoved(p1)
		synctest.Wait()
		conv, _ := h.store.Conversation(t.Context(), p1, inbox.Page{Agent: "researcher"})
		if conv[0].State != troupe.MsgExpired {
			t.Fatalf("message of a removed project = %s, want expired", conv[0].State)
		}
	})
}
