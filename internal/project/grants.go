package project

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// The person approves every widening of a grant (contract C17). An agent's
// definition holds three kinds of fields:
//
//   - grants: engine, mode, command, args, env, workspace, base, runner
//     (the machine it runs on) and the engine's option table
//     ([agent.<engine>]: endpoints, key variables, limits). Any change to
//     one of them widens: it is held.
//   - bounds that can also narrow: allowed_tools (losing tools narrows,
//     gaining one widens), permission_mode (ordered by permission.Rank) and
//     runner_labels (a label more narrows the runners it may run on; any
//     other change widens).
//   - the rest (prompt, prompt_file, model, turn_timeout, idle_timeout,
//     tool_timeout)
//     applies at once.
//
// A new agent is held whole; a removed agent is gone at once.

// GrantChange is one field of an agent that a team file changes in a way
// that widens what the agent may do (or, for a new agent, one of its
// grants). Old is "" for a new agent.
type GrantChange struct {
	Field string `json:"field"`
	Old   string `json:"old,omitempty"`
	New   string `json:"new"`
}

// HeldAgent is an agent whose definition in the team file waits for the
// person: New when the approved team has no agent of that name.
type HeldAgent struct {
	Agent   troupe.AgentID `json:"agent"`
	New     bool           `json:"new,omitempty"`
	Changes []GrantChange  `json:"changes"`
}

// Pending is a team file whose widening changes wait for the person.
// Digest names the file's content: Approve and Reject take it, so that what
// the person decides on is what they saw. Rejected is set when the person
// rejected this very content; it then stays held (the approved team in
// force) but no longer asks.
type Pending struct {
	Project  troupe.ProjectID `json:"project"`
	Digest   string           `json:"digest"`
	Agents   []HeldAgent      `json:"agents"`
	Checks   []HeldCheck      `json:"checks,omitempty"`
	Rejected bool             `json:"rejected,omitempty"`
}

// HeldCheck is a check whose definition in the team file waits for the
// person (a check runs a command, C17): New when the approved team has no
// check of that name; the approved definition stays in force meanwhile.
type HeldCheck struct {
	Check   troupe.CheckName `json:"check"`
	New     bool             `json:"new,omitempty"`
	Changes []GrantChange    `json:"changes"`
}

// mergeChecks returns the checks in force when the approved team is
// approved and the team file holds file: a check whose command and dir are
// the approved ones and whose timeout is not longer applies at once (a
// shorter timeout narrows); a new check, or a changed command or dir, or
// a longer timeout, is held, the approved check (if any) staying in force.
// A check the file removes is gone at once.
func mergeChecks(approved, file *Team) (inForce []troupe.Check, held []HeldCheck) {
	if file == nil {
		return nil, nil
	}
	for _, f := range file.Checks {
		old, ok := approved.Check(f.Name)
		if !ok {
			held = append(held, HeldCheck{Check: f.Name, New: true, Changes: compareCheck(troupe.Check{}, f, true)})
			continue
		}
		if changes := compareCheck(old, f, false); len(changes) > 0 {
			held = append(held, HeldCheck{Check: f.Name, Changes: changes})
			inForce = append(inForce, old)
			continue
		}
		inForce = append(inForce, f)
	}
	return inForce, held
}

// compareCheck lists the changes from old to next that widen what the
// check runs; all lists every field of next (a new check).
func compareCheck(old, next troupe.Check, all bool) (widen []GrantChange) {
	if all || old.Command != next.Command {
		widen = append(widen, GrantChange{Field: "command", Old: quote(old.Command), New: quote(next.Command)})
	}
	if all || old.Dir != next.Dir {
		if all && next.Dir == "" {
			widen = append(widen, GrantChange{Field: "dir", New: "(the workspace)"})
		} else {
			widen = append(widen, GrantChange{Field: "dir", Old: quote(old.Dir), New: quote(next.Dir)})
		}
	}
	if all || next.Timeout > old.Timeout {
		o := ""
		if !all {
			o = old.Timeout.String()
		}
		widen = append(widen, GrantChange{Field: "timeout", Old: o, New: next.Timeout.String()})
	}
	return widen
}

// Grants lists the grants of a: what approving it as a new agent allows.
func Grants(a troupe.AgentSpec) []GrantChange {
	return compareAgent(troupe.AgentSpec{}, a, true)
}

// mergeTeam returns the team in force when the approved team is approved
// and the team file holds file: every agent of file whose change only
// narrows or is neutral, in file order, and for an agent whose change
// widens its approved definition; a new agent is left out. held lists the
// agents left out or kept as approved, with what they would gain.
func mergeTeam(approved, file *Team) (inForce *Team, held []HeldAgent) {
	if file == nil {
		return nil, nil
	}
	inForce = &Team{}
	for _, f := range file.Agents {
		old, ok := approved.Agent(f.Name)
		if !ok {
			held = append(held, HeldAgent{Agent: f.Name, New: true, Changes: Grants(f)})
			continue
		}
		if changes := compareAgent(old, f, false); len(changes) > 0 {
			held = append(held, HeldAgent{Agent: f.Name, Changes: changes})
			inForce.Agents = append(inForce.Agents, old)
			continue
		}
		inForce.Agents = append(inForce.Agents, f)
	}
	return inForce, held
}

// compareAgent lists the changes from old to next that widen a grant. all
// lists every grant next holds instead (a new agent's grants, old being
// empty). What narrows is not listed: it applies at once.
func compareAgent(old, next troupe.AgentSpec, all bool) (widen []GrantChange) {
	add := func(field, o, n string) {
		widen = append(widen, GrantChange{Field: field, Old: o, New: n})
	}
	if old.Engine != next.Engine {
		add("engine", string(old.Engine), string(next.Engine))
	}
	if old.Mode != next.Mode && (!all || next.Mode != troupe.ModeStructured) {
		add("mode", string(old.Mode), string(next.Mode))
	}
	if old.Command != next.Command {
		add("command", quote(old.Command), quote(next.Command))
	}
	if !slices.Equal(old.Args, next.Args) {
		add("args", quoteList(old.Args), quoteList(next.Args))
	}
	if !maps.Equal(old.Env, next.Env) {
		for _, k := range slices.Sorted(maps.Keys(merged(old.Env, next.Env))) {
			o, inOld := old.Env[k]
			n, inNext := next.Env[k]
			if inOld != inNext || o != n {
				add("env."+k, envValue(o, inOld), envValue(n, inNext))
			}
		}
	}
	if workspaceOf(old) != workspaceOf(next) && (!all || workspaceOf(next) != "project") {
		add("workspace", workspaceOf(old), workspaceOf(next))
	}
	if old.Base != next.Base {
		add("base", quote(old.Base), quote(next.Base))
	}
	if old.Runner != next.Runner {
		add("runner", quote(string(old.Runner)), quote(string(next.Runner)))
	}
	// A runner with every label of next has every label of old: adding
	// labels narrows the runners the agent may run on.
	if !slices.Equal(old.RunnerLabels, next.RunnerLabels) &&
		(len(old.RunnerLabels) == 0 || len(next.RunnerLabels) == 0 || len(missing(old.RunnerLabels, next.RunnerLabels)) > 0) {
		add("runner_labels", quoteList(old.RunnerLabels), quoteList(next.RunnerLabels))
	}
	engine := string(next.Engine)
	if engine == "" {
		engine = string(old.Engine)
	}
	for _, k := range slices.Sorted(maps.Keys(merged(old.Options, next.Options))) {
		o, inOld := old.Options[k]
		n, inNext := next.Options[k]
		if inOld != inNext || !reflect.DeepEqual(o, n) {
			add(engine+"."+k, optionValue(o, inOld), optionValue(n, inNext))
		}
	}
	if len(missing(next.AllowedTools, old.AllowedTools)) > 0 {
		add("allowed_tools", quoteList(old.AllowedTools), quoteList(next.AllowedTools))
	}
	compareSandbox(old.Sandbox, next.Sandbox, all, add)
	if old.PermissionMode != next.PermissionMode || all {
		o, okOld := permission.Rank(old.PermissionMode)
		n, okNext := permission.Rank(next.PermissionMode)
		if all || !okOld || !okNext || n > o {
			add("permission_mode", modeName(old.PermissionMode), modeName(next.PermissionMode))
		}
	}
	if all {
		for i := range widen {
			widen[i].Old = ""
		}
	}
	return widen
}

// compareSandbox adds the sandbox changes that widen what the agent may
// reach: the sandbox turned off or back to its engine's default (which may
// be off), a path made readable or writable, a hidden path shown, the
// network given back to commands that had none. Turning it on, hiding more
// and cutting the network narrow.
func compareSandbox(old, next troupe.AgentSandbox, all bool, add func(field, o, n string)) {
	on := func(b *bool) bool { return b != nil && *b }
	if !ptrEqual(old.Enabled, next.Enabled) && !on(next.Enabled) || all && next.Enabled != nil && !*next.Enabled {
		add("sandbox.enabled", boolText(old.Enabled, "default"), boolText(next.Enabled, "default"))
	}
	if len(missing(next.Readable, old.Readable)) > 0 || all && len(next.Readable) > 0 {
		add("sandbox.readable", quoteList(old.Readable), quoteList(next.Readable))
	}
	if len(missing(next.Writable, old.Writable)) > 0 || all && len(next.Writable) > 0 {
		add("sandbox.writable", quoteList(old.Writable), quoteList(next.Writable))
	}
	if len(missing(old.Hidden, next.Hidden)) > 0 {
		add("sandbox.hidden", quoteList(old.Hidden), quoteList(next.Hidden))
	}
	if old.Network != nil && !*old.Network && !(next.Network != nil && !*next.Network) {
		add("sandbox.network", boolText(old.Network, "default"), boolText(next.Network, "default"))
	}
	// A cap raised or removed widens (0 is none); lowered, it narrows.
	looser := func(o, n int64) bool { return o != 0 && (n == 0 || n > o) }
	om, op := old.Caps()
	nm, np := next.Caps()
	if looser(om, nm) || all && next.Memory == troupe.NoCap {
		add("sandbox.memory", capText(old.Memory, true), capText(next.Memory, true))
	}
	if looser(op, np) || all && (next.Processes == troupe.NoCap || next.Processes > troupe.DefaultProcessCap) {
		add("sandbox.processes", capText(old.Processes, false), capText(next.Processes, false))
	}
}

// capText is a cap as the team file writes it.
func capText(v int64, size bool) string {
	switch {
	case v == 0:
		return "default"
	case v == troupe.NoCap:
		return "none"
	case size:
		return cgroup.FormatSize(v)
	}
	return fmt.Sprint(v)
}

func ptrEqual(a, b *bool) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func boolText(b *bool, none string) string {
	if b == nil {
		return none
	}
	return fmt.Sprint(*b)
}

// missing returns the entries of a that are not in b.
func missing(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

func merged[V any](a, b map[string]V) map[string]V {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]V{}
	}
	maps.Copy(out, b)
	return out
}

func workspaceOf(a troupe.AgentSpec) string {
	if a.Workspace == "" {
		return "project"
	}
	return a.Workspace
}

func modeName(m string) string {
	if m == "" {
		return "(engine default)"
	}
	return m
}

func quote(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("%q", s)
}

func quoteList(l []string) string {
	if l == nil {
		return ""
	}
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func envValue(v string, ok bool) string {
	if !ok {
		return ""
	}
	return fmt.Sprintf("%q", v)
}

func optionValue(v any, ok bool) string {
	switch {
	case !ok:
		return ""
	case reflect.TypeOf(v) != nil && reflect.TypeOf(v).Kind() == reflect.String:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%v", v)
}

// digest names the content of a team file.
func digest(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// EncodeTeam writes t as a team file that ParseTeam reads back to the same
// agents: how the approved team is kept in the Store. A nil team encodes
// as an empty file.
func EncodeTeam(t *Team) ([]byte, error) {
	var tables []map[string]any
	if t != nil {
		for _, a := range t.Agents {
			m := map[string]any{
				"name":         string(a.Name),
				"engine":       string(a.Engine),
				"mode":         string(a.Mode),
				"turn_timeout": a.TurnTimeout.String(),
				"idle_timeout": durationText(a.IdleTimeout),
				"tool_timeout": a.ToolTimeout.String(),
			}
			set := func(k, v string) {
				if v != "" {
					m[k] = v
				}
			}
			set("model", a.Model)
			set("prompt", a.Prompt)
			set("prompt_file", a.PromptFile)
			set("permission_mode", a.PermissionMode)
			set("command", a.Command)
			set("workspace", a.Workspace)
			set("base", a.Base)
			set("runner", string(a.Runner))
			if a.RunnerLabels != nil {
				m["runner_labels"] = a.RunnerLabels
			}
			if a.AllowedTools != nil {
				m["allowed_tools"] = a.AllowedTools
			}
			if a.Args != nil {
				m["args"] = a.Args
			}
			if a.Env != nil {
				m["env"] = a.Env
			}
			if a.Options != nil {
				m[string(a.Engine)] = a.Options
			}
			if sb := encodeSandbox(a.Sandbox); sb != nil {
				m["sandbox"] = sb
			}
			tables = append(tables, m)
		}
	}
	doc := map[string]any{}
	if len(tables) > 0 {
		doc["agent"] = tables
	}
	if t != nil && len(t.Checks) > 0 {
		checks := map[string]any{}
		for _, c := range t.Checks {
			m := map[string]any{"command": c.Command, "timeout": c.Timeout.String()}
			if c.Dir != "" {
				m["dir"] = c.Dir
			}
			checks[string(c.Name)] = m
		}
		doc["checks"] = checks
	}
	if len(doc) == 0 {
		return []byte{}, nil
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(doc); err != nil {
		return nil, fmt.Errorf("encode team: %w", err)
	}
	return b.Bytes(), nil
}

// encodeSandbox is an agent's [agent.sandbox] table as ParseTeam reads
// it; nil for the default sandbox.
func encodeSandbox(sb troupe.AgentSandbox) map[string]any {
	m := map[string]any{}
	if sb.Enabled != nil {
		m["enabled"] = *sb.Enabled
	}
	if sb.Network != nil {
		m["network"] = *sb.Network
	}
	if sb.Memory != 0 {
		m["memory"] = capText(sb.Memory, true)
	}
	switch {
	case sb.Processes == troupe.NoCap:
		m["processes"] = "none"
	case sb.Processes > 0:
		m["processes"] = sb.Processes
	}
	for k, v := range map[string][]string{"readable": sb.Readable, "writable": sb.Writable, "hidden": sb.Hidden} {
		if v != nil {
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func durationText(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}
