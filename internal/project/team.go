package project

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// maxTurnTimeout is the longest turn_timeout (and idle_timeout) a team file
// may set.
const maxTurnTimeout = 24 * time.Hour

var (
	namePattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	envVarPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// agentKeys are the keys an [[agent]] table may hold, besides the table named
// after its engine.
var agentKeys = []string{
	"name", "engine", "model", "mode", "turn_timeout", "idle_timeout", "tool_timeout",
	"prompt", "prompt_file", "allowed_tools", "permission_mode", "env",
	"command", "args", "workspace", "base", "sandbox", "runner", "runner_labels", "profile",
}

const nameRule = "use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit"

// ParseTeam parses and validates a team file. file is the path used in errors.
//
// Every error is a *troupe.FieldError naming file, the line and the field;
// when the file has several problems, the first one in file order is
// reported.
func ParseTeam(file string, data []byte) (*Team, error) {
	return ParseTeamChecked(file, data, nil)
}

// ParseTeamChecked parses and validates a team file as ParseTeam does, then
// passes every agent, in file order, to check (nil: no check), which
// validates what only its engine knows (engine.Engine.Check).
//
// An error from check is reported like the parser's own, as a
// *troupe.FieldError naming file, line and field. When the error is (or
// wraps) a *troupe.FieldError, its Field is the key path below the [[agent]]
// table ("fake.respond", "fake", "mode") and its Msg is kept; the line is
// that key's, or the engine table's, or the agent header's. Any other error
// is reported at the agent's engine key.
func ParseTeamChecked(file string, data []byte, check func(troupe.AgentSpec) error) (*Team, error) {
	return ParseTeamWith(file, data, TeamOptions{Check: check})
}

// TeamOptions are ParseTeamWith's; the zero value is ParseTeam's.
type TeamOptions struct {
	// Check is ParseTeamChecked's check; nil: none.
	Check func(troupe.AgentSpec) error
	// Profiles is the folder of the person's agent profiles (ProfileDir);
	// "": ProfileDir of this process's environment.
	Profiles string
	// Used, if set, is told of each profile the team names, with its
	// source (nil when it could not be read), also when the team does
	// not load.
	Used func(name string, src []byte)
}

// ParseTeamWith parses and validates a team file as ParseTeamChecked
// does, its agents' profiles (profile = "NAME") read from o.Profiles and
// merged in: the team returned is the resolved one. An error in a
// profile's key names the agent, the profile and the key, at the profile's
// file and line; a profile that is missing or does not decode is an error
// at the agent's profile key.
func ParseTeamWith(file string, data []byte, o TeamOptions) (*Team, error) {
	src := string(data)
	var raw map[string]any
	md, err := toml.Decode(src, &raw)
	if err != nil {
		return nil, syntaxError(file, src, err)
	}
	if o.Profiles == "" {
		o.Profiles = defaultProfileDir()
	}
	p := &teamParser{file: file, raw: raw, keys: md.Keys(), lines: keyLines(src, md.Keys()), profiles: o.Profiles, used: o.Used}
	if agents, ok := raw["agent"].([]map[string]any); ok {
		p.agents = agents
		p.expandProfiles()
	}
	team, err := p.parse()
	check := o.Check
	if err != nil || check == nil {
		return team, err
	}
	for n, a := range team.Agents {
		if err := check(a); err != nil {
			return nil, p.checkError(n, err)
		}
	}
	return team, nil
}

// checkError turns the error check returned for agent n into a FieldError
// at the key it names.
func (p *teamParser) checkError(n int, err error) error {
	a := p.team.Agents[n]
	field, msg := "engine", err.Error()
	if fe, ok := errors.AsType[*troupe.FieldError](err); ok && fe.Field != "" {
		field, msg = fe.Field, fe.Msg
	}
	at := p.agentKeyAt(n, field)
	file, label := p.file, fmt.Sprintf("agent %q: %s", a.Name, field)
	if at.origin.profile != "" {
		file, label = at.origin.file, fmt.Sprintf("agent %q: profile %q: %s", a.Name, at.origin.profile, field)
	}
	return &troupe.FieldError{File: file, Line: at.line, Field: label, Msg: msg}
}

// agentKeyAt returns where the key path below agent n's [[agent]] table
// is, like "fake.respond": the key itself, or the nearest enclosing table
// written, or the engine's table, or the agent's header. Its line is 0
// when the lines are unknown.
// The key may come from the agent's profile (agentKey.origin).
func (p *teamParser) agentKeyAt(n int, path string) agentKey {
	a := p.team.Agents[n]
	want := splitKey(path)
	for _, prefix := range append(prefixes(want), toml.Key{string(a.Engine)}) {
		for _, k := range p.agentKeys[n] {
			if k.line > 0 && len(k.rel) >= len(prefix) && slices.Equal(k.rel[:len(prefix)], prefix) {
				return k
			}
		}
	}
	return agentKey{line: a.Line}
}

// prefixes returns k, then k without its last part, and so on.
func prefixes(k toml.Key) []toml.Key {
	out := make([]toml.Key, 0, len(k))
	for i := len(k); i > 0; i-- {
		out = append(out, k[:i])
	}
	return out
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

// agentKey is a key of an [[agent]] table: its path below the table, and
// its line (0 when unknown).
type agentKey struct {
	rel    toml.Key
	line   int
	origin origin // the team file's, or the agent's profile's
}

// teamParser validates a decoded team file, walking its keys in file order so
// that the first problem it meets is the first one in the file.
type teamParser struct {
	file  string
	raw   map[string]any
	keys  []toml.Key
	lines []int // line of each key; nil when unknown

	agents    []map[string]any // the [[agent]] tables
	agentKeys [][]agentKey     // the keys of each agent, in file order
	team      Team
	named     map[string]int // header line of each agent name seen so far in this one file (parse state, not runtime state)

	// The checks read so far ([checks]), and the keys of each.
	checkSeen map[troupe.CheckName]map[string]bool

	// profiles is the folder of the person's profiles; used is told of
	// each one read. origins holds where each key comes from (the team
	// file, or a profile: expandProfiles), parallel to keys; at is the key
	// being read. profileErr is why agent n's profile did not load.
	profiles   string
	used       func(name string, src []byte)
	origins    []origin
	at         int
	profileErr map[int]error

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
		p.at = i
		if k[0] == "checks" {
			if err := p.checkKey(i, k[1:]); err != nil {
				return nil, err
			}
			continue
		}
		if k[0] != "agent" {
			return nil, p.errorf(i, toml.Key{k[0]}.String(), "unknown top-level key: a team file holds [[agent]] tables and a [checks] table")
		}
		if !isArray {
			return nil, p.errorf(i, "agent", "write each agent as an [[agent]] table, with double brackets")
		}
		if len(k) == 1 {
			if err := p.startAgent(i); err != nil {
				return nil, err
			}
			p.agentKeys = append(p.agentKeys, nil)
			continue
		}
		if p.cur == nil { // unreachable: [[agent]] comes before its keys
			continue
		}
		n := len(p.agentKeys) - 1
		p.agentKeys[n] = append(p.agentKeys[n], agentKey{rel: k[1:], line: p.line(i), origin: p.origin(i)})
		if err := p.agentKey(i, k[1:]); err != nil {
			return nil, err
		}
	}
	p.finishAgent()
	if err := p.finishChecks(); err != nil {
		return nil, err
	}
	return &p.team, nil
}

// MaxAgents bounds a team: each agent may run a session (a process of its
// engine), so a team file cannot ask for thousands (the daemon also bounds
// its live sessions, runtime.Options.MaxSessions).
const MaxAgents = 64

// startAgent begins the agent whose [[agent]] header is key i, checking that
// the keys every agent needs are present.
func (p *teamParser) startAgent(i int) error {
	p.finishAgent()
	n := len(p.team.Agents)
	if n >= len(p.agents) { // unreachable: one header per table
		return p.errorf(i, "agent", "unexpected [[agent]] table")
	}
	if n == MaxAgents {
		return p.errorf(i, "agent", fmt.Sprintf("%d agents: a team has at most %d; split it into projects", len(p.agents), MaxAgents))
	}
	m := p.agents[n]
	p.cur = &troupe.AgentSpec{
		Mode:        troupe.ModeStructured,
		TurnTimeout: troupe.DefaultTurnTimeout,
		IdleTimeout: troupe.DefaultIdleTimeout,
		ToolTimeout: troupe.DefaultToolTimeout,
		Line:        p.line(i),
	}
	p.seen = make(map[string]struct{})
	p.label = fmt.Sprintf("agent #%d", n+1)
	if s, ok := m["name"].(string); ok && namePattern.MatchString(s) {
		p.label = fmt.Sprintf("agent %q", s)
	}
	if err := p.profileErr[n]; err != nil {
		return p.profileError(i, err)
	}
	if _, ok := m["name"]; !ok {
		return p.errorf(i, p.field("name"), `missing: every agent needs one, like name = "lead"`)
	}
	if _, ok := m["engine"]; !ok {
		return p.errorf(i, p.field("engine"), "missing: set it to one of "+engineList())
	}
	return nil
}

// profileError reports that the profile of the agent whose header is key
// i did not load, at its profile key: `agent "x": profile "y": why`, why
// naming the profile's path (and line, for an error in it).
func (p *teamParser) profileError(i int, err error) error {
	name, _ := p.agents[len(p.team.Agents)]["profile"].(string)
	at := i
	for j := i + 1; j < len(p.keys) && !(len(p.keys[j]) == 1); j++ {
		if len(p.keys[j]) == 2 && p.keys[j][0] == "agent" && p.keys[j][1] == "profile" {
			at = j
			break
		}
	}
	if fe, ok := err.(*troupe.FieldError); ok && fe.File == "" {
		return p.errorf(at, p.field(fe.Field), fe.Msg) // the value itself is wrong
	}
	return p.errorf(at, p.field(fmt.Sprintf("profile %q", name)), err.Error())
}

func (p *teamParser) finishAgent() {
	if p.cur != nil {
		if p.cur.Remote() && p.cur.Workspace == "" {
			p.cur.Workspace = "worktree" // an agent on a runner works in a clone's worktree
		}
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
		d, err := p.duration(i, field, v, "turn_timeout", false)
		if err != nil {
			return err
		}
		a.TurnTimeout = d
	case "idle_timeout":
		d, err := p.duration(i, field, v, "idle_timeout", true)
		if err != nil {
			return err
		}
		a.IdleTimeout = d
	case "tool_timeout":
		d, err := p.duration(i, field, v, "tool_timeout", false)
		if err != nil {
			return err
		}
		a.ToolTimeout = d
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
		tools, err := p.strings(i, field, v, `allowed_tools = ["Read", "Edit"]`)
		if err != nil {
			return err
		}
		a.AllowedTools = tools
	case "args":
		args, err := p.strings(i, field, v, `args = ["--verbose"]`)
		if err != nil {
			return err
		}
		a.Args = args
	case "permission_mode":
		s, err := p.str(i, field, v, `permission_mode = "acceptEdits"`)
		if err != nil {
			return err
		}
		if s == "" {
			return p.errorf(i, field, "must not be empty: remove it for the engine's default, or name a mode like \"acceptEdits\"")
		}
		a.PermissionMode = s // its engine checks the value
	case "command":
		s, err := p.str(i, field, v, `command = "/opt/claude/bin/claude"`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(s) == "" {
			return p.errorf(i, field, "must not be empty: remove it to run the engine's CLI from PATH, or give the program's path")
		}
		a.Command = s
	case "workspace":
		s, err := p.str(i, field, v, `workspace = "worktree"`)
		if err != nil {
			return err
		}
		if s != "project" && s != "worktree" {
			return p.errorf(i, field, fmt.Sprintf(`unknown workspace %q: use "project" (the default: the project folder) or "worktree" (a git worktree of its own)`, s))
		}
		a.Workspace = s
		return p.checkRemoteWorkspace(i)
	case "runner", "runner_labels":
		return p.runner(i, name, field, v)
	case "base":
		s, err := p.str(i, field, v, `base = "main"`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(s) == "" || strings.HasPrefix(s, "-") {
			return p.errorf(i, field, fmt.Sprintf(`bad base %q: name a branch, tag or commit, like base = "main"`, s))
		}
		a.Base = s
	case "env":
		return p.setEnv(i, v)
	case "sandbox":
		return p.sandbox(i, field, v)
	case "profile":
		// Read by expandProfiles; its errors are startAgent's.
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

// runner reads runner (the runner the agent runs on) or runner_labels
// (the labels the runner must have), key i, whose value is v; the two
// exclude each other.
func (p *teamParser) runner(i int, name, field string, v any) error {
	other := "runner_labels"
	if name == other {
		other = "runner"
	}
	if _, ok := p.seen[other]; ok {
		return p.errorf(i, field, fmt.Sprintf("cannot be used with %s: name one runner (runner = \"gpu-box\"), or the labels a runner must have (runner_labels = [\"gpu\"]), not both", other))
	}
	a := p.cur
	if name == "runner" {
		s, err := p.str(i, field, v, `runner = "gpu-box"`)
		if err != nil {
			return err
		}
		if !troupe.RunnerName(s).Valid() {
			return p.errorf(i, field, fmt.Sprintf("bad runner name %q: %s (remove runner to run the agent on this machine)", s, troupe.RunnerNameRule))
		}
		a.Runner = troupe.RunnerName(s)
		return p.checkRemoteWorkspace(i)
	}
	labels, err := p.strings(i, field, v, `runner_labels = ["gpu"]`)
	if err != nil {
		return err
	}
	switch {
	case len(labels) == 0:
		return p.errorf(i, field, "empty: name the labels a runner must have, like runner_labels = [\"gpu\"], or remove it to run the agent on this machine")
	case len(labels) > troupe.MaxRunnerLabels:
		return p.errorf(i, field, fmt.Sprintf("%d labels: an agent may require at most %d", len(labels), troupe.MaxRunnerLabels))
	}
	for j, l := range labels {
		if !troupe.ValidRunnerLabel(l) {
			return p.errorf(i, field, fmt.Sprintf("bad label %q: %s", l, troupe.RunnerNameRule))
		}
		if slices.Contains(labels[:j], l) {
			return p.errorf(i, field, fmt.Sprintf("label %q is named twice: name each once", l))
		}
	}
	a.RunnerLabels = labels
	return p.checkRemoteWorkspace(i)
}

// checkRemoteWorkspace refuses workspace = "project" on an agent that runs
// on a runner, at the workspace key, once both are read (key i is the
// second of them): the project folder is on the daemon's machine.
func (p *teamParser) checkRemoteWorkspace(i int) error {
	a := p.cur
	if !a.Remote() || a.Workspace != "project" {
		return nil
	}
	line := p.line(i)
	for _, k := range p.agentKeys[len(p.agentKeys)-1] {
		if k.rel[0] == "workspace" && k.line > 0 {
			line = k.line
			break
		}
	}
	other := "runner"
	if a.Runner == "" {
		other = "runner_labels"
	}
	return &troupe.FieldError{File: p.file, Line: line, Field: p.field("workspace"),
		Msg: fmt.Sprintf(`"project" cannot be used with %s: an agent on a runner works in a worktree of its own on that machine; remove workspace (or set it to "worktree"), or remove %s`, other, other)}
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

// duration returns v, the value of key, as a duration of at most
// maxTurnTimeout, or an error showing how to write one. A zero duration is
// taken only when zero is true (idle_timeout = "0": never).
func (p *teamParser) duration(i int, field string, v any, key string, zero bool) (time.Duration, error) {
	s, err := p.str(i, field, v, key+` = "10m"`)
	if err != nil {
		return 0, err
	}
	how := `write it like "10m" or "1h30m"`
	if zero {
		how += `, or "0" for never`
	}
	d, perr := time.ParseDuration(s)
	switch {
	case perr != nil:
		return 0, p.errorf(i, field, fmt.Sprintf(`bad duration %q: %s`, s, how))
	case d < 0 || d == 0 && !zero:
		return 0, p.errorf(i, field, fmt.Sprintf(`duration %q is not positive: %s`, s, how))
	case d > maxTurnTimeout:
		return 0, p.errorf(i, field, fmt.Sprintf(`duration %q is longer than 24h: use at most "24h"`, s))
	}
	return d, nil
}

// strings returns v as an array of strings, or an error showing example.
func (p *teamParser) strings(i int, field string, v any, example string) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, p.errorf(i, field, fmt.Sprintf("must be an array of strings, not %s: write it like %s", typeName(v), example))
	}
	out := make([]string, 0, len(arr))
	for j, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, p.errorf(i, field, fmt.Sprintf("must be an array of strings, but item %d is %s: write it like %s", j+1, typeName(e), example))
		}
		out = append(out, s)
	}
	return out, nil
}

// str returns v as a string, or an error showing example.
func (p *teamParser) str(i int, field string, v any, example string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", p.errorf(i, field, fmt.Sprintf("must be a string, not %s: write it like %s", typeName(v), example))
	}
	return s, nil
}

// field names key of the current agent; a key its profile brought is
// named with the profile.
func (p *teamParser) field(key string) string {
	if o := p.origin(p.at); o.profile != "" {
		return fmt.Sprintf("%s: profile %q: %s", p.label, o.profile, key)
	}
	return p.label + ": " + key
}

// origin is where key i comes from.
func (p *teamParser) origin(i int) origin {
	if i < len(p.origins) {
		return p.origins[i]
	}
	return origin{}
}

// errorf returns a FieldError at key i, in the file it comes from.
func (p *teamParser) errorf(i int, field, msg string) error {
	file := p.file
	if o := p.origin(i); o.file != "" {
		file = o.file
	}
	return &troupe.FieldError{File: file, Line: p.line(i), Field: field, Msg: msg}
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
