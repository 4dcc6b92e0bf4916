package vt

import (
	"slices"

	uv "github.com/charmbracelet/ultraviolet"
)

// DefaultScrollbackSize is the default maximum number of lines in the scrollback buffer.
const DefaultScrollbackSize = 10000

// Scrollback represents a scrollback buffer that stores lines scrolled off the screen.
//
// troupe: a ring, so a push into a full scrollback reuses the storage of the
// line it drops instead of moving every line and allocating a new one.
type Scrollback struct {
	lines    []uv.Line // a ring of len(lines) ≤ maxLines lines; the oldest at head
	head     int
	maxLines int
}

// NewScrollback creates a new scrollback buffer with the given maximum number of lines.
func NewScrollback(maxLines int) *Scrollback {
	if maxLines <= 0 {
		maxLines = DefaultScrollbackSize
	}
	return &Scrollback{
		lines:    make([]uv.Line, 0, min(maxLines, 1000)), // Pre-allocate reasonable capacity
		maxLines: maxLines,
	}
}

// blankCell reports whether c is a cell a line's end can drop: zero or
// [uv.EmptyCell] (the same as c.IsZero() || c.Equal(&uv.EmptyCell), without
// comparing colors through their RGBA methods).
func blankCell(c *uv.Cell) bool {
	if c.Style.Fg != nil || c.Style.Bg != nil || c.Style.UnderlineColor != nil ||
		c.Style.Attrs != 0 || c.Style.Underline != 0 || c.Link.URL != "" || c.Link.Params != "" {
		return false
	}
	return (c.Width == 1 && c.Content == " ") || (c.Width == 0 && c.Content == "")
}

// Push adds a line to the scrollback buffer.
// If the buffer is full, the oldest line is removed.
func (s *Scrollback) Push(line uv.Line) {
	if s == nil || s.maxLines <= 0 {
		return
	}

	// Find last non-empty cell to trim trailing empty cells.
	// This helps with wrapping and window resizing.
	n := len(line)
	for n > 0 && blankCell(&line[n-1]) {
		n--
	}

	if len(s.lines) < s.maxLines {
		s.lines = append(s.lines, slices.Clone(line[:n]))
		return
	}
	// Full: the oldest line's storage takes the new one.
	old := s.lines[s.head]
	if len(old) > n {
		clear(old[n:]) // the cells past the new line's end hold no references
	}
	s.lines[s.head] = append(old[:0], line[:n]...)
	s.head = (s.head + 1) % len(s.lines)
}

// PushN adds n lines from the buffer starting at line y to the scrollback.
func (s *Scrollback) PushN(buf *uv.RenderBuffer, y, n int) {
	if s == nil || buf == nil || n <= 0 {
		return
	}

	for i := range min(n, buf.Height()-y) {
		if line := buf.Line(y + i); line != nil {
			s.Push(line)
		}
	}
}

// Len returns the number of lines in the scrollback buffer.
func (s *Scrollback) Len() int {
	if s == nil {
		return 0
	}
	return len(s.lines)
}

// MaxLines returns the maximum number of lines the scrollback buffer can hold.
func (s *Scrollback) MaxLines() int {
	if s == nil {
		return 0
	}
	return s.maxLines
}

// unring puts the oldest line first (head 0).
func (s *Scrollback) unring() {
	s.lines = s.Lines()
	s.head = 0
}

// SetMaxLines sets the maximum number of lines in the scrollback buffer.
// If the current number of lines exceeds the new maximum, oldest lines are removed.
func (s *Scrollback) SetMaxLines(maxLines int) {
	if s == nil || maxLines <= 0 {
		return
	}

	s.unring()
	s.maxLines = maxLines
	if len(s.lines) > maxLines {
		// Remove oldest lines
		s.lines = slices.Clone(s.lines[len(s.lines)-maxLines:])
	}
}

// Line returns the line at the given index.
// Index 0 is the oldest line, Len()-1 is the most recent.
// Returns nil if index is out of bounds.
func (s *Scrollback) Line(index int) uv.Line {
	if s == nil || index < 0 || index >= len(s.lines) {
		return nil
	}
	return s.lines[(s.head+index)%len(s.lines)]
}

// Lines returns all lines in the scrollback buffer.
// Index 0 is the oldest line. (troupe: a new slice; the lines are shared.)
func (s *Scrollback) Lines() []uv.Line {
	if s == nil {
		return nil
	}
	return append(slices.Clip(s.lines[s.head:]), s.lines[:s.head]...)
}

// Clear removes all lines from the scrollback buffer.
func (s *Scrollback) Clear() {
	if s == nil {
		return
	}
	clear(s.lines)
	s.lines = s.lines[:0]
	s.head = 0
}

// CellAt returns the cell at the given position in the scrollback buffer.
// x is the column, y is the line index (0 = oldest).
// Returns nil if position is out of bounds.
func (s *Scrollback) CellAt(x, y int) *uv.Cell {
	line := s.Line(y)
	if line == nil || x < 0 || x >= len(line) {
		return nil
	}
	return &line[x]
}
