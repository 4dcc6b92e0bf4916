package memory

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/troupe"
)

var _ Index = (*MemIndex)(nil)

// MemIndex is an Index held in memory: for tests, and for a daemon running
// without a database. It scans every note of the project at each search,
// which is fine for the tens or hundreds of notes a project holds. It does
// not fold accents, unlike the SQLite index. It is safe for concurrent use.
type MemIndex struct {
	mu sync.Mutex
	// mu guards notes: by project, by name; the maps are replaced, never
	// changed, so a search may use one after unlocking.
	notes map[troupe.ProjectID]map[string]Entry
}

// NewMemIndex returns an empty MemIndex.
func NewMemIndex() *MemIndex {
	return &MemIndex{notes: map[troupe.ProjectID]map[string]Entry{}}
}

// Update implements Index.
func (x *MemIndex) Update(ctx context.Context, project troupe.ProjectID, put []Entry, drop []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	m := maps.Clone(x.notes[project])
	if m == nil {
		m = make(map[string]Entry, len(put))
	}
	for _, name := range drop {
		delete(m, name)
	}
	for _, e := range put {
		m[e.Name] = e
	}
	x.notes[project] = m
	return nil
}

// Entries implements Index.
func (x *MemIndex) Entries(ctx context.Context, project troupe.ProjectID) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	x.mu.Lock()
	notes := x.notes[project]
	x.mu.Unlock()
	es := make([]Entry, 0, len(notes))
	for _, e := range notes {
		e.Body = ""
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return es, nil
}

// Weights of a match in each field of a note.
const (
	weightName        = 10
	weightDescription = 5
	weightBody        = 1
)

// Search implements Index.
func (x *MemIndex) Search(ctx context.Context, project troupe.ProjectID, query string, limit int) ([]Hit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	terms := Terms(query)
	if len(terms) == 0 {
		return []Hit{}, nil
	}
	x.mu.Lock()
	notes := x.notes[project]
	x.mu.Unlock()

	hits := []Hit{}
	for _, e := range notes {
		n := e.Note
		fields := []string{n.Name, n.Description, n.Body}
		weights := []float64{weightName, weightDescription, weightBody}
		var rank float64
		snippet := ""
		for _, t := range terms {
			found := false
			for i, f := range fields {
				c := countPrefix(f, t)
				rank += weights[i] * float64(c)
				found = found || c > 0
			}
			if !found {
				rank = -1
				break
			}
		}
		if rank < 0 {
			continue
		}
		for _, f := range []string{n.Body, n.Description, n.Name} {
			if snippet = makeSnippet(f, terms); snippet != "" {
				break
			}
		}
		n.Body = ""
		hits = append(hits, Hit{Note: n, Snippet: snippet, Rank: rank})
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		return cmp.Or(cmp.Compare(b.Rank, a.Rank), strings.Compare(a.Note.Name, b.Note.Name))
	})
	return hits[:min(limit, len(hits))], nil
}

// word is one word of a text: its byte range.
type word struct{ start, end int }

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) }

// words splits s into words the way Terms splits a query.
func words(s string) []word {
	var ws []word
	start := -1
	for i, r := range s {
		switch {
		case isWordRune(r) && start < 0:
			start = i
		case !isWordRune(r) && start >= 0:
			ws = append(ws, word{start, i})
			start = -1
		}
	}
	if start >= 0 {
		ws = append(ws, word{start, len(s)})
	}
	return ws
}

// hasPrefixFold reports whether w begins with term, which is lower-case.
func hasPrefixFold(w, term string) bool {
	for _, tr := range term {
		r, size := utf8.DecodeRuneInString(w)
		if size == 0 || unicode.ToLower(r) != tr {
			return false
		}
		w = w[size:]
	}
	return true
}

// countPrefix counts the words of s that begin with term.
func countPrefix(s, term string) int {
	n := 0
	for _, w := range words(s) {
		if hasPrefixFold(s[w.start:w.end], term) {
			n++
		}
	}
	return n
}

// snippetWords is how many words a snippet shows around its first match.
const snippetWords = 8

// makeSnippet returns the words of s around the first word matching a term,
// matches in bold, or "" when no word matches.
func makeSnippet(s string, terms []string) string {
	ws := words(s)
	match := func(w word) bool {
		return slices.ContainsFunc(terms, func(t string) bool { return hasPrefixFold(s[w.start:w.end], t) })
	}
	first := slices.IndexFunc(ws, match)
	if first < 0 {
		return ""
	}
	lo, hi := max(0, first-snippetWords), min(len(ws), first+snippetWords+1)
	var b strings.Builder
	if lo > 0 {
		b.WriteString("…")
	}
	for i := lo; i < hi; i++ {
		w := ws[i]
		if i > lo {
			b.WriteString(oneLineSpace(s[ws[i-1].end:w.start]))
		}
		if match(w) {
			b.WriteString("**" + s[w.start:w.end] + "**")
		} else {
			b.WriteString(s[w.start:w.end])
		}
	}
	if hi < len(ws) {
		b.WriteString("…")
	}
	return b.String()
}

// oneLineSpace keeps the punctuation between two words but turns line
// breaks and runs of blanks into one space.
func oneLineSpace(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || isControl(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	if space {
		b.WriteByte(' ')
	}
	return b.String()
}
