package runtime

import (
	"context"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Journal keeps what each agent did, turn by turn (journal.Store's writer
// side). The runtime never waits for it: a journal.Writer owned by Run
// takes the entries off the turn's path.
type Journal interface {
	Record(ctx context.Context, entries ...journal.Entry) error
}

// runJournal runs the journal writer until stop is called; stop waits
// until it recorded what was still queued. Without a journal both do
// nothing.
func (r *Runtime) runJournal(ctx context.Context) (stop func()) {
	if r.jw == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.jw.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// SyncJournal returns once the journal holds every turn event recorded
// before the call (journal.Writer.Sync): a log read after it shows turns
// that have just ended. Without a journal it returns at once.
func (r *Runtime) SyncJournal(ctx context.Context) error {
	if r.jw == nil {
		return nil
	}
	return r.jw.Sync(ctx)
}

// turnLog turns an actor's turns into journal entries: output chunks are
// joined into one text entry per run of output (a CLI streams many small
// chunks), texts are capped (journal.Cap), and a turn keeps at most
// journal.MaxTurnBytes of events, the rest counted as not kept. It is used
// by the actor's loop only.
type turnLog struct {
	w   *journal.Writer // nil: no journal
	key troupe.RuntimeKey

	turn    troupe.TurnID // the turn being recorded; "" between turns
	bytes   int           // event bytes recorded for the turn
	dropped int           // events over MaxTurnBytes, not kept
	usage   *journal.Usage
	out     strings.Builder // the run of output not recorded yet, up to MaxText
	outSize int             // its size in bytes, beyond what out holds
	outAt   time.Time       // when the run began
}

// start records the start of turn id with its messages.
func (l *turnLog) start(id troupe.TurnID, msgs []troupe.Message) {
	if l.w == nil {
		return
	}
	l.turn, l.bytes, l.dropped, l.usage = id, 0, 0, nil
	l.out.Reset()
	l.outSize = 0
	s := &journal.Start{At: time.Now(), Messages: make([]journal.Message, len(msgs))}
	for i, m := range msgs {
		text, cut, _ := journal.Cap(m.Text)
		s.Messages[i] = journal.Message{ID: m.ID, From: m.From, Kind: m.Kind, Text: text, Cut: cut}
	}
	l.w.Add(journal.Entry{Key: l.key, Turn: id, Start: s})
}

// event records one engine event of the turn in flight.
func (l *turnLog) event(ev engine.Event) {
	if l.w == nil || l.turn == "" || (ev.Turn != "" && ev.Turn != l.turn) {
		return
	}
	now := time.Now()
	if ev.Kind == engine.EventOutput {
		if l.outSize == 0 {
			l.outAt = now
		}
		l.outSize += len(ev.Text)
		if room := journal.MaxText - l.out.Len(); room > 0 {
			l.out.WriteString(ev.Text[:min(room, len(ev.Text))])
		}
		return
	}
	e, ok := activity(ev, now, journal.Cap)
	if !ok {
		return // the turn's end is recorded by end; unknown kinds are not kept
	}
	if e.Kind == journal.KindUsage {
		l.usage = e.Usage
	}
	l.flushOutput()
	l.add(e)
}

// activity is engine event ev in the journal's words, at time at, its
// texts cut by cut: what the journal records and, clipped shorter, what
// the feed shows (events.AgentActivity). ok is false for what is no
// activity: a turn's end (recorded as the turn's end), a block (a state),
// an event missing its content.
func activity(ev engine.Event, at time.Time, cut func(string) (string, bool, int)) (e journal.Event, ok bool) {
	e = journal.Event{At: at}
	switch ev.Kind {
	case engine.EventOutput:
		e.Kind = journal.KindOutput
		e.Text, e.Cut, e.Size = cut(ev.Text)
	case engine.EventThinking:
		e.Kind = journal.KindThinking
		e.Text, e.Cut, e.Size = cut(ev.Text)
	case engine.EventNotice:
		e.Kind = journal.KindNotice
		e.Text, e.Cut, e.Size = cut(ev.Text)
	case engine.EventToolCall, engine.EventToolResult:
		if ev.Tool == nil {
			return e, false
		}
		t := &journal.Tool{ID: ev.Tool.ID, Name: ev.Tool.Name, IsError: ev.Tool.IsError}
		if ev.Kind == engine.EventToolCall {
			e.Kind = journal.KindToolCall
			t.Input, e.Cut, e.Size = cut(string(ev.Tool.Input))
		} else {
			e.Kind = journal.KindToolResult
			t.Output, e.Cut, e.Size = cut(ev.Tool.Output)
		}
		e.Tool = t
	case engine.EventUsage:
		if ev.Usage == nil {
			return e, false
		}
		u := journal.Usage(*ev.Usage)
		e.Kind, e.Usage = journal.KindUsage, &u
	case engine.EventSession:
		if ev.SessionID == "" {
			return e, false
		}
		e.Kind, e.SessionID = journal.KindSession, ev.SessionID
	case engine.EventPermission:
		p, d := ev.Permission, ev.Decision
		if p == nil || d == nil {
			return e, false
		}
		e.Kind = journal.KindPermission
		e.Permission = &journal.Permission{ID: p.ID, Tool: p.Tool, Title: p.Title, Allow: d.Allow, Reason: d.Reason}
		e.Permission.Input, e.Cut, e.Size = cut(string(p.Input))
	default:
		return e, false
	}
	return e, true
}

// flushOutput records the run of output, if any, as one text entry.
func (l *turnLog) flushOutput() {
	if l.outSize == 0 {
		return
	}
	e := journal.Event{At: l.outAt, Kind: journal.KindOutput, Text: strings.ToValidUTF8(l.out.String(), "")}
	if l.outSize > l.out.Len() {
		e.Cut, e.Size = true, l.outSize
	}
	l.out.Reset()
	l.outSize = 0
	l.add(e)
}

// add records e unless the turn is over its bytes.
func (l *turnLog) add(e journal.Event) {
	n := e.Bytes()
	if l.bytes+n > journal.MaxTurnBytes {
		l.dropped++
		return
	}
	l.bytes += n
	l.w.Add(journal.Entry{Key: l.key, Turn: l.turn, Event: &e})
}

// note records a line of kind k on turn id (the turn being recorded).
func (l *turnLog) note(id troupe.TurnID, k journal.Kind, text string) {
	if l.w == nil || id != l.turn {
		return
	}
	l.flushOutput()
	e := journal.Event{At: time.Now(), Kind: k}
	e.Text, e.Cut, e.Size = journal.Cap(text)
	l.add(e)
}

// end records the end of turn id.
func (l *turnLog) end(id troupe.TurnID, text, errText string) {
	if l.w == nil {
		return
	}
	if id == l.turn {
		l.flushOutput()
	}
	e := &journal.End{At: time.Now(), Error: errText}
	e.Text, e.TextCut, _ = journal.Cap(text)
	if id == l.turn {
		e.Usage = l.usage
	}
	l.w.Add(journal.Entry{Key: l.key, Turn: id, End: e, Dropped: l.dropped})
	l.turn, l.dropped = "", 0
}
