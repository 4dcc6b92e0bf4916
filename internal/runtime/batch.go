package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// The bounds of one turn (C14: every queue is bounded, the cut stated). A
// turn takes at most DefaultTurnMessages messages and DefaultTurnBytes of
// engine.Render's text, or less where the agent's engine says it takes
// less (engine.InputLimiter); the rest waits for the next turns, in order.
// The inbox is read DefaultTurnMessages at a time (inbox.Store.Pending's
// limit), never whole.
const (
	DefaultTurnMessages = 100
	DefaultTurnBytes    = 256 << 10
	// minTurnBytes is the least byte budget a turn gets, whatever the
	// options say: room for an oversize message's notice and a little of
	// its text.
	minTurnBytes = 4 << 10
	// excerptBytes is how much of a message too big for its turn the turn
	// shows at most; the rest is in its file.
	excerptBytes = 64 << 10
)

// MaxMessageBytes caps the text of one message where it enters troupe:
// send_message, ask_agent, delegate and reply (the agents' tools) and the
// API's send and ask (the person), all through checkSize. A bigger text is
// refused, the error naming the cap and the way round it: write the text
// to a file and send its path. Below the cap, a message bigger than what
// one turn takes is delivered cut, its whole text kept in a file (cut,
// spill). A task's completion message is bounded where it is written
// (task.completionText: a 2 KB tail of the output, the command cut at 120
// bytes).
const MaxMessageBytes = 1 << 20

// checkSize refuses a message text over MaxMessageBytes; field is the
// argument that holds it.
func checkSize(field, text string) error {
	if len(text) <= MaxMessageBytes {
		return nil
	}
	return &troupe.FieldError{Field: field, Msg: fmt.Sprintf(
		"%s, more than a message may hold (%s): write the text to a file in the project and send its path instead",
		sizeText(len(text)), sizeText(MaxMessageBytes))}
}

// Retention of the files of oversize messages, per project: a file goes
// after spillKeep, and the oldest go first beyond spillMaxFiles files or
// spillMaxBytes. Checked each time a file is written.
const (
	spillKeep     = 7 * 24 * time.Hour
	spillMaxFiles = 64
	spillMaxBytes = 256 << 20
)

// budget bounds one turn: at most messages messages and bytes bytes of
// rendered text.
type budget struct {
	messages, bytes int
}

// budget is the bound of agent spec's turns: the runtime's options, lowered
// to its engine's own limit where the engine declares one.
func (r *Runtime) budget(spec troupe.AgentSpec) budget {
	b := budget{messages: r.o.TurnMessages, bytes: r.o.TurnBytes}
	if l, ok := r.o.Engines[spec.Engine].(engine.InputLimiter); ok {
		n, by := l.InputLimit(spec)
		if n > 0 {
			b.messages = min(b.messages, n)
		}
		if by > 0 {
			b.bytes = min(b.bytes, by)
		}
	}
	b.messages = max(b.messages, 1)
	b.bytes = max(b.bytes, minTurnBytes)
	return b
}

// pickBatch chooses what the next turn gets from pending, the oldest
// queued messages in order: an ask alone (it gets a turn of its own, so its
// answer is that turn's output), or the messages up to the next ask within
// b — at most b.messages, and no more than b.bytes of rendered text unless
// the first message alone is bigger (it then goes alone, and fit cuts it).
// Never empty; the rest stays queued, in order.
func pickBatch(pending []troupe.Message, b budget) []troupe.Message {
	if pending[0].Kind == troupe.KindAsk {
		return pending[:1]
	}
	size := engine.RenderedBaseLen()
	for i, m := range pending {
		if i == b.messages || m.Kind == troupe.KindAsk {
			return pending[:i]
		}
		size += engine.RenderedLen(m)
		if i > 0 && size > b.bytes {
			return pending[:i]
		}
	}
	return pending
}

// fit returns the batch as the turn of tag tag is given it: a message that
// does not fit in b.bytes with the turn's first line is cut to fit (see
// cut); the others are as they are. It never fails: a message that cannot
// be kept whole is still delivered, cut.
func (a *actor) fit(batch []troupe.Message, b budget, tag string) []troupe.Message {
	out := batch
	for i, m := range batch {
		if engine.RenderedBaseLen()+engine.RenderedLen(m) <= b.bytes {
			continue
		}
		if &out[0] == &batch[0] {
			out = slices.Clone(batch)
		}
		out[i] = a.cut(m, b.bytes, tag)
	}
	return out
}

// cut returns m with its text shortened so that it renders alone within
// limit bytes (engine.RenderedBaseLen and its RenderedLen): a notice that
// says the message's size, where the text is cut and where the whole text
// is, on a line that begins with the turn's tag (the notice is troupe's,
// not the sender's: engine.HeaderPrefix), then its first bytes (at most
// excerptBytes, cut at a character boundary). The whole text goes to a
// file of the state dir (Options.MessageDir/<project>/<id>.txt, 0600),
// which the agent reads with its own file tools (it runs as the same
// user); without a MessageDir, or if the file cannot be written, the
// notice says the rest is not kept.
func (a *actor) cut(m troupe.Message, limit int, tag string) troupe.Message {
	whole := len(m.Text)
	path, err := a.rt.spill(m)
	if err != nil {
		a.log.Warn("keep an oversize message", "message", m.ID, "err", err)
	}
	notice := func(head int) string {
		s := fmt.Sprintf("%s message %d is %s, more than one turn of yours takes (%s): its first %s follow, cut there;",
			engine.HeaderPrefix(tag), m.ID, sizeText(whole), sizeText(limit), sizeText(head))
		switch {
		case path != "":
			return s + " the whole text is in the file " + path + ": read it from there]"
		case err != nil:
			return s + " the rest could not be kept (" + err.Error() + ")]"
		default:
			return s + " the rest is not kept]"
		}
	}
	// The notice's length barely depends on head: measure it with the
	// longest head, then take what room is left (with a margin for the
	// size's digits).
	probe := m
	probe.Text = notice(excerptBytes) + "\n"
	head := min(excerptBytes, limit-engine.RenderedBaseLen()-engine.RenderedLen(probe)-16, whole)
	excerpt := clip.Head(m.Text, head)
	m.Text = notice(len(excerpt)) + "\n" + excerpt
	return m
}

// sizeText writes n bytes for people: "512 bytes", "64 KB", "3.2 MB".
func sizeText(n int) string {
	switch {
	case n < 1<<10:
		return strconv.Itoa(n) + " bytes"
	case n < 1<<20:
		return strings.TrimSuffix(strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64), ".0") + " KB"
	default:
		return strings.TrimSuffix(strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64), ".0") + " MB"
	}
}

// spill writes m's whole text to Options.MessageDir/<project>/<id>.txt
// (folders 0700, file 0600, written atomically) and returns its path; ""
// and no error without a MessageDir. Then it prunes the project's folder
// (spillKeep, spillMaxFiles, spillMaxBytes), the new file excepted.
func (r *Runtime) spill(m troupe.Message) (string, error) {
	path, err := r.spillText(m.Project, strconv.FormatInt(m.ID, 10)+".txt", m.Text)
	if err != nil {
		return "", fmt.Errorf("write message %d: %w", m.ID, err)
	}
	return path, nil
}

// spillText is spill for text kept under name in project p's folder.
func (r *Runtime) spillText(project troupe.ProjectID, name, text string) (string, error) {
	if r.o.MessageDir == "" {
		return "", nil
	}
	p := string(project)
	if p == "" || p == "." || p == ".." || strings.ContainsAny(p, `/\`) {
		return "", fmt.Errorf("project id %q is no folder name", p)
	}
	if strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("%q is no file name", name)
	}
	dir := filepath.Join(r.o.MessageDir, p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if err := atomicfile.Write(path, []byte(text), 0o600); err != nil {
		return "", err
	}
	if err := pruneSpill(dir, name, time.Now()); err != nil {
		r.log.Warn("prune the files of oversize messages", "dir", dir, "err", err)
	}
	return path, nil
}

// capAnswer returns text, the final text of a turn that answers request
// id of project p, as the answer may hold it: whole up to
// MaxMessageBytes (its outcome is a message too); past it, a notice that
// states the cut and where the whole text is, then its first
// excerptBytes. The whole text is kept as an oversize message's is, in
// Options.MessageDir/<project>/<request>.txt.
func (r *Runtime) capAnswer(p troupe.ProjectID, id troupe.RequestID, text string) string {
	if len(text) <= MaxMessageBytes {
		return text
	}
	path, err := r.spillText(p, string(id)+".txt", text)
	if err != nil {
		r.log.Warn("keep an oversize answer", "request", id, "err", err)
	}
	head := len(clip.Head(text, excerptBytes))
	s := fmt.Sprintf("[troupe: this answer is %s, more than a message may hold (%s): its first %s follow, cut there;",
		sizeText(len(text)), sizeText(MaxMessageBytes), sizeText(head))
	switch {
	case path != "":
		s += " the whole text is in the file " + path + "]"
	case err != nil:
		s += " the rest could not be kept (" + err.Error() + ")]"
	default:
		s += " the rest is not kept]"
	}
	return s + "\n" + text[:head]
}

// forgetSpill removes the files of a removed project's oversize messages
// (its messages go from the store too, by the retention rule).
func (r *Runtime) forgetSpill(p troupe.ProjectID) {
	if r.o.MessageDir == "" || p == "" || p == "." || p == ".." || strings.ContainsAny(string(p), `/\`) {
		return
	}
	if err := os.RemoveAll(filepath.Join(r.o.MessageDir, string(p))); err != nil {
		r.log.Warn("remove the files of a removed project's oversize messages", "project", p, "err", err)
	}
}

// pruneSpill removes from dir the files older than spillKeep, then the
// oldest until at most spillMaxFiles files and spillMaxBytes remain; keep
// is never removed.
func pruneSpill(dir, keep string, now time.Time) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	type file struct {
		name string
		at   time.Time
		size int64
	}
	var files []file
	var errs []error
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == keep {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if now.Sub(info.ModTime()) > spillKeep {
			errs = append(errs, os.Remove(filepath.Join(dir, e.Name())))
			continue
		}
		files = append(files, file{e.Name(), info.ModTime(), info.Size()})
	}
	slices.SortFunc(files, func(a, b file) int { return b.at.Compare(a.at) }) // newest first
	n, total := 1, int64(0)
	for _, f := range files {
		n++
		total += f.size
		if n > spillMaxFiles || total > spillMaxBytes {
			errs = append(errs, os.Remove(filepath.Join(dir, f.name)))
		}
	}
	return errors.Join(errs...)
}
