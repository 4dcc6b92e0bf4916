package sqlite

import (
	"context"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine/openai"
	"github.com/troupe-dev/troupe/internal/engine/openai/chatstoretest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestChatStoreContract: the openai conversations pass the store suite.
func TestChatStoreContract(t *testing.T) {
	chatstoretest.Run(t, func(t *testing.T) openai.Store { return openTest(t, newPath(t)).Chats() })
}

// TestChatSurvivesReopen: a conversation is there after the file is
// opened again (a daemon restart).
func TestChatSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := newPath(t)
	k := troupe.RuntimeKey{Project: "p1", Agent: "x"}
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Chats().AppendChat(ctx, k, "c1", []troupe.ConversationEntry{{Turn: 1, Data: []byte(`{"role":"user","content":"hi"}`)}}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openTest(t, path)
	es, err := db.Chats().ChatHistory(ctx, k, "c1")
	if err != nil || len(es) != 1 || es[0].Turn != 1 || string(es[0].Data) != `{"role":"user","content":"hi"}` {
		t.Fatalf("after reopen: %+v, %v", es, err)
	}
}

// TestChatGoesWithItsSession: forgetting an agent's session (troupe reset)
// or a project's (its removal) forgets the openai conversations too, and
// only theirs.
func TestChatGoesWithItsSession(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, newPath(t))
	a, b, c := troupe.RuntimeKey{Project: "p1", Agent: "x"}, troupe.RuntimeKey{Project: "p1", Agent: "y"}, troupe.RuntimeKey{Project: "p2", Agent: "x"}
	for _, k := range []troupe.RuntimeKey{a, b, c} {
		if err := db.Chats().AppendChat(ctx, k, "c", []troupe.ConversationEntry{{Turn: 1, Data: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(k troupe.RuntimeKey) int {
		es, err := db.Chats().ChatHistory(ctx, k, "c")
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	if err := db.Sessions().ClearSessionID(ctx, a); err != nil {
		t.Fatal(err)
	}
	if count(a) != 0 || count(b) != 1 || count(c) != 1 {
		t.Errorf("after reset of p1/x: %d %d %d", count(a), count(b), count(c))
	}
	if err := db.Sessions().ClearProjectSessions(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if count(b) != 0 || count(c) != 1 {
		t.Errorf("after removal of p1: %d %d", count(b), count(c))
	}
}
