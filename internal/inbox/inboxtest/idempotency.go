package inboxtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func mustAppendOnce(t *testing.T, s inbox.Store, key string, m troupe.Message) (troupe.Message, bool) {
	t.Helper()
	got, added, err := s.AppendOnce(t.Context(), key, m)
	if err != nil {
		t.Fatalf("AppendOnce(%q, %s %q): %v", key, m.Key(), m.Text, err)
	}
	return got, added
}

// testAppendOnce: the first append with a key stores its message; a later
// one with the same key stores nothing and returns the first message as it
// is now, whatever message it carried.
func testAppendOnce(t *testing.T, s inbox.Store) {
	dev, lead := key(p1, "dev"), key(p1, "lead")
	m := troupe.Message{Project: p1, To: "dev", From: "@task", Kind: troupe.KindTask, Text: "task a1 exited 0", CreatedAt: base}
	first, added := mustAppendOnce(t, s, "task:a1", m)
	if !added {
		t.Fatal("first AppendOnce: added = false, want true")
	}
	want := m
	want.ID, want.State = first.ID, troupe.MsgQueued
	checkMsg(t, "first AppendOnce", first, want)

	again, added := mustAppendOnce(t, s, "task:a1", msg(lead, "qa", "another message, same key"))
	if added {
		t.Error("second AppendOnce with the same key: added = true, want false")
	}
	checkMsg(t, "second AppendOnce with the same key", again, first)
	checkMsgs(t, "Pending(dev)", mustPending(t, s, dev), []troupe.Message{first})
	checkMsgs(t, "Pending(lead): the duplicate's recipient", mustPending(t, s, lead), nil)
	checkMsgs(t, "Conversation(p-one)", mustConversation(t, s, p1), []troupe.Message{first})

	// Another key is another message, the same text notwithstanding.
	second, added := mustAppendOnce(t, s, "task:a2", m)
	if !added || second.ID <= first.ID {
		t.Errorf("AppendOnce with another key = %+v, added %v; want a new message after %d", second, added, first.ID)
	}

	// The first message moved on: a repeat returns it as it is now.
	mustStart(t, s, dev, "t1", first)
	again, added = mustAppendOnce(t, s, "task:a1", m)
	want = first
	want.State, want.Turn = troupe.MsgInTurn, "t1"
	if added {
		t.Error("AppendOnce after the message went into a turn: added = true, want false")
	}
	checkMsg(t, "AppendOnce after the message went into a turn", again, want)
	checkMsgs(t, "Pending(dev) after the repeat", mustPending(t, s, dev), []troupe.Message{second})
}

// testAppendOnceScopedByProject: a key is unique within its project; a
// copied project (C1) with the same key gets its own message.
func testAppendOnceScopedByProject(t *testing.T, s inbox.Store) {
	one, added1 := mustAppendOnce(t, s, "task:a1", msg(key(p1, "dev"), "@task", "one"))
	two, added2 := mustAppendOnce(t, s, "task:a1", msg(key(p2, "dev"), "@task", "two"))
	if !added1 || !added2 || one.ID == two.ID {
		t.Errorf("the same key in two projects: %d added %v, %d added %v; want two messages", one.ID, added1, two.ID, added2)
	}
	checkMsgs(t, "Conversation(p-one)", mustConversation(t, s, p1), []troupe.Message{one})
	checkMsgs(t, "Conversation(p-two)", mustConversation(t, s, p2), []troupe.Message{two})
}

// testAppendOnceInvalid: a refused append stores nothing and leaves its
// key free.
func testAppendOnceInvalid(t *testing.T, s inbox.Store) {
	for _, tc := range []struct {
		key string
		m   troupe.Message
	}{
		{"", msg(key(p1, "dev"), "@task", "no key")},
		{"k", troupe.Message{Project: p1, From: "@task", Kind: troupe.KindTask, Text: "no recipient"}},
		{"k", troupe.Message{To: "dev", From: "@task", Kind: troupe.KindTask, Text: "no project"}},
	} {
		if got, added, err := s.AppendOnce(t.Context(), tc.key, tc.m); !errors.Is(err, troupe.ErrInvalid) || added {
			t.Errorf("AppendOnce(%q, %q) = %+v, added %v, %v; want troupe.ErrInvalid", tc.key, tc.m.Text, got, added, err)
		}
	}
	checkMsgs(t, "Conversation(p-one) after refused appends", mustConversation(t, s, p1), nil)
	if _, added := mustAppendOnce(t, s, "k", msg(key(p1, "dev"), "@task", "valid")); !added {
		t.Error("AppendOnce with a key only a refused append used: added = false, want true")
	}
}

// testConcurrentAppendOnce races appends with one key, among plain appends
// (which may share their transactions): exactly one stores its message,
// and every call returns that one.
func testConcurrentAppendOnce(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	const racers, plain = 16, 16
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		ids   = map[int64]int{}
		added int
	)
	for g := range racers {
		wg.Go(func() {
			m, ok, err := s.AppendOnce(t.Context(), "task:race", msg(k, "@task", fmt.Sprint("racer ", g)))
			if err != nil {
				t.Errorf("racer %d: AppendOnce: %v", g, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[m.ID]++
			if ok {
				added++
			}
		})
	}
	for g := range plain {
		wg.Go(func() {
			if _, err := s.Append(t.Context(), msg(k, "lead", fmt.Sprint("plain ", g))); err != nil {
				t.Errorf("plain %d: Append: %v", g, err)
			}
		})
	}
	wg.Wait()
	if added != 1 || len(ids) != 1 {
		t.Fatalf("%d racers added a message, and they returned ids %v; want exactly one added, one id", added, ids)
	}
	keyed := 0
	for _, m := range mustPending(t, s, k) {
		if m.From == "@task" {
			keyed++
			if ids[m.ID] != racers {
				t.Errorf("stored keyed message %d, but the racers returned %v", m.ID, ids)
			}
		}
	}
	if n := len(mustPending(t, s, k)); keyed != 1 || n != plain+1 {
		t.Errorf("Pending(dev) holds %d keyed and %d messages in all, want 1 and %d", keyed, n, plain+1)
	}
}
