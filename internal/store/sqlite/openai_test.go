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
	chatstoretest.Run(t, func(t *testing.T) openai.Store { return openTest(t, newPath(t)) })
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
	if err := db.AppendChat(ctx, k, "c1", []troupe.ConversationEntry{{Turn: 1, Data: []byte(`{"role":"user","content":"hi"}`)}}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openTest(t, path)
	es, err := db.ChatHistory(ctx, k, "c1")
	if err != nil || len(es) != 1 || es[0].Turn != 1 || string(es[0].Data) != `{"role":"user","content":"hi"}` {
		t.Fatalf("after reopen: %+v, %v", es, err)
	}
}
