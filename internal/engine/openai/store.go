package openai

import (
	"context"
	"slices"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Store keeps each agent's conversation with its model, so that it
// survives a session's end and a daemon restart (C6).
// internal/store/sqlite implements it durably (asserted in internal/daemon);
// MemStore in memory. A conversation is named by the id the session mints
// (reported as engine.EventSession, given back as StartSpec.Resume) and
// always used with its agent's RuntimeKey (C1). Methods are safe for
// concurrent use.
type Store interface {
	// ChatHistory returns conv's entries in the order appended; none (and
	// a nil error) for a conversation it does not know.
	ChatHistory(ctx context.Context, k troupe.RuntimeKey, conv string) ([]troupe.ConversationEntry, error)
	// AppendChat adds entries at the end of conv, in one
	// transaction.
	AppendChat(ctx context.Context, k troupe.RuntimeKey, conv string, entries []troupe.ConversationEntry) error
	// TrimChat deletes conv's entries of turns before turn.
	TrimChat(ctx context.Context, k troupe.RuntimeKey, conv string, turn int64) error
	// KeepChat deletes every conversation of k but keep: an agent
	// has one conversation at a time.
	KeepChat(ctx context.Context, k troupe.RuntimeKey, keep string) error
}

// MemStore is Store in memory: a restart forgets it. The engine uses it
// when Options.Store is nil; tests use it.
type MemStore struct {
	mu sync.Mutex // guards m
	m  map[memConv][]troupe.ConversationEntry
}

type memConv struct {
	k    troupe.RuntimeKey
	conv string
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{m: map[memConv][]troupe.ConversationEntry{}} }

// ChatHistory implements Store.
func (s *MemStore) ChatHistory(_ context.Context, k troupe.RuntimeKey, conv string) ([]troupe.ConversationEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]troupe.ConversationEntry, 0, len(s.m[memConv{k, conv}]))
	for _, e := range s.m[memConv{k, conv}] {
		out = append(out, troupe.ConversationEntry{Turn: e.Turn, Data: slices.Clone(e.Data)})
	}
	return out, nil
}

// AppendChat implements Store.
func (s *MemStore) AppendChat(_ context.Context, k troupe.RuntimeKey, conv string, entries []troupe.ConversationEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		s.m[memConv{k, conv}] = append(s.m[memConv{k, conv}], troupe.ConversationEntry{Turn: e.Turn, Data: slices.Clone(e.Data)})
	}
	return nil
}

// TrimChat implements Store.
func (s *MemStore) TrimChat(_ context.Context, k troupe.RuntimeKey, conv string, turn int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := memConv{k, conv}
	s.m[key] = slices.DeleteFunc(s.m[key], func(e troupe.ConversationEntry) bool { return e.Turn < turn })
	return nil
}

// KeepChat implements Store.
func (s *MemStore) KeepChat(_ context.Context, k troupe.RuntimeKey, keep string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.m {
		if key.k == k && key.conv != keep {
			delete(s.m, key)
		}
	}
	return nil
}
