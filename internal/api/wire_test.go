package api_test

import (
	"encoding"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// The web UI's wire types (web/src/api.ts) are written by hand in
// TypeScript; this test holds them to the Go types the daemon encodes, so
// that a field renamed, added or made optional on one side fails here
// instead of showing blank in the browser.

// wireTypes maps each interface of web/src/api.ts to the Go type whose JSON
// it reads.
var wireTypes = map[string]reflect.Type{
	"Project":                reflect.TypeFor[api.Project](),
	"Agent":                  reflect.TypeFor[api.Agent](),
	"Message":                reflect.TypeFor[troupe.Message](),
	"MessageText":            reflect.TypeFor[api.MessageText](),
	"MessagePage":            reflect.TypeFor[api.Messages](),
	"Request":                reflect.TypeFor[troupe.Request](),
	"Verdict":                reflect.TypeFor[troupe.Verdict](),
	"Task":                   reflect.TypeFor[api.Task](),
	"Permission":             reflect.TypeFor[troupe.Permission](),
	"PermissionInputPage":    reflect.TypeFor[api.PermissionInput](),
	"Grant":                  reflect.TypeFor[api.Grant](),
	"AgentGrants":            reflect.TypeFor[api.AgentGrants](),
	"PendingTeam":            reflect.TypeFor[api.PendingTeam](),
	"ProjectPreview":         reflect.TypeFor[api.ProjectPreview](),
	"TeamFile":               reflect.TypeFor[api.TeamFile](),
	"CheckGrants":            reflect.TypeFor[api.CheckGrants](),
	"CheckResult":            reflect.TypeFor[api.CheckResult](),
	"Status":                 reflect.TypeFor[api.Status](),
	"JournalTool":            reflect.TypeFor[journal.Tool](),
	"Usage":                  reflect.TypeFor[journal.Usage](),
	"JournalEvent":           reflect.TypeFor[journal.Event](),
	"Turn":                   reflect.TypeFor[journal.Turn](),
	"AgentLog":               reflect.TypeFor[api.AgentLog](),
	"Checkpoint":             reflect.TypeFor[worktree.Checkpoint](),
	"CheckpointsResponse":    reflect.TypeFor[api.CheckpointsResponse](),
	"RewindResponse":         reflect.TypeFor[api.RewindResponse](),
	"Runner":                 reflect.TypeFor[api.RunnerInfo](),
	"RunnerAgent":            reflect.TypeFor[api.RunnerAgent](),
	"RunnerLoad":             reflect.TypeFor[api.RunnerLoad](),
	"ChangeStat":             reflect.TypeFor[worktree.Stat](),
	"AttemptMember":          reflect.TypeFor[attempt.Member](),
	"Attempt":                reflect.TypeFor[api.Attempt](),
	"AttemptRequest":         reflect.TypeFor[api.AttemptRequest](),
	"DiscardAttemptResponse": reflect.TypeFor[api.DiscardAttemptResponse](),
}

// unread are the Go fields the UI does not declare, by "Type.field", each
// with why it needs no place in the UI's types.
var unread = map[string]string{
	"Task.debug": "the supervisor's own record, for troupe task debug",
}

func TestWebWireTypesMatchTheAPI(t *testing.T) {
	src, err := os.ReadFile("../../web/src/api.ts")
	if err != nil {
		t.Fatal(err)
	}
	ifaces := tsInterfaces(string(src))
	for name, goType := range wireTypes {
		body, ok := ifaces[name]
		if !ok {
			t.Errorf("web/src/api.ts has no interface %s", name)
			continue
		}
		for _, problem := range compareWire(name, body, goType) {
			t.Error(problem)
		}
	}
	for name := range ifaces {
		if _, ok := wireTypes[name]; !ok {
			t.Errorf("web/src/api.ts declares %s, which this test does not hold to a Go type: add it to wireTypes", name)
		}
	}
}

var ifaceStart = regexp.MustCompile(`(?m)^export interface (\w+) \{`)

// tsInterfaces returns the body (between its braces) of every exported
// interface of src.
func tsInterfaces(src string) map[string]string {
	out := map[string]string{}
	for _, m := range ifaceStart.FindAllStringSubmatchIndex(src, -1) {
		open := m[1] - 1
		if end := closing(src, open); end > 0 {
			out[src[m[2]:m[3]]] = src[open+1 : end]
		}
	}
	return out
}

// closing is the index of the brace that closes the one at open, -1 if
// none.
func closing(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// tsField is one field of an interface: its name, whether it is optional,
// and its type as written.
type tsField struct {
	name     string
	optional bool
	typ      string
}

// tsFields splits an interface body into fields, at the semicolons and
// line ends outside nested braces; comments are dropped.
func tsFields(body string) []tsField {
	body = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(body, "")
	body = regexp.MustCompile(`//[^\n]*`).ReplaceAllString(body, "")
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{', '(':
			depth++
		case '}', ')':
			depth--
		case ';', '\n':
			if depth == 0 {
				parts = append(parts, body[start:i])
				start = i + 1
			}
		}
	}
	parts = append(parts, body[start:])
	var out []tsField
	for _, p := range parts {
		p = strings.TrimSpace(p)
		name, typ, ok := strings.Cut(p, ":")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		f := tsField{name: strings.TrimSuffix(name, "?"), optional: strings.HasSuffix(name, "?"), typ: strings.TrimSpace(typ)}
		out = append(out, f)
	}
	return out
}

// goField is one JSON field of a Go struct.
type goField struct {
	typ       reflect.Type
	omitempty bool
}

// goFields lists the JSON fields of struct type t, embedded structs'
// fields included.
func goFields(t reflect.Type) map[string]goField {
	out := map[string]goField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for k, v := range goFields(deref(f.Type)) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = goField{typ: f.Type, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")}
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	marshalerTyp = reflect.TypeFor[json.Marshaler]()
	textTyp      = reflect.TypeFor[encoding.TextMarshaler]()
)

// compareWire lists how the TypeScript interface body named where differs
// from Go type t.
func compareWire(where, body string, t reflect.Type) []string {
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return []string{fmt.Sprintf("%s: Go type %s is no struct", where, t)}
	}
	var problems []string
	gf := goFields(t)
	seen := map[string]bool{}
	for _, f := range tsFields(body) {
		seen[f.name] = true
		g, ok := gf[f.name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s.%s: the UI reads a field %s does not send", where, f.name, t))
			continue
		}
		if g.omitempty && !f.optional {
			problems = append(problems, fmt.Sprintf("%s.%s: Go omits it when empty (omitempty): mark it optional (%s?:)", where, f.name, f.name))
		}
		problems = append(problems, compareType(where+"."+f.name, f.typ, g.typ)...)
	}
	for name := range gf {
		if !seen[name] {
			if _, ok := unread[t.Name()+"."+name]; !ok {
				problems = append(problems, fmt.Sprintf("%s: %s sends %q, which the UI's type does not declare: add it to web/src/api.ts (or to unread, saying why)", where, t, name))
			}
		}
	}
	return problems
}

// compareType checks that TypeScript type ts can hold Go type g's JSON.
func compareType(where, ts string, g reflect.Type) []string {
	ts = strings.TrimSpace(ts)
	if g == rawType {
		return nil // any JSON: the UI declares what it expects
	}
	isPtr := g.Kind() == reflect.Pointer
	g = deref(g)
	kind := "object"
	switch {
	case g == timeType, g.Implements(textTyp):
		kind = "string"
	case g.Kind() == reflect.String:
		kind = "string"
	case g.Kind() == reflect.Bool:
		kind = "boolean"
	case g.Kind() >= reflect.Int && g.Kind() <= reflect.Float64:
		kind = "number"
	case g.Kind() == reflect.Slice || g.Kind() == reflect.Array:
		kind = "array"
	case g.Implements(marshalerTyp) || reflect.PointerTo(g).Implements(marshalerTyp):
		return nil // its own encoding
	}
	switch kind {
	case "array":
		elem, ok := strings.CutSuffix(ts, "[]")
		if !ok {
			return []string{fmt.Sprintf("%s: the UI says %s, Go sends a list of %s", where, ts, g.Elem())}
		}
		return compareType(where+"[]", elem, g.Elem())
	case "object":
		if g.Kind() == reflect.Map {
			return nil
		}
		if strings.HasPrefix(ts, "{") && strings.HasSuffix(ts, "}") {
			return compareWire(where, ts[1:len(ts)-1], g)
		}
		if goT, ok := wireTypes[ts]; ok {
			if deref(goT) != g {
				return []string{fmt.Sprintf("%s: the UI says %s (%s in Go), Go sends %s", where, ts, goT, g)}
			}
			return nil
		}
		return []string{fmt.Sprintf("%s: the UI says %s, Go sends the object %s", where, ts, g)}
	}
	if ts == kind || ts == "string" && kind == "string" {
		return nil
	}
	// A union of string literals, or a named alias of one, is a string.
	if kind == "string" && (strings.HasPrefix(ts, `"`) || ts == "AgentState") {
		return nil
	}
	if isPtr && strings.Contains(ts, "null") {
		return nil
	}
	return []string{fmt.Sprintf("%s: the UI says %s, Go sends a %s (%s)", where, ts, kind, g)}
}
