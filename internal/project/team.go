package project

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// maxTurnTimeout is the longest turn_timeout a team file may set.
const maxTurnTimeout = 24 * time.Hour

var (
	namePattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	envVarPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// agentKeys are the keys an [[agent]] table may hold, besides the table named
// after its engine.
var agentKeys = []string{
	"name", "engine", "model", "mode", "turn_timeout",
	"prompt", "prompt_file", "allowed_tools", "env",
}

const nameRule = "use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit"

// ParseTeam parses and validates a team file. file is the path used in errors.
//
// Every error is a *troupe.FieldError naming file, the line and the field;
// when the file has several problems, the first one in file order is
// reported.
func ParseTeam(file string, data []byte) (*Team, error) {
	src := string(data)
	var raw map[string]any
	md, err := toml.Decode(src, &raw)
	if err != nil {
		return nil, syntaxError(file, src, err)
	}
	p := &teamParser{file: file, raw: raw, keys: md.Keys(), lines: keyLines(src, md.Keys())}
	return p.parse()
}

// syntaxError turns an error from the TOML decoder into a FieldError.
func syntaxError(file, src string, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return &troupe.FieldError{File: file, Msg: "syntax error: " + err.Error()}
	}
	line := pe.Position.Line
	// The decoder reports an unexpected newline ("got '\n' instead") on the
	// line after it; point at the line it ends instead. Its offsets skip a
	// byte order mark.
	src = strings.TrimPrefix(src, bomOf(src))
	if i := pe.Position.Start; 0 <= i && i <= len(src) && strings.Contains(pe.Message, `'\n'`) {
		if l := 1 + strings.Count(src[:i], "\n"); l == line-1 {
			line = l
		}
	}
	return &troupe.FieldError{File: file, Line: line, Msg: "syntax error: " + pe.Message}
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

// teamParser validates a decoded team file, walking its keys in file order so
// that the first problem it meets is the first one in the file.
type teamParser struct {
	file  string
	raw   map[string]any
	keys  []toml.Key
	lines []int // line of each key; nil when unknown

	agents []map[string]any // the [[agent]] tables
	team   Team
	named  map[string]int // header line of each agent name seen so far in this one file (parse state, not runtime state)

	// The agent being read.
	cur   *troupe.AgentSpec
	label string              // `agent "lead"` or `agent #2`
	seen  map[string]struct{} // its keys read so far; env entries as "env.NAME"
}

func (p *teamParser) parse() (*Team, error) {
	agents, isArray := p.raw["agent"].([]map[string]any)
	p.agents = agents
	p.named = make(map[string]int)
	for i, k := range p.keys {
		if k[0] != "agent" {
			return nil, p.errorf(i, toml.Key{k[0]}.String(), "unknown top-level key: a team file holds only [[agent]] tables")
		}
		if !isArray {
			return nil, p.errorf(i, "agent", "write each agent as an [[agent]] table, with double brackets")
		}
		if len(k) == 1 {
			if err := p.startAgent(i); err != nil {
				return nil, err
			}
			continue
		}
		if p.cur == nil { // unreachable: [[agent]] comes before its keys
			continue
		}
		if err := p.agentKey(i, k[1:]); err != nil {
			return nil, err
		}
	}
	p.finishAgent()
	return &p.team, nil
}

// startAgent begins the agent whose [[agent]] header is key i, checking that
// the keys every agent needs are present.
func (p *teamParser) startAgent(i int) error {
	p.finishAgent()
	n := len(p.team.Agents)
	if n >= len(p.agents) { // unreachable: one header per table
		return p.errorf(i, "agent", "unexpected [[agent]] table")
	}
	m := p.agents[n]
	p.cur = &troupe.AgentSpec{
		Mode:        troupe.ModeStructured,
		TurnTimeout: troupe.DefaultTurnTimeout,
		Line:        p.line(i),
	}
	p.seen = make(map[string]struct{})
	p.label = fmt.Sprintf("agent #%d", n+1)
	if s, ok := m["name"].(string); ok && namePattern.MatchString(s) {
		p.label = fmt.Sprintf("agent %q", s)
	}
	if _, ok := m["name"]; !ok {
		return p.errorf(i, p.field("name"), `missing: every agent needs one, like name = "lead"`)
	}
	if _, ok := m["engine"]; !ok {
		return p.errorf(i, p.field("engine"), "missing: set it to one of "+engineList())
	}
	return nil
}

func (p *teamParser) finishAgent() {
	if p.cur != nil {
		p.team.Agents = append(p.team.Agents, *p.cur)
		p.cur = nil
	}
}

// agentKey reads key i, whose path below the [[agent]] table is rel. Each
// field is read whole where it first appears; deeper keys of a field already
// read are skipped.
func (p *teamParser) agentKey(i int, rel toml.Key) error {
	name := rel[0]
	m := p.agents[len(p.team.Agents)]
	v := m[name]
	if name == "env" && len(rel) > 1 {
		if _, ok := p.seen["env"]; !ok {
			if err := p.setEnv(i, v); err != nil {
				return err
			}
		}
		return p.envEntry(i, rel[1], v.(map[string]any)[rel[1]])
	}
	if _, ok := p.seen[name]; ok {
		return nil
	}
	p.seen[name] = struct{}{}

	a := p.cur
	field := p.field(toml.Key{name}.String())
	switch name {
	case "name":
		s, err := p.str(i, field, v, `name = "lead"`)
		if err != nil {
			return err
		}
		switch {
		case s == "":
			return p.errorf(i, field, "must not be empty: "+nameRule)
		case !namePattern.MatchString(s):
			return p.errorf(i, field, fmt.Sprintf("bad name %q: %s", s, nameRule))
		}
		id := troupe.AgentID(s)
		if line, dup := p.named[string(id)]; dup {
			where := "another agent"
			if line > 0 {
				where = fmt.Sprintf("the agent on line %d", line)
			}
			return p.errorf(i, field, fmt.Sprintf("duplicate name %q: %s has it too; give each agent a unique name", s, where))
		}
		p.named[string(id)] = a.Line
		a.Name = id
	case "engine":
		s, err := p.str(i, field, v, `engine = "claude"`)
		if err != nil {
			return err
		}
		if !slices.Contains(troupe.Engines, troupe.Engine(s)) {
			return p.errorf(i, field, fmt.Sprintf("unknown engine %q: use one of %s", s, engineList()))
		}
		a.Engine = troupe.Engine(s)
	case "model":
		s, err := p.str(i, field, v, `model = "sonnet"`)
		if err != nil {
			return err
		}
		a.Model = s
	case "mode":
		s, err := p.str(i, field, v, `mode = "terminal"`)
		if err != nil {
			return err
		}
		switch troupe.Mode(s) {
		case troupe.ModeStructured, troupe.ModeTerminal:
		default:
			return p.errorf(i, field, fmt.Sprintf("unknown mode %q: use %q (the default) or %q", s, troupe.ModeStructured, troupe.ModeTerminal))
		}
		a.Mode = troupe.Mode(s)
	case "turn_timeout":
		s, err := p.str(i, field, v, `turn_timeout = "10m"`)
		if err != nil {
			return err
		}
		d, perr := time.ParseDuration(s)
		switch {
		case perr != nil:
			return p.errorf(i, field, fmt.Sprintf(`bad duration %q: write it like "10m" or "1h30m"`, s))
		case d <= 0:
			return p.errorf(i, field, fmt.Sprintf(`duration %q is not positive: write it like "10m" or "1h30m"`, s))
		case d > maxTurnTimeout:
			return p.errorf(i, field, fmt.Sprintf(`duration %q is longer than 24h: use at most "24h"`, s))
		}
		a.TurnTimeout = d
	case "prompt", "prompt_file":
		other := "prompt_file"
		if name == "prompt_file" {
			other = "prompt"
		}
		if _, ok := p.seen[other]; ok {
			return p.errorf(i, field, fmt.Sprintf("cannot be used with %s: keep one of them", other))
		}
		example := `prompt = "You review code."`
		if name == "prompt_file" {
			example = `prompt_file = "prompts/lead.md"`
		}
		s, err := p.str(i, field, v, example)
		if err != nil {
			return err
		}
		if name == "prompt" {
			a.Prompt = s
		} else {
			a.PromptFile = s
		}
	case "allowed_tools":
		const example = `write it like allowed_tools = ["Read", "Edit"]`
		arr, ok := v.([]any)
		if !ok {
			return p.errorf(i, field, fmt.Sprintf("must be an array of strings, not %s: %s", typeName(v), example))
		}
		tools := make([]string, 0, len(arr))
		for j, e := range arr {
			s, ok := e.(string)
			if !ok {
				return p.errorf(i, field, fmt.Sprintf("must be an array of strings, but item %d is %s: %s", j+1, typeName(e), example))
			}
			tools = append(tools, s)
		}
		a.AllowedTools = tools
	case "env":
		return p.setEnv(i, v)
	default:
		e := troupe.Engine(name)
		if !slices.Contains(troupe.Engines, e) {
			return p.errorf(i, field, unknownKeyMsg(name))
		}
		opts, ok := v.(map[string]any)
		if !ok {
			return p.errorf(i, field, fmt.Sprintf("must be a table of options for engine %q, not %s: write it as an [agent.%s] table", name, typeName(v), name))
		}
		// An unknown or missing engine is reported at its own key.
		if own, _ := m["engine"].(string); own != name && slices.Contains(troupe.Engines, troupe.Engine(own)) {
			return p.errorf(i, field, fmt.Sprintf("options for engine %q, but this agent's engine is %q: rename the table to [agent.%s] or remove it", name, own, own))
		}
		a.Options = opts
	}
	return nil
}

// setEnv reads the env table as a whole; its entries are read one by one.
func (p *teamParser) setEnv(i int, v any) error {
	p.seen["env"] = struct{}{}
	t, ok := v.(map[string]any)
	if !ok {
		return p.errorf(i, p.field("env"), fmt.Sprintf(`must be a table of strings, not %s: write it like env = { NAME = "value" }`, typeName(v)))
	}
	p.cur.Env = make(map[string]string, len(t))
	return nil
}

// envEntry reads the variable name of env, whose value is v.
func (p *teamParser) envEntry(i int, name string, v any) error {
	if _, ok := p.seen["env."+name]; ok {
		return nil
	}
	p.seen["env."+name] = struct{}{}
	field := p.field("env")
	if !envVarPattern.MatchString(name) {
		return p.errorf(i, field, fmt.Sprintf("bad variable name %q: use letters, digits and '_', not starting with a digit", name))
	}
	s, ok := v.(string)
	if !ok {
		return p.errorf(i, field, fmt.Sprintf(`variable %s must be a string, not %s: write it like %s = "value"`, name, typeName(v), name))
	}
	p.cur.Env[name] = s
	return nil
}

// str returns v as a string, or an error showing example.
func (p *teamParser) str(i int, field string, v any, example string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", p.errorf(i, field, fmt.Sprintf("must be a string, not %s: write it like %s", typeName(v), example))
	}
	return s, nil
}

// field names key of the current agent.
func (p *teamParser) field(key string) string { return p.label + ": " + key }

// errorf returns a FieldError at key i.
func (p *teamParser) errorf(i int, field, msg string) error {
	return &troupe.FieldError{File: p.file, Line: p.line(i), Field: field, Msg: msg}
}

// line returns the line of key i, or 0 when unknown.
func (p *teamParser) line(i int) int {
	if i >= len(p.lines) {
		return 0
	}
	return p.lines[i]
}

func engineList() string {
	names := make([]string, len(troupe.Engines))
	for i, e := range troupe.Engines {
		names[i] = string(e)
	}
	return strings.Join(names, ", ")
}

func unknownKeyMsg(key string) string {
	norm := strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	for _, k := range agentKeys {
		if k == norm {
			return "unknown key: did you mean " + k + "?"
		}
	}
	for _, e := range troupe.Engines {
		if string(e) == norm {
			return "unknown key: did you mean " + norm + "?"
		}
	}
	return "unknown key: an agent may set " + strings.Join(agentKeys, ", ") + " and an [agent.<engine>] table of engine options"
}

// typeName describes a decoded TOML value, with its article.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case []any:
		return "an array"
	case []map[string]any:
		return "an array of tables"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

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
			full := join(table, s.key())
			s.skipSpace()
			if s.at("=") {
				s.pos++
			}
			s.skipSpace()
			s.emit(full, start)
			s.value(full)
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
		for {
			s.skipBlank()
			if s.pos >= len(s.src) || s.at("]") {
				s.pos = min(s.pos+1, len(s.src))
				return
			}
			if s.at(",") {
				s.pos++
				continue
			}
			before := s.pos
			s.value(path)
			if s.pos == before {
				s.pos++
			}
		}
	case s.at("{"):
		s.pos++
		for {
			s.skipBlank()
			if s.pos >= len(s.src) || s.at("}") {
				s.pos = min(s.pos+1, len(s.src))
				return
			}
			if s.at(",") {
				s.pos++
				continue
			}
			start := s.pos
			full := join(path, s.key())
			s.skipSpace()
			if s.at("=") {
				s.pos++
			}
			s.skipSpace()
			s.emit(full, start)
			s.value(full)
			if s.pos == start {
				s.pos++
			}
		}
	default:
		s.scalar()
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
