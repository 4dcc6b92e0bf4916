package claudesessions

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/troupe-dev/troupe/internal/claudefmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
)

// Stamp is what a stat tells of a transcript file; an unchanged stamp
// means the file is not read again.
type Stamp struct {
	Size    int64
	ModTime int64 // unix nanoseconds
	Inode   uint64
}

func stampOf(fi fs.FileInfo) Stamp {
	s := Stamp{Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Inode = st.Ino
	}
	return s
}

// Summary is what the index knows of one session from its transcript.
type Summary struct {
	ID        string // the file's name without .jsonl
	Cwd       string // the first cwd written in the transcript: where it started
	Title     string // the best title: custom, then ai-title, then summary, then the first prompt
	TitleKind string // "custom", "ai", "summary", "prompt" or ""
	Prompt    string // the first prompt, cut to MaxPrompt bytes
	Version   string // the CLI version of the first conversation line
	GitBranch string
	First     time.Time // the first line's time
	Last      time.Time // the last line's time
	Messages  int       // user and assistant lines (an assistant line holds one content block)
	Model     string    // the model of the last assistant line (not "<synthetic>")
	Skipped   int       // lines skipped: not JSON objects (truncated, garbled), foreign, or over MaxLine
}

// File is one transcript file in the index: where it is, its stamp when
// last read, how far it was read (the end of its last complete line) and
// what it says. A file not Complete was read at its head and tail only
// (a listing needs no more): its Messages and Skipped count those parts,
// a lower bound, until Index.Deepen reads it whole.
type File struct {
	Path     string
	Stamp    Stamp
	Offset   int64
	Complete bool
	Summary
}

// MaxPrompt bounds the first prompt kept per session.
const MaxPrompt = 200

// titleRank orders title kinds: a higher rank replaces a lower one.
var titleRank = map[string]int{"": 0, "prompt": 1, "summary": 2, "ai": 3, "custom": 4}

// headTries bounds how many user lines are decoded looking for the first
// prompt of a session that has none.
const headTries = 64

// reader reads transcript lines into a File.
type reader struct {
	maxLine int
	buf     []byte
	n       int64 // bytes read so far
}

// openFile opens path for reading without following a final symbolic link
// and without blocking on a FIFO, and checks that what it opened is a
// regular file.
func openFile(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("open %s: not a regular file", path)
	}
	return f, fi, nil
}

// update brings fl up to date with the file at fl.Path: read from fl.Offset
// when the file only grew (same inode, not smaller, not rewritten at the
// same size), else from the start with a fresh summary. Nothing past limit
// bytes of the file is read (a hostile file's size bounds no work).
//
// headTail > 0 lets a file that is not Complete and is over 2×headTail be
// read at its first and last headTail bytes only (then it stays not
// Complete); 0 reads it whole.
func (r *reader) update(fl File, limit, headTail int64) (File, error) {
	f, fi, err := openFile(fl.Path)
	if err != nil {
		return fl, err
	}
	defer f.Close()
	st := stampOf(fi)
	if !fl.Complete || st.Inode != fl.Stamp.Inode || st.Size < fl.Offset || (st.Size == fl.Stamp.Size && st.ModTime != fl.Stamp.ModTime) {
		fl = File{Path: fl.Path, Summary: Summary{ID: fl.ID}}
	}
	fl.Stamp = st
	if fl.Offset == 0 && headTail > 0 && min(st.Size, limit) > 2*headTail {
		return fl, r.headTail(f, &fl, min(st.Size, limit), headTail)
	}
	fl.Complete = true
	if fl.Offset >= limit {
		return fl, nil
	}
	err = r.read(f, &fl, min(st.Size, limit)-fl.Offset, false)
	return fl, err
}

// headTail reads the complete lines of the first n bytes, then those of
// the last n bytes of a file of size bytes (the line cut at the tail's
// start skipped): the head gives the folder and first prompt, the tail
// the last time, model and title. A tail without a line with a time (its
// last lines are long: a prompt snapshot, a request shape) is read again
// twice as long, up to maxTail or the head's end. The model is the tail's
// last assistant's, else the head's.
func (r *reader) headTail(f *os.File, fl *File, size, n int64) error {
	if err := r.read(f, fl, n, false); err != nil {
		return err
	}
	head := *fl
	for tail := n; ; tail *= 2 {
		start := max(size-tail, head.Offset)
		*fl = head
		fl.Offset, fl.Model, fl.Last = start, "", time.Time{}
		if err := r.read(f, fl, size-start, start > head.Offset); err != nil {
			return err
		}
		seen := !fl.Last.IsZero() // the tail holds a line with a time
		if fl.Model == "" {
			fl.Model = head.Model
		}
		if !seen {
			fl.Last = head.Last
		}
		if seen || start == head.Offset || tail >= maxTail {
			fl.Complete = start == head.Offset
			return nil
		}
	}
}

// maxTail bounds headTail's tail.
const maxTail = 4 << 20

// read reads the complete lines of the next n bytes from fl.Offset; the
// offset stops at the end of the last complete line. dropFirst: the bytes
// up to the first newline are the end of a line cut by the read's start,
// not looked at.
func (r *reader) read(f *os.File, fl *File, n int64, dropFirst bool) error {
	if r.buf == nil {
		r.buf = make([]byte, min(1<<20, r.maxLine))
	}
	acc := accumulator{fl: fl}
	defer acc.finish()
	var (
		off     = fl.Offset // file offset of r.buf[0]
		end     = fl.Offset + n
		fill    = 0         // bytes of r.buf holding unread data
		skip    = dropFirst // inside a line not to look at (over maxLine, or cut)
		cutLine = dropFirst
	)
	for off+int64(fill) < end {
		if fill == len(r.buf) {
			if len(r.buf) < r.maxLine {
				nb := make([]byte, min(2*len(r.buf), r.maxLine))
				copy(nb, r.buf[:fill])
				r.buf = nb
			} else {
				// a line over maxLine: drop what is held and skip to its end
				skip = true
				off += int64(fill)
				fill = 0
			}
		}
		want := min(int64(len(r.buf)-fill), end-off-int64(fill))
		got, err := f.ReadAt(r.buf[fill:fill+int(want)], off+int64(fill))
		fill += got
		r.n += int64(got)
		data := r.buf[:fill]
		start := 0
		for {
			i := bytes.IndexByte(data[start:], '\n')
			if i < 0 {
				break
			}
			if skip {
				skip = false
				if !cutLine {
					fl.Skipped++
				}
				cutLine = false
			} else {
				acc.line(data[start : start+i])
			}
			start += i + 1
		}
		off += int64(start)
		if !skip {
			fl.Offset = off
		}
		copy(r.buf, data[start:])
		fill -= start
		if errors.Is(err, io.EOF) || got == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", fl.Path, err)
		}
	}
	return nil
}

// accumulator folds lines into a File's summary.
type accumulator struct {
	fl     *File
	lastTS string
	tries  int
}

func (a *accumulator) line(b []byte) {
	fl := a.fl
	l := claudefmt.ScanLine(b)
	if l.Bad || l.Kind == claudefmt.KindUnknown {
		fl.Skipped++
		return
	}
	if l.Timestamp != "" {
		if fl.First.IsZero() {
			fl.First = claudefmt.ParseTime(l.Timestamp)
		}
		a.lastTS = l.Timestamp
	}
	switch l.Kind {
	case claudefmt.KindUser, claudefmt.KindAssistant:
		fl.Messages++
		if (fl.Cwd == "" || fl.Prompt == "") && a.tries < headTries {
			a.tries++
			h, err := claudefmt.ParseHead(bytes.TrimSpace(b))
			if err != nil {
				fl.Messages--
				fl.Skipped++
				return
			}
			if fl.Cwd == "" && h.Cwd != "" {
				fl.Cwd, fl.Version, fl.GitBranch = h.Cwd, h.Version, h.GitBranch
			}
			if fl.Prompt == "" && h.Prompt != "" {
				fl.Prompt = cut(h.Prompt, MaxPrompt)
				a.setTitle("prompt", fl.Prompt)
			}
		}
		if l.Kind == claudefmt.KindAssistant && l.Model != "" && l.Model != "<synthetic>" {
			fl.Model = l.Model
		}
	case claudefmt.KindAITitle, claudefmt.KindCustomTitle, claudefmt.KindSummary:
		t, err := claudefmt.ParseTitle(bytes.TrimSpace(b))
		if err != nil {
			fl.Skipped++
			return
		}
		kind := map[claudefmt.Kind]string{claudefmt.KindAITitle: "ai", claudefmt.KindCustomTitle: "custom", claudefmt.KindSummary: "summary"}[l.Kind]
		a.setTitle(kind, cut(t, MaxPrompt))
	}
}

func (a *accumulator) setTitle(kind, t string) {
	if t == "" || titleRank[kind] < titleRank[a.fl.TitleKind] {
		return
	}
	a.fl.Title, a.fl.TitleKind = t, kind
}

func (a *accumulator) finish() {
	if a.lastTS != "" {
		if t := claudefmt.ParseTime(a.lastTS); !t.IsZero() {
			a.fl.Last = t
		}
	}
}

// cut shortens s to at most n bytes at a character boundary, with "…".
func cut(s string, n int) string {
	s, _ = clip.Ellipsis(s, n)
	return s
}
