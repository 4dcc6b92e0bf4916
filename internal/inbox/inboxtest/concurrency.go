package inboxtest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// testConcurrentAppends appends from many goroutines to four keys in two
// projects: no message is lost, ids are unique, and each key's inbox keeps
// every goroutine's messages in the order it appended them.
func testConcurrentAppends(t *testing.T, s inbox.Store) {
	keys := []troupe.RuntimeKey{key(p1, "dev"), key(p1, "lead"), key(p2, "dev"), key(p2, "lead")}
	const goroutines, each = 16, 24
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				k := keys[(g+i)%len(keys)]
				m := msg(k, troupe.AgentID(fmt.Sprintf("g%02d", g)), fmt.Sprintf("%d", i))
				if _, err := s.Append(t.Context(), m); err != nil {
					errs <- fmt.Errorf("goroutine %d append %d: %w", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	seen := map[int64]bool{}
	total := 0
	for _, k := range keys {
		last := map[troupe.RuntimeKey]int{} // the sender's last number in k's inbox
		var prev int64
		for _, m := range mustPending(t, s, k) {
			total++
			if seen[m.ID] {
				t.Errorf("id %d given to two messages", m.ID)
			}
			seen[m.ID] = true
			if m.ID <= prev {
				t.Errorf("Pending(%s): id %d after %d, want ID order", k, m.ID, prev)
			}
			prev = m.ID
			var i int
			if _, err := fmt.Sscan(m.Text, &i); err != nil {
				t.Fatalf("message text %q: %v", m.Text, err)
			}
			from := troupe.RuntimeKey{Project: m.Project, Agent: m.From}
			if l, ok := last[from]; ok && i <= l {
				t.Errorf("Pending(%s): %s's message %d after its %d, want the order it appended them", k, m.From, i, l)
			}
			last[from] = i
		}
	}
	if total != goroutines*each {
		t.Errorf("%d messages pending in all, want %d", total, goroutines*each)
	}
	n := len(mustConversation(t, s, p1)) + len(mustConversation(t, s, p2))
	if n != goroutines*each {
		t.Errorf("the two conversations hold %d messages, want %d", n, goroutines*each)
	}
}

// testConcurrentFinishRequest races the end of one request from several
// goroutines (the turn's end, the watchdog, ExpireProject's neighbour):
// exactly one ends it and exactly one outcome is recorded.
func testConcurrentFinishRequest(t *testing.T, s inbox.Store) {
	r, m := ask("r1", key(p1, "dev"), "lead", "q")
	mustAsk(t, s, r, m)
	if _, err := s.Detach(t.Context(), "r1"); err != nil {
		t.Fatal(err)
	}
	const goroutines = 8
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		wins   []troupe.Request
		queued int
	)
	for g := range goroutines {
		wg.Go(func() {
			state := []troupe.RequestState{troupe.ReqAnswered, troupe.ReqFailed, troupe.ReqNoReply}[g%3]
			r, q, done, err := s.FinishRequest(t.Context(), "r1", state, fmt.Sprint("answer ", g), fmt.Sprint("error ", g))
			if err != nil {
				t.Errorf("goroutine %d: FinishRequest: %v", g, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if done {
				wins = append(wins, r)
			}
			if q != nil {
				queued++
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 || queued != 1 {
		t.Fatalf("%d FinishRequest calls ended the request and %d queued an outcome, want exactly one of each", len(wins), queued)
	}
	checkReq(t, "Request after the race", mustRequest(t, s, p1, "r1"), wins[0])
	outcomes := 0
	for _, m := range mustConversation(t, s, p1) {
		if m.Kind == troupe.KindReply {
			outcomes++
		}
	}
	if outcomes != 1 {
		t.Errorf("the conversation holds %d outcomes of r1, want 1", outcomes)
	}
}
