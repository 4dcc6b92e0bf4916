package memory

import (
	"context"
	"slices"
	"strings"
	"unicode"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Index is a full-text index of memory notes, partitioned by project
// (contract C1): what is synced for one project is never found by a search
// in another, even when both hold notes of the same names.
//
// Implementations must be safe for concurrent use. Store serializes the
// Syncs of one project; Searches may run concurrently with anything.
type Index interface {
	// Sync makes the index hold exactly notes for project: notes it holds
	// for project under other names are dropped, the others are added or
	// replaced. Notes have unique names. Sync keeps Name, Description,
	// Type, Body, Path and ModTime.
	Sync(ctx context.Context, project troupe.ProjectID, notes []Note) error

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

// IndexText is the text each agent session starts with: the notes' names and
// descriptions, one per line, in the order given, for the agent to read the
// ones it needs with memory_read. It is "" when there are no notes.
func IndexText(notes []Note) string {
	if len(notes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Memory notes of this project (read one with memory_read, search them with memory_search):\n")
	for _, n := range notes {
		b.WriteString("- ")
		b.WriteString(n.Name)
		b.WriteString(": ")
		b.WriteString(strings.Map(oneLine, n.Description))
		b.WriteByte('\n')
	}
	return b.String()
}

// oneLine maps what could break a one-line list item to a space.
func oneLine(r rune) rune {
	if isControl(r) {
		return ' '
	}
	return r
}
