package vt

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// maxFastCsiParams and maxFastCsiDigits bound what fastCsi takes.
const (
	maxFastCsiParams = 16
	maxFastCsiDigits = 5
)

// fastCsi dispatches the CSI sequence s starts with, in the ground state,
// when it is a simple one: ESC [, parameters of at most maxFastCsiDigits
// digits separated by semicolons (at most maxFastCsiParams), a final byte,
// all in s. It hands the handlers the command and parameters the parser
// would (a missing parameter is parser.MissingParam, and a sequence with no
// parameter at all has none) and leaves the parser in the ground state,
// where a dispatch leaves it. It returns the sequence's length, or 0 having
// done nothing (any other sequence, or one that ends past s: the parser
// takes it byte by byte). (troupe: cursor moves, SGR and erases are most of
// what a TUI sends, and the parser's per-byte dispatch most of their cost.)
func (e *Emulator) fastCsi(s []byte) int {
	if len(s) < 3 || s[0] != ansi.ESC || s[1] != '[' {
		return 0
	}
	params := e.csiParams[:0]
	cur, digits := parser.MissingParam, 0
	for j := 2; j < len(s); j++ {
		switch c := s[j]; {
		case c >= '0' && c <= '9':
			if digits == maxFastCsiDigits {
				return 0
			}
			if cur == parser.MissingParam {
				cur = 0
			}
			cur = cur*10 + int(c-'0')
			digits++
		case c == ';':
			if len(params) == maxFastCsiParams-1 {
				return 0
			}
			params = append(params, ansi.Param(cur))
			cur, digits = parser.MissingParam, 0
		case c >= 0x40 && c <= 0x7e:
			if len(params) > 0 || cur != parser.MissingParam {
				params = append(params, ansi.Param(cur))
			}
			e.handleCsi(ansi.Cmd(c), params)
			return j + 1
		default:
			return 0
		}
	}
	return 0
}

func (e *Emulator) handleCsi(cmd ansi.Cmd, params ansi.Params) {
	e.flushGrapheme() // Flush any pending grapheme before handling CSI sequences.
	if !e.handlers.handleCsi(cmd, params) {
		e.logf("unhandled sequence: CSI %q", paramsString(cmd, params))
	}
}

func (e *Emulator) handleRequestMode(params ansi.Params, isAnsi bool) {
	n, _, ok := params.Param(0, 0)
	if !ok || n == 0 {
		return
	}

	var mode ansi.Mode = ansi.DECMode(n)
	if isAnsi {
		mode = ansi.ANSIMode(n)
	}

	setting := e.modes[mode]
	_, _ = io.WriteString(e.pw, ansi.ReportMode(mode, setting))
}

func paramsString(cmd ansi.Cmd, params ansi.Params) string {
	var s strings.Builder
	if mark := cmd.Prefix(); mark != 0 {
		s.WriteByte(mark)
	}
	params.ForEach(-1, func(i, p int, more bool) {
		fmt.Fprintf(&s, "%d", p)
		if i < len(params)-1 {
			if more {
				s.WriteByte(':')
			} else {
				s.WriteByte(';')
			}
		}
	})
	if inter := cmd.Intermediate(); inter != 0 {
		s.WriteByte(inter)
	}
	if final := cmd.Final(); final != 0 {
		s.WriteByte(final)
	}
	return s.String()
}
