// Package chatstoretest is the contract suite of openai.Store: every
// implementation (openai.MemStore, the SQLite store) passes it. It checks
// order, trimming by turn, one conversation kept per agent, and that
// nothing of one RuntimeKey shows under another (C1), a copy of a project
// with the same agent names included.
//
// Concurrency: Run runs its cases one after the other, each on a store of
// its own. Who may import: tests of the stores.
package chatstoretest

import (
	"context"
	"fmt"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine/openai"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Run runs the suite; newStore returns an empty store.
func Run(t *testing.T, newStore func(t *testing.T) openai.Store) {
	ctx := context.Background()
	a := troupe.RuntimeKey{Project: "p1", Agent: "x"}
	b := troupe.RuntimeKey{Project: "p2", Agent: "x"} // a copy of p1: same agent name
	entry := func(turn int64, s string) troupe.ConversationEntry {
		return troupe.ConversationEntry{Turn: turn, Data: []byte(fmt.Sprintf(`{"role":"user","content":%q}`, s))}
	}
	read := func(t *testing.T, s openai.Store, k troupe.RuntimeKey, conv string) string {
		t.Helper()
		es, err := s.ChatHistory(ctx, k, conv)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, e := range es {
			out += fmt.Sprintf("%d:%s ", e.Turn, e.Data)
		}
		return out
	}
	t.Run("OrderAndTrim", func(t *testing.T) {
		s := newStore(t)
		if got := read(t, s, a, "c1"); got != "" {
			t.Fatalf("unknown conversation = %q", got)
		}
		for turn := int64(1); turn <= 3; turn++ {
			if err := s.AppendChat(ctx, a, "c1", []troupe.ConversationEntry{entry(turn, "q"), entry(turn, "a")}); err != nil {
				t.Fatal(err)
			}
		}
		want := `1:{"role":"user","content":"q"} 1:{"role":"user","content":"a"} 2:{"role":"user","content":"q"} 2:{"role":"user","content":"a"} 3:{"role":"user","content":"q"} 3:{"role":"user","content":"a"} `
		if got := read(t, s, a, "c1"); got != want {
			t.Fatalf("conversation = %q\nwant %q", got, want)
		}
		if err := s.TrimChat(ctx, a, "c1", 3); err != nil {
			t.Fatal(err)
		}
		if got := read(t, s, a, "c1"); got != `3:{"role":"user","content":"q"} 3:{"role":"user","content":"a"} ` {
			t.Fatalf("after trimming before turn 3: %q", got)
		}
	})
	t.Run("C1KeysNeverMix", func(t *testing.T) {
		s := newStore(t)
		s.AppendChat(ctx, a, "c1", []troupe.ConversationEntry{entry(1, "from p1")})
		s.AppendChat(ctx, b, "c1", []troupe.ConversationEntry{entry(1, "from p2")})
		if got := read(t, s, a, "c1"); got != `1:{"role":"user","content":"from p1"} ` {
			t.Errorf("p1 reads %q", got)
		}
		s.TrimChat(ctx, b, "c1", 2)
		s.KeepChat(ctx, b, "other")
		if got := read(t, s, a, "c1"); got != `1:{"role":"user","content":"from p1"} ` {
			t.Errorf("p1 after p2's trim and keep: %q", got)
		}
		if got := read(t, s, b, "c1"); got != "" {
			t.Errorf("p2 after its trim: %q", got)
		}
	})
	t.Run("KeepOneConversation", func(t *testing.T) {
		s := newStore(t)
		s.AppendChat(ctx, a, "old", []troupe.ConversationEntry{entry(1, "old")})
		s.AppendChat(ctx, a, "new", []troupe.ConversationEntry{entry(1, "new")})
		if err := s.KeepChat(ctx, a, "new"); err != nil {
			t.Fatal(err)
		}
		if got := read(t, s, a, "old"); got != "" {
			t.Errorf("old conversation kept: %q", got)
		}
		if got := read(t, s, a, "new"); got == "" {
			t.Error("new conversation lost")
		}
	})
}
