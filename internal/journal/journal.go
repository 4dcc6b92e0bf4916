package journal

import (
	"context"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Caps and bounds: what one text may hold, and what is kept per agent.
const (
	// MaxText bounds each text kept: a run of output, a thought, a tool's
	// input or output, a message, the final text. A cut text says Cut and
	// its original Size.
	MaxText = 64 << 10
	// MaxTurnBytes bounds the event texts kept for one turn; beyond it
	// events are not kept, and counted in Dropped.
	MaxTurnBytes = 4 << 20
	// MaxTurns is how many turns are kept per agent: the newest ones.
	MaxTurns = 200
	// MaxAgentBytes bounds what is kept per agent: the oldest turns are
	// pruned until the rest fit (the newest turn is always kept).
	MaxAgentBytes = 64 << 20
	// PruneEvery: stores prune an agent's turns when a turn starts whose
	// Seq is a multiple of it (pruning reads every turn of the agent), so
	// an agent may hold up to PruneEvery-1 turns over the bounds between
	// two prunes.
	PruneEvery = 16
)

// Cap cuts s to MaxText bytes on a rune boundary. It returns the text, and
// when it cut, true and the original size in bytes.
func Cap(s string) (string, bool, int) {
	if len(s) <= MaxText {
		return s, false, 0
	}
	return clip.Head(s, MaxText), true, len(s)
}

// Kind is the kind of an Event.
type Kind string

// Event kinds, those of engine.Event that a turn's record keeps.
const (
	KindOutput     Kind = "output"      // Text: a run of output chunks, joined
	KindThinking   Kind = "thinking"    // Text
	KindToolCall   Kind = "tool_call"   // Tool: ID, Name, Input
	KindToolResult Kind = "tool_result" // Tool: ID, Output, IsError
	KindUsage      Kind = "usage"       // Usage
	KindSession    Kind = "session"     // SessionID
	KindPermission Kind = "permission"  // Permission
	KindNotice     Kind = "notice"      // Text: what the engine said about the turn (history dropped to fit the context)
	KindCheckpoint Kind = "checkpoint"  // Text: the checkpoint of the workspace made at the turn's end, or why none was
)

// Entry is what the runtime records: one of a turn's start, one of its
// events, its end, or only a count of its events not kept. Exactly one of
// Start, Event and End is set, or none when Dropped is.
type Entry struct {
	Key   troupe.RuntimeKey
	Turn  troupe.TurnID
	Start *Start
	Event *Event
	End   *End
	// Dropped counts events of the turn that were not kept (the writer fell
	// behind, or the turn went over MaxTurnBytes).
	Dropped int
}

// Start is the beginning of a turn.
type Start struct {
	At       time.Time
	Messages []Message
}

// End is the end of a turn.
type End struct {
	At      time.Time
	Text    string // the final text, capped
	TextCut bool
	Error   string // why the turn failed; "" on success
	Usage   *Usage // the turn's last usage report; nil when none
}

// Message is what a turn was given of one inbox message.
type Message struct {
	ID   int64              `json:"id"`
	From troupe.AgentID     `json:"from"`
	Kind troupe.MessageKind `json:"kind"`
	Text string             `json:"text"`
	Cut  bool               `json:"cut,omitempty"`
}

// Event is one thing a turn did. Which fields are set depends on Kind.
type Event struct {
	Seq        int         `json:"seq"` // order in the turn, from 1; set by the store
	At         time.Time   `json:"at"`
	Kind       Kind        `json:"kind"`
	Text       string      `json:"text,omitempty"`
	Tool       *Tool       `json:"tool,omitempty"`
	Usage      *Usage      `json:"usage,omitempty"`
	Permission *Permission `json:"permission,omitempty"`
	SessionID  string      `json:"session_id,omitempty"`
	// Cut: a text of the event was capped at MaxText; Size is its original
	// size in bytes.
	Cut  bool `json:"cut,omitempty"`
	Size int  `json:"size,omitempty"`
}

// Tool is a tool call (ID, Name, Input) or its result (ID, Output, IsError).
type Tool struct {
	ID      string `json:"id"`
	Name    string `json:"name,omitempty"`
	Input   string `json:"input,omitempty"` // JSON text as the engine gave it
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// Permission is an engine's permission request and its decision.
type Permission struct {
	ID     string `json:"id"`
	Tool   string `json:"tool"`
	Title  string `json:"title,omitempty"`
	Input  string `json:"input,omitempty"`
	Allow  bool   `json:"allow"`
	Reason string `json:"reason,omitempty"`
}

// Usage is a turn's tokens and, when the engine tells, its cost.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}

// Turn is the record of one turn, as read back.
type Turn struct {
	// Seq orders an agent's turns (higher is newer); Turns' before cursor.
	Seq       int64            `json:"seq"`
	Project   troupe.ProjectID `json:"project"`
	Agent     troupe.AgentID   `json:"agent"`
	ID        troupe.TurnID    `json:"turn"`
	StartedAt time.Time        `json:"started_at"`
	Messages  []Message        `json:"messages"`
	Events    []Event          `json:"events"`
	// EndedAt is zero while the turn runs, or when its end was lost (the
	// daemon died mid-turn).
	EndedAt    time.Time `json:"ended_at,omitzero"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	Text       string    `json:"text,omitempty"`
	TextCut    bool      `json:"text_cut,omitempty"`
	Error      string    `json:"error,omitempty"`
	Usage      *Usage    `json:"usage,omitempty"`
	// Dropped counts the turn's events that were not kept.
	Dropped int `json:"dropped,omitempty"`
}

// Ended reports whether the turn's end is recorded.
func (t Turn) Ended() bool { return !t.EndedAt.IsZero() }

// Store keeps turn records. Implementations are safe for concurrent use.
//
// Record applies entries in order, in one transaction when the store has
// them. A Start creates the turn's record (a second Start of the same turn
// is ignored) and, when its Seq is a multiple of PruneEvery, prunes the
// agent's oldest turns beyond MaxTurns and MaxAgentBytes; an Event is appended with the next Seq; an End completes
// the record; Dropped adds to its count. An Event, End or Dropped for a
// turn without a record creates one started at that entry's time, with no
// messages (its Start was not kept).
//
// Turns returns k's turns newest first, with their events: at most limit
// (1 to MaxTurns; 0 means 20) of those whose Seq is below before (0: from
// the newest). Turn returns one turn, or an error matching
// troupe.ErrNotFound.
type Store interface {
	Record(ctx context.Context, entries ...Entry) error
	Turns(ctx context.Context, k troupe.RuntimeKey, before int64, limit int) ([]Turn, error)
	Turn(ctx context.Context, k troupe.RuntimeKey, turn troupe.TurnID) (Turn, error)
}

// DefaultLimit is how many turns Turns returns when limit is 0.
const DefaultLimit = 20

// Limit applies Turns' rules to a requested limit.
func Limit(n int) int {
	switch {
	case n <= 0:
		return DefaultLimit
	case n > MaxTurns:
		return MaxTurns
	}
	return n
}

// Bytes is what an event counts toward MaxTurnBytes and MaxAgentBytes:
// the bytes of its texts, plus a little for the rest.
func (e Event) Bytes() int {
	n := len(e.Text) + len(e.SessionID)
	if t := e.Tool; t != nil {
		n += len(t.Input) + len(t.Output) + len(t.Name) + len(t.ID)
	}
	if p := e.Permission; p != nil {
		n += len(p.Input) + len(p.Title) + len(p.Reason) + len(p.Tool)
	}
	return n + 32
}

// Bytes is what a start counts toward MaxAgentBytes.
func (s Start) Bytes() int {
	n := 0
	for _, m := range s.Messages {
		n += len(m.Text) + 32
	}
	return n
}

// Bytes is what an end counts toward MaxAgentBytes.
func (e End) Bytes() int { return len(e.Text) + len(e.Error) + 32 }

// Bytes is what an entry counts toward MaxAgentBytes.
func (e Entry) Bytes() int {
	switch {
	case e.Start != nil:
		return e.Start.Bytes()
	case e.Event != nil:
		return e.Event.Bytes()
	case e.End != nil:
		return e.End.Bytes()
	}
	return 0
}

// Prune returns how many of an agent's turns, oldest first, to delete so
// that at most MaxTurns remain and their bytes (sizes, oldest first) fit
// in MaxAgentBytes; the newest turn is always kept.
func Prune(sizes []int64) int {
	n := max(0, len(sizes)-MaxTurns)
	var total int64
	for _, s := range sizes[n:] {
		total += s
	}
	for n < len(sizes)-1 && total > MaxAgentBytes {
		total -= sizes[n]
		n++
	}
	return n
}
