package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// fillConversation stores n delivered messages of project p in one
// transaction, among 10 agents: message i goes to a<i%10> from
// a<(i+1)%10>, so each agent is in a fifth of them.
func fillConversation(b *testing.B, db *DB, p troupe.ProjectID, n int) {
	b.Helper()
	ctx := context.Background()
	text := strings.Repeat("a message of a realistic length. ", 6)
	now := time.Now().UnixNano()
	err := db.write(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO messages (project, to_agent, from_agent, kind, text, request,
			state, reason, turn, redelivered, created_at, done_at) VALUES (?, ?, ?, 'message', ?, '', 'delivered', '', 't', 0, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for i := range n {
			if _, err := st.ExecContext(ctx, string(p), fmt.Sprintf("a%d", i%10), fmt.Sprintf("a%d", (i+1)%10), text, now, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatalf("fill %d messages: %v", n, err)
	}
	// As a daemon's file is between bursts: the WAL checkpointed and
	// reset, not one transaction of 1M rows that every read looks through.
	if _, err := db.w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatalf("checkpoint: %v", err)
	}
}

// convRuntime serves the API's conversation from the store; the API
// calls nothing else of its runtime here.
type convRuntime struct {
	api.Runtime
	db *DB
}

func (r convRuntime) Conversation(ctx context.Context, p troupe.ProjectID, q inbox.Page) ([]troupe.Message, error) {
	return r.db.Inbox().Conversation(ctx, p, q)
}

// BenchmarkConversationNewest lists the newest 50 messages of a project's
// and of one agent's history, through the store and through the API (an
// HTTP GET with the Go client, the cursor probe included), at 10k and 1M
// messages. Each history is written in one transaction first (1M: about
// 10 s). BENCHMARKS.md compares the sizes: the goal is the same cost.
func BenchmarkConversationNewest(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			db := openTest(b, newPath(b))
			reg, err := project.Open(b.Context(), project.Options{Store: project.NewMemStore()})
			if err != nil {
				b.Fatal(err)
			}
			info, err := reg.Add(b.Context(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			fillConversation(b, db, info.ID, n)
			b.Logf("%d messages written in %v", n, time.Since(start).Round(time.Millisecond))
			srv := api.New(api.Options{Registry: reg, Hub: events.New(events.Options{}), Token: "bench-token",
				Runtime: convRuntime{db: db}})
			ts := httptest.NewServer(srv)
			defer ts.Close()
			srv.SetAddr(strings.TrimPrefix(ts.URL, "http://"))
			cl := client.New(ts.URL, "bench-token")

			for _, agent := range []troupe.AgentID{"", "a3"} {
				name := "project"
				if agent != "" {
					name = "agent"
				}
				b.Run("store/"+name, func(b *testing.B) {
					for b.Loop() {
						ms, err := db.Inbox().Conversation(b.Context(), info.ID, inbox.Page{Agent: agent, Newest: true, Limit: 50})
						if err != nil || len(ms) != 50 {
							b.Fatalf("got %d messages, %v", len(ms), err)
						}
					}
				})
				b.Run("api/"+name, func(b *testing.B) {
					for b.Loop() {
						page, err := cl.Conversation(b.Context(), info.ID, agent, 0, 50)
						if err != nil || len(page.Messages) != 50 || page.Before == 0 {
							b.Fatalf("got %d messages before %d, %v", len(page.Messages), page.Before, err)
						}
					}
				})
			}
		})
	}
}
