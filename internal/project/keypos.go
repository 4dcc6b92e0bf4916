package project

// This file finds where each key of a team file is written. The TOML decoder
// (BurntSushi/toml) reports the keys of a document in file order but not
// their positions, so the source is scanned again by a small scanner that
// only needs to recognise keys, table headers, strings and the brackets of
// inline values: it runs on TOML the decoder has already accepted, and gives
// up (no lines rather than wrong ones) if it does not find the same keys.

import (
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// keyLines returns the line where each of keys is written: the line of a
// table header, or of the start of a key. keys are the decoder's
// MetaData.Keys() for src, which must be valid TOML; the decoder keeps no
// per-key positions, so src is scanned again here. It returns nil if the scan
// does not find the same keys, so that errors carry no line rather than a
// wrong one.
func keyLines(src string, keys []toml.Key) []int {
	found := scanKeys(src)
	if len(found) != len(keys) {
		return nil
	}
	lines := make([]int, len(keys))
	line, off := 1, 0
	for i, f := range found {
		if !slices.Equal(f.key, keys[i]) || f.off < off {
			return nil
		}
		line += strings.Count(src[off:f.off], "\n")
		off = f.off
		lines[i] = line
	}
	return lines
}

// scannedKey is a key found by scanKeys.
type scannedKey struct {
	key toml.Key
	off int
}

// scanKeys lists the keys of valid TOML src in the order and form of
// MetaData.Keys(): every table header, and the full path of every key,
// including keys of inline tables, which inside arrays take the array's path.
func scanKeys(src string) []scannedKey {
	s := &keyScanner{src: src, pos: len(bomOf(src))}
	var table toml.Key
	for {
		s.skipBlank()
		if s.pos >= len(s.src) {
			return s.keys
		}
		start := s.pos
		if s.src[s.pos] == '[' {
			s.pos++
			if s.at("[") {
				s.pos++
			}
			table = s.key()
			s.emit(table, start)
		} else {
			s.keyValue(table)
		}
		s.skipLine()
	}
}

type keyScanner struct {
	src  string
	pos  int
	keys []scannedKey
}

func (s *keyScanner) emit(k toml.Key, off int) {
	s.keys = append(s.keys, scannedKey{key: k, off: off})
}

func (s *keyScanner) at(prefix string) bool { return strings.HasPrefix(s.src[s.pos:], prefix) }

func (s *keyScanner) skipSpace() {
	for s.pos < len(s.src) && (s.src[s.pos] == ' ' || s.src[s.pos] == '\t') {
		s.pos++
	}
}

// skipBlank skips spaces, newlines and comments.
func (s *keyScanner) skipBlank() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		case '#':
			s.skipLine()
		default:
			return
		}
	}
}

// skipLine moves past the next newline.
func (s *keyScanner) skipLine() {
	if i := strings.IndexByte(s.src[s.pos:], '\n'); i >= 0 {
		s.pos += i + 1
	} else {
		s.pos = len(s.src)
	}
}

// key reads a dotted key.
func (s *keyScanner) key() toml.Key {
	var k toml.Key
	for {
		s.skipSpace()
		k = append(k, s.simpleKey())
		s.skipSpace()
		if !s.at(".") {
			return k
		}
		s.pos++
	}
}

func (s *keyScanner) simpleKey() string {
	switch {
	case s.at(`"`):
		s.pos++
		start := s.pos
		s.skipBasic()
		end := max(start, s.pos-1)
		return unescape(s.src[start:end])
	case s.at("'"):
		s.pos++
		start := s.pos
		for s.pos < len(s.src) && s.src[s.pos] != '\'' && s.src[s.pos] != '\n' {
			s.pos++
		}
		k := s.src[start:s.pos]
		if s.pos < len(s.src) && s.src[s.pos] == '\'' {
			s.pos++
		}
		return k
	}
	start := s.pos
	for s.pos < len(s.src) && isBareKeyChar(s.src[s.pos]) {
		s.pos++
	}
	return s.src[start:s.pos]
}

func isBareKeyChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// skipBasic moves past the rest of a basic string and its closing quote.
func (s *keyScanner) skipBasic() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case '\\':
			s.pos += 2
		case '"':
			s.pos++
			return
		case '\n':
			return
		default:
			s.pos++
		}
	}
	s.pos = min(s.pos, len(s.src))
}

// skipMultiline moves past the rest of a multi-line string closed by delim
// (three double or three single quotes), which may end with up to two more
// quotes.
func (s *keyScanner) skipMultiline(delim string, escapes bool) {
	for s.pos < len(s.src) {
		if escapes && s.src[s.pos] == '\\' {
			s.pos += 2
			continue
		}
		if s.at(delim) {
			s.pos += len(delim)
			for n := 0; n < 2 && s.at(delim[:1]); n++ {
				s.pos++
			}
			return
		}
		s.pos++
	}
	s.pos = min(s.pos, len(s.src))
}

// value moves past a value; the keys of inline tables in it are emitted
// under path.
func (s *keyScanner) value(path toml.Key) {
	switch {
	case s.pos >= len(s.src):
	case s.at(`"""`):
		s.pos += 3
		s.skipMultiline(`"""`, true)
	case s.at("'''"):
		s.pos += 3
		s.skipMultiline("'''", false)
	case s.at(`"`):
		s.pos++
		s.skipBasic()
	case s.at("'"):
		s.pos++
		if i := strings.IndexAny(s.src[s.pos:], "'\n"); i >= 0 {
			s.pos += i + 1
		} else {
			s.pos = len(s.src)
		}
	case s.at("["):
		s.pos++
		s.items("]", func() { s.value(path) })
	case s.at("{"):
		s.pos++
		s.items("}", func() { s.keyValue(path) })
	default:
		s.scalar()
	}
}

// keyValue reads a key = value pair in the table at path, emitting its key
// and the keys of inline tables in its value.
func (s *keyScanner) keyValue(path toml.Key) {
	start := s.pos
	full := join(path, s.key())
	s.skipSpace()
	if s.at("=") {
		s.pos++
	}
	s.skipSpace()
	s.emit(full, start)
	s.value(full)
}

// items moves past the comma-separated items of an array or inline table
// and the close bracket that ends them, reading each item with item.
func (s *keyScanner) items(close string, item func()) {
	for {
		s.skipBlank()
		if s.pos >= len(s.src) || s.at(close) {
			s.pos = min(s.pos+1, len(s.src))
			return
		}
		if s.at(",") {
			s.pos++
			continue
		}
		before := s.pos
		item()
		if s.pos == before {
			s.pos++
		}
	}
}

// scalar moves past a number, boolean or date-time. A date and a time may be
// separated by a space.
func (s *keyScanner) scalar() {
	start := s.pos
	for s.pos < len(s.src) && !strings.ContainsRune(" \t\r\n,]}#", rune(s.src[s.pos])) {
		s.pos++
	}
	tok := s.src[start:s.pos]
	if len(tok) == 10 && tok[4] == '-' && tok[7] == '-' &&
		s.pos+1 < len(s.src) && s.src[s.pos] == ' ' && '0' <= s.src[s.pos+1] && s.src[s.pos+1] <= '9' {
		s.pos++
		s.scalar()
	}
}

// join returns a new key: a followed by b.
func join(a, b toml.Key) toml.Key {
	k := make(toml.Key, 0, len(a)+len(b))
	return append(append(k, a...), b...)
}

// unescape decodes the escapes of a TOML basic string, as the decoder does.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	skip := 0
	for i, c := range s {
		if skip > 0 {
			skip--
			continue
		}
		if c != '\\' || i+1 >= len(s) {
			b.WriteRune(c)
			continue
		}
		skip = 1
		switch e := s[i+1]; e {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+2+n > len(s) {
				b.WriteString(s[i:])
				return b.String()
			}
			r, _ := strconv.ParseUint(s[i+2:i+2+n], 16, 32)
			b.WriteRune(rune(r))
			skip = 1 + n
		default:
			b.WriteByte(e)
		}
	}
	return b.String()
}

// bomOf returns the byte order mark src starts with, which the decoder skips.
func bomOf(src string) string {
	for _, bom := range []string{"\xff\xfe", "\xfe\xff", "\xef\xbb\xbf"} {
		if strings.HasPrefix(src, bom) {
			return bom
		}
	}
	return ""
}

// splitKey reads a dotted key path as written in TOML ("fake.respond",
// `env."A B"`) into its parts.
func splitKey(path string) toml.Key {
	s := &keyScanner{src: path}
	return s.key()
}
