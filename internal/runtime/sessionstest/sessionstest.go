// Package sessionstest is the contract suite of runtime.Sessions, the store
// of each agent's engine conversation id. Every implementation (the
// runtime's MemSessions, the SQLite store) runs it.
//
// It imports only the standard library and internal/troupe: Store below
// has runtime.Sessions's method set, so a store can be tested without
// depending on the runtime (internal/store/sqlite must not). Only tests
// import it.
package sessionstest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Store is runtime.Sessions.
type Store interface {
	SessionID(ctx context.Context, k troupe.RuntimeKey) (troupe.Engine, string, error)
	SetSessionID(ctx context.Context, k troupe.RuntimeKey, eng troupe.Engine, id string) error
	ClearSessionID(ctx context.Context, k troupe.RuntimeKey) error
	ClearProjectSessions(ctx context.Context, p troupe.ProjectID) error
}

// Run runs the contract against the stores open returns: a new, empty
// store per subtest (open registers its cleanup with t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) Store) {
	t.Helper()
	t.Run("NoneIsEmpty", func(t *testing.T) { testNone(t, open(t)) })
	t.Run("SetGetReplace", func(t *testing.T) { testSetGetReplace(t, open(t)) })
	t.Run("EmptyIDRefused", func(t *testing.T) { testEmptyID(t, open(t)) })
	t.Run("C1_CopiedProjectsKeepTheirOwn", func(t *testing.T) { testCopiedProjects(t, open(t)) })
	t.Run("Clear", func(t *testing.T) { testClear(t, open(t)) })
	t.Run("ClearProject", func(t *testing.T) { testClearProject(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
}

func key(p, a string) troupe.RuntimeKey {
	return troupe.RuntimeKey{Project: troupe.ProjectID(p), Agent: troupe.AgentID(a)}
}

func want(t *testing.T, s Store, k troupe.RuntimeKey, eng troupe.Engine, id string) {
	t.Helper()
	gotEng, gotID, err := s.SessionID(t.Context(), k)
	if err != nil || gotEng != eng || gotID != id {
		t.Errorf("SessionID(%v) = %q, %q, %v; want %q, %q, nil", k, gotEng, gotID, err, eng, id)
	}
}

func set(t *testing.T, s Store, k troupe.RuntimeKey, eng troupe.Engine, id string) {
	t.Helper()
	if err := s.SetSessionID(t.Context(), k, eng, id); err != nil {
		t.Fatalf("SetSessionID(%v, %s, %s): %v", k, eng, id, err)
	}
}

func testNone(t *testing.T, s Store) {
	want(t, s, key("p1", "lead"), "", "")
	if err := s.ClearSessionID(t.Context(), key("p1", "lead")); err != nil {
		t.Errorf("ClearSessionID of none: %v, want nil", err)
	}
	if err := s.ClearProjectSessions(t.Context(), "p1"); err != nil {
		t.Errorf("ClearProjectSessions of none: %v, want nil", err)
	}
}

func testSetGetReplace(t *testing.T, s Store) {
	k := key("p1", "lead")
	set(t, s, k, troupe.EngineFake, "sess-1")
	want(t, s, k, troupe.EngineFake, "sess-1")
	set(t, s, k, "claude", "0f6c-uuid")
	want(t, s, k, "claude", "0f6c-uuid")
}

func testEmptyID(t *testing.T, s Store) {
	k := key("p1", "lead")
	set(t, s, k, troupe.EngineFake, "sess-1")
	if err := s.SetSessionID(t.Context(), k, troupe.EngineFake, ""); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("SetSessionID with an empty id = %v, want ErrInvalid", err)
	}
	want(t, s, k, troupe.EngineFake, "sess-1")
}

func testCopiedProjects(t *testing.T, s Store) {
	a, b := key("p1", "lead"), key("p2", "lead")
	set(t, s, a, troupe.EngineFake, "a")
	set(t, s, b, troupe.EngineFake, "b")
	want(t, s, a, troupe.EngineFake, "a")
	want(t, s, b, troupe.EngineFake, "b")
	if err := s.ClearSessionID(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	want(t, s, a, "", "")
	want(t, s, b, troupe.EngineFake, "b")
}

func testClear(t *testing.T, s Store) {
	k, other := key("p1", "lead"), key("p1", "dev")
	set(t, s, k, troupe.EngineFake, "x")
	set(t, s, other, troupe.EngineFake, "y")
	if err := s.ClearSessionID(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	want(t, s, k, "", "")
	want(t, s, other, troupe.EngineFake, "y")
}

func testClearProject(t *testing.T, s Store) {
	set(t, s, key("p1", "lead"), troupe.EngineFake, "1")
	set(t, s, key("p1", "dev"), troupe.EngineFake, "2")
	set(t, s, key("p10", "lead"), troupe.EngineFake, "3") // a prefix is another project
	if err := s.ClearProjectSessions(t.Context(), "p1"); err != nil {
		t.Fatal(err)
	}
	want(t, s, key("p1", "lead"), "", "")
	want(t, s, key("p1", "dev"), "", "")
	want(t, s, key("p10", "lead"), troupe.EngineFake, "3")
}

func testConcurrent(t *testing.T, s Store) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			k := key("p1", fmt.Sprint("a", i))
			for j := range 10 {
				if err := s.SetSessionID(t.Context(), k, troupe.EngineFake, fmt.Sprint(j)); err != nil {
					t.Error(err)
					return
				}
				if _, _, err := s.SessionID(t.Context(), k); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		want(t, s, key("p1", fmt.Sprint("a", i)), troupe.EngineFake, "9")
	}
}
