package inboxtest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func testConversation(t *testing.T, s inbox.Store) {
	ctx := t.Context()
	dev, lead, qa := key(p1, "dev"), key(p1, "lead"), key(p1, "qa")
	person := key(p1, troupe.Person)
	// The comments give each p-one message's index in one.
	all := mustAppend(t, s,
		msg(dev, "lead", "lead to dev"), // 0
		msg(key(p2, "dev"), "lead", "p-two lead to dev"),
		msg(lead, "dev", "dev to lead"),        // 1
		msg(qa, troupe.Person, "person to qa"), // 2
		msg(key(p2, "qa"), "dev", "p-two dev to qa"),
		msg(dev, "qa", "qa to dev"),       // 3
		msg(person, "qa", "qa to person"), // 4
		msg(qa, "lead", "lead to qa"),     // 5
	)
	one := []troupe.Message{all[0], all[2], all[3], all[5], all[6], all[7]}
	// Every state is part of the conversation.
	mustStart(t, s, dev, "t", all[0])
	mustFinishTurn(t, s, dev, "t", troupe.MsgDelivered, "")
	if _, err := s.Expire(ctx, lead, "gone"); err != nil {
		t.Fatal(err)
	}
	for i, m := range one {
		one[i] = stored(t, s, p1, m.ID)
	}

	for _, tc := range []struct {
		name string
		q    inbox.Page
		want []troupe.Message
	}{
		{"whole project", inbox.Page{}, one},
		{"from or to dev", inbox.Page{Agent: "dev"}, []troupe.Message{one[0], one[1], one[3]}},
		{"from or to the person", inbox.Page{Agent: troupe.Person}, []troupe.Message{one[2], one[4]}},
		{"from or to an agent with no messages", inbox.Page{Agent: "nobody"}, nil},
		{"after the second", inbox.Page{After: one[1].ID}, one[2:]},
		{"after an id of the other project", inbox.Page{After: all[4].ID}, one[3:]},
		{"after the last", inbox.Page{After: one[5].ID}, nil},
		{"limit", inbox.Page{Limit: 2}, one[:2]},
		{"limit larger than the rest", inbox.Page{After: one[3].ID, Limit: 10}, one[4:]},
		{"negative limit is the most", inbox.Page{Limit: -1}, one},
		{"limit above the most is the most", inbox.Page{Limit: inbox.MaxPage + 1}, one},
		{"agent, after and limit", inbox.Page{Agent: "qa", After: one[2].ID, Limit: 2}, []troupe.Message{one[3], one[4]}},
		{"newest", inbox.Page{Newest: true, Limit: 2}, one[4:]},
		{"newest of all", inbox.Page{Newest: true}, one},
		{"newest before", inbox.Page{Newest: true, Before: one[3].ID, Limit: 2}, one[1:3]},
		{"newest before an id of the other project", inbox.Page{Newest: true, Before: all[4].ID, Limit: 2}, one[1:3]},
		{"newest before the first", inbox.Page{Newest: true, Before: one[0].ID}, nil},
		{"newest between after and before", inbox.Page{Newest: true, After: one[0].ID, Before: one[4].ID, Limit: 10}, one[1:4]},
		{"oldest between after and before", inbox.Page{After: one[0].ID, Before: one[4].ID, Limit: 2}, one[1:3]},
		{"newest from or to qa", inbox.Page{Agent: "qa", Newest: true, Limit: 2}, []troupe.Message{one[4], one[5]}},
		{"newest from or to qa before", inbox.Page{Agent: "qa", Newest: true, Before: one[4].ID, Limit: 2}, []troupe.Message{one[2], one[3]}},
		{"newest from or to dev", inbox.Page{Agent: "dev", Newest: true, Limit: 2}, []troupe.Message{one[1], one[3]}},
		{"before beyond the last", inbox.Page{Newest: true, Before: one[5].ID + 100}, one},
	} {
		got, err := s.Conversation(ctx, p1, tc.q)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkMsgs(t, fmt.Sprintf("Conversation %s (%+v)", tc.name, tc.q), got, tc.want)
	}
	if got, err := s.Conversation(ctx, "p-unknown", inbox.Page{}); err != nil || len(got) != 0 {
		t.Errorf("Conversation of an unknown project = %q, %v; want none", texts(got), err)
	}
}

// testConversationPages: paging back from the newest end with the first
// ID of each page as the next Before, and forward with the last as the
// next After, reads every message of the window once, for the project
// and for one agent (whose messages to itself count once).
func testConversationPages(t *testing.T, s inbox.Store) {
	dev, lead := key(p1, "dev"), key(p1, "lead")
	var ms []troupe.Message
	for i := range 11 {
		ms = append(ms, msg(dev, "lead", fmt.Sprintf("to dev %d", i)), msg(key(p2, "dev"), "lead", "other project"),
			msg(lead, "qa", fmt.Sprintf("qa to lead %d", i)))
		if i%4 == 0 {
			ms = append(ms, msg(dev, "dev", fmt.Sprintf("dev to itself %d", i)))
		}
	}
	all := mustAppend(t, s, ms...)
	var proj, ofDev []troupe.Message
	for _, m := range all {
		if m.Project == p1 {
			proj = append(proj, m)
			if m.To == "dev" || m.From == "dev" {
				ofDev = append(ofDev, m)
			}
		}
	}
	for _, tc := range []struct {
		agent troupe.AgentID
		want  []troupe.Message
	}{{"", proj}, {"dev", ofDev}, {"qa", nil}} {
		if tc.agent == "qa" {
			tc.want = slices.DeleteFunc(slices.Clone(proj), func(m troupe.Message) bool { return m.From != "qa" })
		}
		for _, size := range []int{1, 3, len(tc.want), len(tc.want) + 1} {
			what := fmt.Sprintf("pages of %d of %q", size, tc.agent)
			var back []troupe.Message
			q := inbox.Page{Agent: tc.agent, Limit: size, Newest: true}
			for n := 0; ; n++ {
				got, err := s.Conversation(t.Context(), p1, q)
				if err != nil || n > len(tc.want) {
					t.Fatalf("%s back: page %d: %v (or too many pages)", what, n, err)
				}
				if len(got) > size {
					t.Fatalf("%s back: page %d has %d messages", what, n, len(got))
				}
				back = append(slices.Clone(got), back...)
				if len(got) < size {
					break
				}
				q.Before = got[0].ID
			}
			checkMsgs(t, what+" back from the newest", back, tc.want)

			var fwd []troupe.Message
			q = inbox.Page{Agent: tc.agent, Limit: size}
			for n := 0; ; n++ {
				got, err := s.Conversation(t.Context(), p1, q)
				if err != nil || n > len(tc.want) {
					t.Fatalf("%s forward: page %d: %v (or too many pages)", what, n, err)
				}
				fwd = append(fwd, got...)
				if len(got) < size {
					break
				}
				q.After = got[len(got)-1].ID
			}
			checkMsgs(t, what+" forward from the oldest", fwd, tc.want)
		}
	}
}
