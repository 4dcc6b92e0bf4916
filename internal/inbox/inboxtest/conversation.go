package inboxtest

import (
	"fmt"
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
		name  string
		agent troupe.AgentID
		after int64
		limit int
		want  []troupe.Message
	}{
		{"whole project", "", 0, 0, one},
		{"from or to dev", "dev", 0, 0, []troupe.Message{one[0], one[1], one[3]}},
		{"from or to the person", troupe.Person, 0, 0, []troupe.Message{one[2], one[4]}},
		{"from or to an agent with no messages", "nobody", 0, 0, nil},
		{"after the second", "", one[1].ID, 0, one[2:]},
		{"after an id of the other project", "", all[4].ID, 0, one[3:]},
		{"after the last", "", one[5].ID, 0, nil},
		{"limit", "", 0, 2, one[:2]},
		{"limit larger than the rest", "", one[3].ID, 10, one[4:]},
		{"negative limit is none", "", 0, -1, one},
		{"agent, after and limit", "qa", one[2].ID, 2, []troupe.Message{one[3], one[4]}},
	} {
		got, err := s.Conversation(ctx, p1, tc.agent, tc.after, tc.limit)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkMsgs(t, fmt.Sprintf("Conversation %s (agent %q after %d limit %d)", tc.name, tc.agent, tc.after, tc.limit), got, tc.want)
	}
	if got, err := s.Conversation(ctx, "p-unknown", "", 0, 0); err != nil || len(got) != 0 {
		t.Errorf("Conversation of an unknown project = %q, %v; want none", texts(got), err)
	}
}
