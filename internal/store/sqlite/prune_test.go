package sqlite

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestPruneAppliesTheRetention: of a registered project, ended messages go
// past the age, the count and the bytes, the newest kept, open mail and a
// pending request's message always kept; a removed project's messages
// and requests all go.
func TestPruneAppliesTheRetention(t *testing.T) {
	db := openTest(t, newPath(t))
	ctx := t.Context()
	now := time.Now().UTC()
	add := func(p troupe.ProjectID, to troupe.AgentID, text string, at time.Time) troupe.Message {
		t.Helper()
		m, err := db.Inbox().Append(ctx, troupe.Message{Project: p, To: to, From: "dev", Kind: troupe.KindMessage, Text: text, CreatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ids := func(p troupe.ProjectID) []int64 {
		ms, err := db.Inbox().Conversation(ctx, p, inbox.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	// pa: an old ended message, an old queued one, an old pending ask,
	// then 20 ended ones.
	old := now.Add(-40 * 24 * time.Hour)
	aged := add("pa", troupe.Person, "aged", old)
	queued := add("pa", "lead", "queued", old)
	ask, err := db.Inbox().Ask(ctx, troupe.Request{ID: "r-pending", Project: "pa", From: "lead", To: "dev", Kind: troupe.KindAsk, Question: "q", CreatedAt: old},
		troupe.Message{Project: "pa", To: "dev", From: "lead", Kind: troupe.KindAsk, Text: "q", Request: "r-pending", CreatedAt: old})
	if err != nil {
		t.Fatal(err)
	}
	var recent []int64
	for range 20 {
		recent = append(recent, add("pa", troupe.Person, "recent", now).ID)
	}
	// pc: five texts of 100 bytes.
	var pc []int64
	for range 5 {
		pc = append(pc, add("pc", troupe.Person, strings.Repeat("x", 100), now).ID)
	}
	// pb is removed: its messages and its answered request go.
	add("pb", troupe.Person, "gone", now.Add(-time.Minute))
	if _, err := db.Inbox().Ask(ctx, troupe.Request{ID: "r-pb", Project: "pb", From: troupe.Person, To: "dev", Kind: troupe.KindAsk, Question: "q"},
		troupe.Message{Project: "pb", To: "dev", From: troupe.Person, Kind: troupe.KindAsk, Text: "q", Request: "r-pb"}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := db.Inbox().FinishRequest(ctx, "r-pb", troupe.ReqFailed, "", "project removed"); err != nil {
		t.Fatal(err)
	}

	pass := time.Now().UTC() // after every message above
	n, err := db.Prune(ctx, []troupe.ProjectID{"pa", "pc"}, inbox.Retention{Age: 30 * 24 * time.Hour, Messages: 12, Bytes: 250}, pass)
	if err != nil {
		t.Fatal(err)
	}
	// pa keeps its newest 12 rows: 12 of the recent; the queued one and
	// the pending ask stay whatever their age and rank.
	wantPA := slices.Concat([]int64{queued.ID, ask.ID}, recent[len(recent)-12:])
	if got := ids("pa"); !slices.Equal(got, wantPA) {
		t.Errorf("pa after Prune = %v, want %v (not the aged %d)", got, wantPA, aged.ID)
	}
	if got := ids("pc"); !slices.Equal(got, pc[3:]) {
		t.Errorf("pc after Prune = %v, want its newest 200 bytes %v", got, pc[3:])
	}
	if got := ids("pb"); len(got) != 0 {
		t.Errorf("removed pb after Prune holds %v, want nothing", got)
	}
	if _, err := db.Inbox().Request(ctx, "pb", "r-pb"); err == nil {
		t.Errorf("removed pb's request is still there")
	}
	if r, err := db.Inbox().Request(ctx, "pa", "r-pending"); err != nil || r.State != troupe.ReqPending {
		t.Errorf("pa's pending request = %+v, %v; want it kept", r, err)
	}
	if want := int64(1 + 8 + 3 + 3); n != want { // pb: its message, its ask and the ask's outcome
		t.Errorf("Prune deleted %d messages, want %d", n, want)
	}
	// A project registered after the pass began keeps what it got since.
	late := add("pd", troupe.Person, "new", pass.Add(time.Second))
	if _, err := db.Prune(ctx, nil, inbox.DefaultRetention, pass); err != nil {
		t.Fatal(err)
	}
	if got := ids("pd"); !slices.Equal(got, []int64{late.ID}) {
		t.Errorf("pd after a pass that began before it = %v, want %v", got, []int64{late.ID})
	}
}
