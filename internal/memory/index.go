package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Index is a full-text index of memory notes, partitioned by project
// (contract C1): what is put for one project is never found by a search in
// another, even when both hold notes of the same names. It persists what
// it holds, with each note's file stamp, so that a Store started later
// reconciles it with the files (Entries) instead of reading every note.
//
// Implementations must be safe for concurrent use. Store serializes the
// Updates of one project; Searches and Entries may run concurrently with
// anything.
type Index interface {
	// Update drops the notes named in drop (names it does not hold are
	// ignored), then adds the notes of put, replacing those of the same
	// names. Notes in put have unique names. It keeps Name, Description,
	// Type, Body, Path, ModTime and Stamp.
	Update(ctx context.Context, project troupe.ProjectID, put []Entry, drop []string) error

	// Entries returns every note the index holds for project, without
	// bodies, in name order.
	Entries(ctx context.Context, project troupe.ProjectID) ([]Entry, error)

	// Search returns at most limit notes of project (limit <= 0 means
	// DefaultSearchLimit) that match query, most relevant first.
	//
	// query is text from an agent, not a query language: it is split into
	// terms with Terms, and a note matches when each term begins a word of
	// its name, description or body (so "live" finds "liveness"; case is
	// ignored). Any text is a valid query: quotes, parentheses, AND, NOT,
	// "*" or column names never cause an error. A query without terms
	// matches nothing.
	//
	// A hit's Note has every field but Body; Snippet is a short extract
	// around a match, with the matched words in **bold**; Rank is the
	// relevance, higher first, weighing a match in the name above one in
	// the description, above one in the body. Hits of equal rank are in
	// name order.
	Search(ctx context.Context, project troupe.ProjectID, query string, limit int) ([]Hit, error)
}

// Entry is a note as an Index holds it: the note and the stamp of the file
// it was read from.
type Entry struct {
	Note
	// Stamp is Store's summary of the note's file when it was read (size,
	// modification time, inode, mode), opaque to the index, which keeps it
	// byte for byte; "" when unknown.
	Stamp string
}

// Hit is one result of a search.
type Hit struct {
	Note    Note // without Body: read the note for it
	Snippet string
	Rank    float64 // higher is more relevant; only comparable within one search
}

// Search limits.
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 50
	maxTerms           = 32
)

// Terms splits a search query into the lower-case words an Index matches.
// Words are runs of letters, digits and marks; everything else separates
// them. The operators AND, OR, NOT and NEAR, in capitals, are dropped: an
// agent that writes "probe AND codex" means the two words, which a note must
// hold anyway. Repeated words count once; words after the 32nd are dropped.
func Terms(query string) []string {
	var terms []string
	for _, w := range strings.FieldsFunc(query, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	}) {
		switch w {
		case "AND", "OR", "NOT", "NEAR":
			continue
		}
		w = strings.ToLower(w)
		if !slices.Contains(terms, w) {
			terms = append(terms, w)
		}
		if len(terms) == maxTerms {
			break
		}
	}
	return terms
}

// MaxBriefing is the most bytes of the briefing a session starts with:
// about 80 notes of a 100-byte line, some 2k tokens. Past it, the
// briefing names the most recently changed notes and says how many more
// memory_search finds.
const MaxBriefing = 8 << 10

const (
	indexHeader  = "Memory notes of this project (read one with memory_read, search them with memory_search):\n"
	recentHeader = "Memory notes of this project, the most recently changed first (read one with memory_read):\n"
)

// IndexText is the whole index of notes: their names and descriptions,
// one per line, in the order given, for the agent to read the ones it
// needs with memory_read. It is "" when there are no notes.
func IndexText(notes []Note) string {
	if len(notes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(indexHeader)
	for _, n := range notes {
		b.WriteString(indexLine(n))
	}
	return b.String()
}

// indexLine is one note's line of the index.
func indexLine(n Note) string {
	return "- " + n.Name + ": " + strings.Map(oneLine, n.Description) + "\n"
}

// briefing is the text a session starts with: IndexText of the notes in
// name order when it fits in MaxBriefing bytes; otherwise the lines of the
// most recently changed notes (ModTime, newest first) that fit, then a
// line "N more notes: search them with memory_search". It sorts notes.
func briefing(notes []Note) string {
	// Lines only shrink through oneLine: when even their raw sizes fit, so
	// does the whole index, built only then.
	size := len(indexHeader)
	for _, n := range notes {
		size += len("- : \n") + len(n.Name) + len(n.Description)
	}
	if size <= 2*MaxBriefing {
		slices.SortFunc(notes, func(a, b Note) int { return strings.Compare(a.Name, b.Name) })
		if text := IndexText(notes); len(text) <= MaxBriefing {
			return text
		}
	}
	slices.SortFunc(notes, func(a, b Note) int {
		return cmp.Or(b.ModTime.Compare(a.ModTime), strings.Compare(a.Name, b.Name))
	})
	more := func(n int) string { return fmt.Sprintf("%d more notes: search them with memory_search\n", n) }
	room := MaxBriefing - len(more(len(notes))) // the longest "more" line
	var b strings.Builder
	b.WriteString(recentHeader)
	shown := 0
	for _, n := range notes {
		line := indexLine(n)
		if b.Len()+len(line) > room {
			break
		}
		b.WriteString(line)
		shown++
	}
	b.WriteString(more(len(notes) - shown))
	return b.String()
}

// oneLine maps what could break a one-line list item to a space.
func oneLine(r rune) rune {
	if isControl(r) {
		return ' '
	}
	return r
}
