package inboxtest

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// testConversationBounds: a page clips each long text at ClipBytes (at a
// character boundary, Clipped and Size set) and holds at most
// MaxPageBytes of text, taken from the end it is read from; Text reads a
// message whole, MaxTextBytes at a time.
func testConversationBounds(t *testing.T, s inbox.Store) {
	ctx := t.Context()
	dev := key(p1, "dev")
	small := mustAppend(t, s, msg(dev, "lead", "small"))[0]
	// 100 KB each, a 2-byte character straddling the clip point.
	big := "x" + strings.Repeat("é", 50<<10)
	var ms []troupe.Message
	for range 80 { // 8 MB in all
		ms = append(ms, msg(dev, "lead", big))
	}
	bigs := mustAppend(t, s, ms...)

	for _, newest := range []bool{true, false} {
		page, err := s.Conversation(ctx, p1, inbox.Page{Agent: "dev", Newest: newest})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, m := range page {
			total += len(m.Text)
			if m.ID == small.ID {
				if m.Text != "small" || m.Clipped || m.Size != 0 {
					t.Errorf("small message in the page: %+v, want it whole and unflagged", m)
				}
				continue
			}
			if !m.Clipped || m.Size != len(big) || len(m.Text) > inbox.ClipBytes || len(m.Text) < inbox.ClipBytes-4 ||
				!strings.HasPrefix(big, m.Text) || !utf8.ValidString(m.Text) {
				t.Fatalf("message %d in the page: %d bytes (clipped %v, size %d), want the first %d bytes at most, whole characters, clipped, size %d",
					m.ID, len(m.Text), m.Clipped, m.Size, inbox.ClipBytes, len(big))
			}
		}
		if total > inbox.MaxPageBytes || len(page) >= len(bigs)+1 || len(page) < inbox.MaxPageBytes/inbox.ClipBytes-1 {
			t.Errorf("newest=%v: a page of %d messages, %d bytes of text; want at most %d bytes, not all %d",
				newest, len(page), total, inbox.MaxPageBytes, len(bigs)+1)
		}
		// The page is cut at its far end: it keeps the messages next to
		// the end it was read from.
		if newest && page[len(page)-1].ID != bigs[len(bigs)-1].ID || !newest && page[0].ID != small.ID {
			t.Errorf("newest=%v: page %d..%d, want it to start at the end it was read from", newest, page[0].ID, page[len(page)-1].ID)
		}
	}

	// Text gives the whole text in parts.
	whole := strings.Repeat("ab€", 400<<10) // 2 MB, 3-byte characters
	id := mustAppend(t, s, msg(dev, "lead", whole))[0].ID
	var got strings.Builder
	for off, n := 0, 0; off < len(whole); n++ {
		m, err := s.Text(ctx, p1, id, off)
		if err != nil {
			t.Fatalf("Text(%d, %d): %v", id, off, err)
		}
		if n > 3 || len(m.Text) == 0 || len(m.Text) > inbox.MaxTextBytes || !m.Clipped || m.Size != len(whole) || m.ID != id {
			t.Fatalf("Text(%d, %d) = %d bytes, clipped %v, size %d; want a part of at most %d bytes of the %d", id, off, len(m.Text), m.Clipped, m.Size, inbox.MaxTextBytes, len(whole))
		}
		got.WriteString(m.Text)
		off += len(m.Text)
	}
	if got.String() != whole {
		t.Errorf("the parts make %d bytes, want the %d of the message", got.Len(), len(whole))
	}
	if m, err := s.Text(ctx, p1, small.ID, 0); err != nil || m.Text != "small" || m.Clipped || m.Size != 5 || m.From != "lead" {
		t.Errorf("Text of a small message = %+v, %v; want it whole, size 5", m, err)
	}
	for _, bad := range []struct {
		p      troupe.ProjectID
		id     int64
		off    int
		target error
	}{
		{p1, id, 3, troupe.ErrInvalid},          // inside a character
		{p1, id, len(whole), troupe.ErrInvalid}, // past the end
		{p1, id, -1, troupe.ErrInvalid},
		{p2, id, 0, troupe.ErrNotFound},        // another project's
		{p1, id + 1000, 0, troupe.ErrNotFound}, // unknown
	} {
		if _, err := s.Text(ctx, bad.p, bad.id, bad.off); !errors.Is(err, bad.target) {
			t.Errorf("Text(%s, %d, %d): %v, want %v", bad.p, bad.id, bad.off, err, bad.target)
		}
	}
}

// testPendingBytes: with a limit, Pending stops after the message that
// brings the texts to MaxPendingBytes; without one it reads them all.
func testPendingBytes(t *testing.T, s inbox.Store) {
	dev := key(p1, "dev")
	big := strings.Repeat("x", 900<<10)
	var ms []troupe.Message
	for range 8 { // 7.2 MB
		ms = append(ms, msg(dev, "lead", big))
	}
	mustAppend(t, s, ms...)
	got, err := s.Pending(t.Context(), dev, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := (inbox.MaxPendingBytes + len(big) - 1) / len(big); len(got) != want {
		t.Errorf("Pending(dev, 100) of 8 texts of 900 KB: %d messages, want %d (to %d bytes)", len(got), want, inbox.MaxPendingBytes)
	}
	if all := mustPending(t, s, dev); len(all) != 8 {
		t.Errorf("Pending(dev, 0): %d messages, want all 8", len(all))
	}
}
