package memory

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Limits on a note. They keep the list every session starts with short and a
// note small enough to read in one tool call.
const (
	MaxNameLen        = 80      // bytes; a name is ASCII
	MaxDescriptionLen = 1024    // characters
	MaxTypeLen        = 40      // bytes; a type is ASCII
	MaxNoteSize       = 1 << 20 // bytes of the whole file, front matter included
)

// Note is one memory note.
type Note struct {
	Name        string // the file's name without ".md"; see Sanitize
	Description string // one line, shown in the list every session starts with
	Type        string // metadata.type: one lower-case word, such as project, user, feedback, reference
	Body        string // markdown after the front matter, kept byte for byte

	// Path and ModTime describe the file the note was read from or written
	// to; they are zero for a note built in memory. Path is absolute.
	Path    string
	ModTime time.Time
}

// Parse reads a note from data. file names the note in errors; Parse does
// not open it, and leaves Note.Path and Note.ModTime zero.
//
// The front matter is a strict subset of YAML, so that any file Parse
// accepts means the same to a YAML reader:
//
//   - The file starts with a line "---" (after an optional UTF-8 byte order
//     mark) and the front matter ends at the next line "---". Everything
//     after that line is the body, kept byte for byte. Lines may end in
//     "\r\n".
//   - Keys: name, description and metadata, a block whose indented lines
//     hold type. All three are required. A top-level type (the form Claude
//     Code's own memory files use) is read as metadata.type; giving both
//     with different values is an error.
//   - Values are plain scalars (the rest of the line, trimmed; " #" starts
//     a comment), 'single-quoted' (a doubled quote is one quote) or
//     "double-quoted" (with YAML's escapes). A value must fit on its line. Plain values may not
//     start with a YAML indicator ([ { | > & * ! % @ ` , - ? :) or contain
//     ": ": quote those. Values are strings, even 123 or true.
//   - Blank lines and comment lines are skipped. Indentation is spaces.
//   - Unknown keys, at the top level or in metadata, are skipped with
//     everything indented under them, unread and unchecked: other tools may
//     add their own. They are not kept: Format writes the three known keys
//     only.
//   - Duplicate keys are errors.
//
// Then the values are checked: name is a sanitized name (see Sanitize),
// description is one line of at most MaxDescriptionLen characters, type is
// one lower-case word (a-z, 0-9, '-', '_') of at most MaxTypeLen bytes, and
// the whole file is valid UTF-8 of at most MaxNoteSize bytes.
//
// Every error is a *troupe.FieldError naming file, the line and the field;
// the first problem in file order is reported.
func Parse(file string, data []byte) (Note, error) {
	n, _, err := parse(file, data)
	return n, err
}

// fieldLines are the lines where the front matter set each field, 0 when it
// did not.
type fieldLines struct{ name, description, typ int }

// The states of the front-matter scanner: what indented lines belong to.
const (
	blockNone    = iota // before the first key
	blockScalar         // a known key with a value: nothing may be indented under it
	blockMeta           // metadata
	blockUnknown        // an unknown key: indented lines are skipped
)

type parser struct {
	file string
	err  *troupe.FieldError
}

func (p *parser) fail(line int, field, msg string) {
	if p.err == nil {
		p.err = &troupe.FieldError{File: p.file, Line: line, Field: field, Msg: msg}
	}
}

var bom = []byte("\xef\xbb\xbf")

func parse(file string, data []byte) (Note, fieldLines, error) {
	p := &parser{file: file}
	n, lines := p.parse(data)
	if p.err != nil {
		return Note{}, fieldLines{}, p.err
	}
	return n, lines, nil
}

func (p *parser) parse(data []byte) (Note, fieldLines) {
	if len(data) > MaxNoteSize {
		p.fail(0, "", fmt.Sprintf("note is %d bytes, more than the limit of %d: split it into several notes", len(data), MaxNoteSize))
		return Note{}, fieldLines{}
	}
	data = bytes.TrimPrefix(data, bom)
	first, rest := cutLine(data)
	if !isDelimiter(first) {
		p.fail(1, "", `no front matter: a note starts with a line "---", then name, description and metadata.type, then a line "---"`)
		return Note{}, fieldLines{}
	}
	var (
		fm     []string // front matter lines; fm[i] is line i+2
		body   []byte
		closed bool
	)
	for len(rest) > 0 {
		var line []byte
		line, rest = cutLine(rest)
		if isDelimiter(line) {
			body, closed = rest, true
			break
		}
		fm = append(fm, string(line))
	}
	if !closed {
		p.fail(1, "", `front matter not closed: add a line "---" after its last key`)
		return Note{}, fieldLines{}
	}
	bodyLine := len(fm) + 3

	var (
		n       Note
		lines   fieldLines
		topType string
		topLine int
	)
	top := map[string]int{}  // top-level key → line
	meta := map[string]int{} // metadata key → line
	block, metaBlock := blockNone, blockNone
	key, metaKey := "", ""
	metaIndent, metaLine := 0, 0
	for i, text := range fm {
		ln := i + 2
		if msg := checkText(text); msg != "" {
			p.fail(ln, "", msg)
			return Note{}, fieldLines{}
		}
		trimmed := strings.TrimLeft(text, " ")
		indent := len(text) - len(trimmed)
		if strings.TrimSpace(trimmed) == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if trimmed[0] == '\t' {
			p.fail(ln, "", "indented with a tab: indent with spaces")
			return Note{}, fieldLines{}
		}

		if indent == 0 {
			if block == blockUnknown && isSequenceItem(trimmed) {
				continue // an unknown key's list, written without indentation
			}
			k, v, ok := splitKey(trimmed)
			if !ok {
				p.fail(ln, "", `expected "key: value"`)
				return Note{}, fieldLines{}
			}
			if first, dup := top[k]; dup {
				p.fail(ln, k, fmt.Sprintf("duplicate key (first on line %d): keep one", first))
				return Note{}, fieldLines{}
			}
			top[k] = ln
			key, block = k, blockScalar
			switch k {
			case "name", "description", "type":
				s, msg := scalar(v)
				if msg != "" {
					p.fail(ln, k, msg)
					return Note{}, fieldLines{}
				}
				switch k {
				case "name":
					n.Name, lines.name = s, ln
				case "description":
					n.Description, lines.description = s, ln
				case "type":
					topType, topLine = s, ln
				}
			case "metadata":
				if v = strings.TrimLeft(v, " \t"); v != "" && v[0] != '#' {
					p.fail(ln, k, `must be an indented block of "key: value" lines, like "metadata:" then "  type: project"`)
					return Note{}, fieldLines{}
				}
				block, metaBlock, metaIndent, metaLine = blockMeta, blockNone, 0, ln
			default:
				block = blockUnknown
			}
			continue
		}

		switch block {
		case blockNone:
			p.fail(ln, "", `indented line before any key: start the front matter with "name: ..."`)
			return Note{}, fieldLines{}
		case blockUnknown:
			continue
		case blockScalar:
			p.fail(ln, key, fmt.Sprintf("the value continues on line %d: write it on one line (in quotes if needed)", ln))
			return Note{}, fieldLines{}
		}

		// In metadata.
		if metaIndent == 0 {
			metaIndent = indent
		}
		switch {
		case indent < metaIndent:
			p.fail(ln, "metadata", fmt.Sprintf("indented by %d spaces, but the line above by %d: align the keys of metadata", indent, metaIndent))
			return Note{}, fieldLines{}
		case indent > metaIndent || (metaBlock == blockUnknown && isSequenceItem(trimmed)):
			if metaBlock == blockUnknown {
				continue
			}
			p.fail(ln, "metadata."+metaKey, fmt.Sprintf("the value continues on line %d: write it on one line (in quotes if needed)", ln))
			return Note{}, fieldLines{}
		}
		k, v, ok := splitKey(trimmed)
		if !ok {
			p.fail(ln, "metadata", `expected "key: value"`)
			return Note{}, fieldLines{}
		}
		if first, dup := meta[k]; dup {
			p.fail(ln, "metadata."+k, fmt.Sprintf("duplicate key (first on line %d): keep one", first))
			return Note{}, fieldLines{}
		}
		meta[k] = ln
		metaKey, metaBlock = k, blockUnknown
		if k == "type" {
			s, msg := scalar(v)
			if msg != "" {
				p.fail(ln, "metadata.type", msg)
				return Note{}, fieldLines{}
			}
			n.Type, lines.typ, metaBlock = s, ln, blockScalar
		}
	}

	if topLine > 0 {
		switch {
		case lines.typ == 0:
			n.Type, lines.typ = topType, topLine
		case topType != n.Type:
			p.fail(topLine, "type", fmt.Sprintf("%q differs from metadata.type %q on line %d: keep one", topType, n.Type, lines.typ))
			return Note{}, fieldLines{}
		}
	}

	// Where a missing field would go.
	if lines.name == 0 {
		lines.name = 1
	}
	if lines.description == 0 {
		lines.description = 1
	}
	if lines.typ == 0 {
		lines.typ = max(metaLine, 1)
	}
	if field, msg := checkNote(n); msg != "" {
		line := map[string]int{"name": lines.name, "description": lines.description, "metadata.type": lines.typ}[field]
		p.fail(line, field, msg)
		return Note{}, fieldLines{}
	}
	if at := invalidUTF8(body); at >= 0 {
		p.fail(bodyLine+bytes.Count(body[:at], []byte("\n")), "", "not valid UTF-8: save the file as UTF-8")
		return Note{}, fieldLines{}
	}
	n.Body = string(body)
	return n, lines
}

// checkNote checks the values of n's front matter. It returns the field at
// fault and what to do, or "" when n is good.
func checkNote(n Note) (field, msg string) {
	switch {
	case n.Name == "":
		return "name", `missing: add "name: <note-name>" (lower-case a-z, 0-9, '-' and '_')`
	case Sanitize(n.Name) != n.Name:
		msg := fmt.Sprintf("%q is not a note name: %s", n.Name, nameRule)
		if s := Sanitize(n.Name); s != "" {
			msg += fmt.Sprintf(", like %q", s)
		}
		return "name", msg
	case strings.TrimSpace(n.Description) == "":
		return "description", "missing: add a one-line summary of the note"
	case !utf8.ValidString(n.Description):
		return "description", "not valid UTF-8"
	case strings.ContainsFunc(n.Description, isControl):
		return "description", "must be one line of text, without line breaks or control characters"
	case utf8.RuneCountInString(n.Description) > MaxDescriptionLen:
		return "description", fmt.Sprintf("is %d characters, more than %d: shorten it and put the details in the body",
			utf8.RuneCountInString(n.Description), MaxDescriptionLen)
	case n.Type == "":
		return "metadata.type", `missing: add "metadata:" then an indented "type: project" (or user, feedback, reference)`
	case !validType(n.Type):
		return "metadata.type", fmt.Sprintf("%q is not a type: use one lower-case word of at most %d letters, digits, '-' or '_', like project, user, feedback or reference",
			n.Type, MaxTypeLen)
	}
	return "", ""
}

const nameRule = "use 1 to 80 lower-case letters, digits, '-' or '_', starting and ending with a letter or digit"

func validType(s string) bool {
	if s == "" || len(s) > MaxTypeLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !isNameByte(c) {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// Sanitize turns name into a note name, which is also the note's file name
// without ".md": lower-case ASCII letters, digits, '-' and '_', at most
// MaxNameLen bytes, starting and ending with a letter or digit. Letters are
// lower-cased; every run of other characters (spaces, dots, slashes,
// accented letters...) becomes one '-'; '-' and '_' are trimmed from both
// ends. So "../../etc/passwd" becomes "etc-passwd", and no name can hold a
// path separator, start with a dot or be "..".
//
// Sanitize returns "" when name has no ASCII letter or digit; such a name is
// refused. A name that is already sanitized is returned unchanged.
func Sanitize(name string) string {
	b := make([]byte, 0, min(len(name), MaxNameLen+1))
	dash := false
	for _, r := range name {
		if len(b) > MaxNameLen {
			break
		}
		r = unicode.ToLower(r)
		switch {
		case r < utf8.RuneSelf && isNameByte(byte(r)) && r != '-':
			if dash && len(b) > 0 {
				b = append(b, '-')
			}
			dash = false
			b = append(b, byte(r))
		default:
			dash = true
		}
	}
	b = b[:min(len(b), MaxNameLen)]
	s := strings.Trim(string(b), "-_")
	if !strings.ContainsFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }) {
		return ""
	}
	return s
}

// Format writes n in the format Parse reads: the front matter with name,
// description and metadata.type, then Body byte for byte. Values are quoted
// when a YAML reader would otherwise read them differently (as a number, a
// boolean, a comment...). Parse(Format(n)) gives back n's Name,
// Description, Type and Body whenever n is a valid note. Format does not
// check n; Store.Write does.
func Format(n Note) []byte {
	var b bytes.Buffer
	b.Grow(len(n.Body) + len(n.Description) + 100)
	b.WriteString("---\nname: ")
	b.WriteString(quote(n.Name))
	b.WriteString("\ndescription: ")
	b.WriteString(quote(n.Description))
	b.WriteString("\nmetadata:\n  type: ")
	b.WriteString(quote(n.Type))
	b.WriteString("\n---\n")
	b.WriteString(n.Body)
	return b.Bytes()
}

// cutLine splits off the first line of b, without its "\n" or "\r\n".
func cutLine(b []byte) (line, rest []byte) {
	line, rest, _ = bytes.Cut(b, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), rest
}

// isDelimiter reports whether line is "---", maybe followed by blanks.
func isDelimiter(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	return ok && len(bytes.Trim(rest, " \t")) == 0
}

func isSequenceItem(s string) bool { return s == "-" || strings.HasPrefix(s, "- ") }

// checkText refuses what YAML does not allow in a front matter line.
func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8: save the file as UTF-8"
	}
	for _, r := range s {
		if r != '\t' && !isPrintable(r) {
			return fmt.Sprintf("control character %U in the front matter: remove it", r)
		}
	}
	return ""
}

// splitKey splits "key: value" (or "key:" alone). Keys are plain words:
// letters, digits, '_', '-', '.' and inner spaces.
func splitKey(s string) (key, value string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return "", "", false
	}
	key, value = s[:i], s[i+1:]
	if value != "" && value[0] != ' ' && value[0] != '\t' {
		return "", "", false // "a:b" is one plain scalar in YAML, not a key
	}
	if strings.TrimSpace(key) != key {
		return "", "", false
	}
	for _, r := range key {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.' || r == ' ') {
			return "", "", false
		}
	}
	if key[0] == '-' {
		return "", "", false // a list item
	}
	return key, value, true
}

// scalar reads the value after "key:". It returns the value, or a message
// saying what is wrong.
func scalar(v string) (string, string) {
	v = strings.TrimLeft(v, " \t")
	if v == "" || v[0] == '#' {
		return "", "missing value"
	}
	switch v[0] {
	case '"':
		return doubleQuoted(v)
	case '\'':
		return singleQuoted(v)
	}
	if strings.IndexByte("[]{}|>&*!%@`,", v[0]) >= 0 || (strings.IndexByte("-?:", v[0]) >= 0 && (len(v) == 1 || v[1] == ' ' || v[1] == '\t')) {
		return "", fmt.Sprintf("starts with %q, which YAML reads specially: put the value in double quotes", v[:1])
	}
	if i := commentStart(v); i >= 0 {
		v = v[:i]
	}
	v = strings.TrimRight(v, " \t")
	if strings.Contains(v, ": ") || strings.Contains(v, ":\t") || strings.HasSuffix(v, ":") {
		return "", `contains ": ", which YAML reads as a nested key: put the value in double quotes`
	}
	return v, ""
}

// commentStart returns the index of a " #" or "\t#" comment in a plain
// value, or -1.
func commentStart(v string) int {
	for i := 1; i < len(v); i++ {
		if v[i] == '#' && (v[i-1] == ' ' || v[i-1] == '\t') {
			return i - 1
		}
	}
	return -1
}

// afterQuote checks what follows a closing quote: blanks, maybe a comment.
func afterQuote(rest string) string {
	if rest == "" {
		return ""
	}
	if rest[0] != ' ' && rest[0] != '\t' {
		return "text after the closing quote: remove it or move it inside the quotes"
	}
	if r := strings.TrimLeft(rest, " \t"); r != "" && r[0] != '#' {
		return "text after the closing quote: remove it or move it inside the quotes"
	}
	return ""
}

func singleQuoted(v string) (string, string) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		if v[i] != '\'' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 < len(v) && v[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		if msg := afterQuote(v[i+1:]); msg != "" {
			return "", msg
		}
		return b.String(), ""
	}
	return "", "quote not closed: close it with ' on the same line (write '' for a quote inside)"
}

// escapes are YAML's one-character escapes in double-quoted scalars.
var escapes = map[byte]string{
	'0': "\x00", 'a': "\a", 'b': "\b", 't': "\t", '\t': "\t", 'n': "\n", 'v': "\v", 'f': "\f",
	'r': "\r", 'e': "\x1b", ' ': " ", '"': `"`, '/': "/", '\\': `\`,
	'N': "\u0085", '_': "\u00a0", 'L': "\u2028", 'P': "\u2029",
}

func doubleQuoted(v string) (string, string) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch c {
		case '"':
			if msg := afterQuote(v[i+1:]); msg != "" {
				return "", msg
			}
			return b.String(), ""
		case '\\':
			if i+1 >= len(v) {
				return "", `quote not closed: close it with " on the same line`
			}
			e := v[i+1]
			if s, ok := escapes[e]; ok {
				b.WriteString(s)
				i++
				continue
			}
			digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if digits == 0 {
				return "", fmt.Sprintf(`unknown escape "\%c": write "\\" for a backslash`, e)
			}
			if i+2+digits > len(v) {
				return "", fmt.Sprintf(`escape "\%c" needs %d hex digits`, e, digits)
			}
			code, err := strconv.ParseUint(v[i+2:i+2+digits], 16, 32)
			if err != nil || !utf8.ValidRune(rune(code)) {
				return "", fmt.Sprintf("escape %q is not a valid character", v[i:i+2+digits])
			}
			b.WriteRune(rune(code))
			i += 1 + digits
		default:
			b.WriteByte(c)
		}
	}
	return "", `quote not closed: close it with " on the same line`
}

// quote returns s as a YAML scalar: plain when a YAML reader reads it back
// as the same string, double-quoted otherwise.
func quote(s string) string {
	if plainSafe(s) {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\uFFFD`) // an invalid byte has no YAML spelling
		case r < 0x100 && !isPrintable(r):
			fmt.Fprintf(&b, `\x%02X`, r)
		case r < 0x10000 && !isPrintable(r):
			fmt.Fprintf(&b, `\u%04X`, r)
		case !isPrintable(r):
			fmt.Fprintf(&b, `\U%08X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// plainSafe reports whether s can be written as a plain scalar that Parse
// and YAML readers read back as the string s. It is conservative: s starts
// with a letter, so it is never a number or a date.
func plainSafe(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	if s == "" || !unicode.IsLetter(r) || strings.TrimSpace(s) != s || !utf8.ValidString(s) {
		return false
	}
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "true", "false", "on", "off", "null":
		return false
	}
	if strings.Contains(s, ": ") || strings.HasSuffix(s, ":") || commentStart(s) >= 0 {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r == '\t' || !isPrintable(r) || r == '\ufeff' })
}

// isPrintable reports whether YAML allows r unescaped (tab aside) and it is
// not a line break.
func isPrintable(r rune) bool {
	switch {
	case r == 0x85 || r == 0x2028 || r == 0x2029:
		return false // line breaks to YAML 1.1
	case r >= 0x20 && r <= 0x7e, r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		return true
	}
	return false
}

// isControl reports whether r has no place in a one-line description.
func isControl(r rune) bool { return !isPrintable(r) }

// invalidUTF8 returns the offset of the first invalid UTF-8 byte in b, or -1.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
