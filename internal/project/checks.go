package project

// The [checks] table of a team file: named commands troupe runs in an
// agent's workspace (internal/check). A check is written as a string, its
// command (test = "go test ./..."), or as a table with command, timeout
// and dir.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// checkKeys are the keys a [checks.NAME] table may hold.
var checkKeys = []string{"command", "timeout", "dir"}

// Check returns the check named name of t, or false.
func (t *Team) Check(name troupe.CheckName) (troupe.Check, bool) {
	if t == nil {
		return troupe.Check{}, false
	}
	for _, c := range t.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return troupe.Check{}, false
}

// checkKey reads key i, whose path below [checks] is rel.
func (p *teamParser) checkKey(i int, rel toml.Key) error {
	t, ok := p.raw["checks"].(map[string]any)
	if !ok {
		return p.errorf(i, "checks", fmt.Sprintf(`must be a table, not %s: write it as a [checks] table, like test = "go test ./..."`, typeName(p.raw["checks"])))
	}
	if p.checkSeen == nil {
		p.checkSeen = make(map[troupe.CheckName]map[string]bool)
	}
	if len(rel) == 0 {
		return nil
	}
	name := troupe.CheckName(rel[0])
	field := "checks." + toml.Key{rel[0]}.String()
	if !name.Valid() {
		return p.errorf(i, field, fmt.Sprintf("bad check name %q: %s", rel[0], troupe.CheckNameRule))
	}
	v := t[rel[0]]
	// A check starts at its first key: its own, or (a dotted key like
	// test.command = "...") one of its fields.
	if _, seen := p.checkSeen[name]; !seen {
		if len(p.team.Checks) == troupe.MaxChecks {
			return p.errorf(i, field, fmt.Sprintf("a team declares at most %d checks: remove some, or run several commands in one", troupe.MaxChecks))
		}
		c := troupe.Check{Name: name, Timeout: troupe.DefaultCheckTimeout, Line: p.line(i)}
		switch v := v.(type) {
		case string:
			cmd, err := p.checkCommand(i, field, v)
			if err != nil {
				return err
			}
			c.Command = cmd
		case map[string]any:
		default:
			return p.errorf(i, field, fmt.Sprintf(`must be a command or a table, not %s: write it like %s = "go test ./..." or as a [checks.%s] table with command, timeout and dir`, typeName(v), name, name))
		}
		p.checkSeen[name] = map[string]bool{}
		p.team.Checks = append(p.team.Checks, c)
	}
	if len(rel) == 1 {
		return nil
	}
	n := slices.IndexFunc(p.team.Checks, func(c troupe.Check) bool { return c.Name == name })
	table, isTable := v.(map[string]any)
	if n < 0 || !isTable { // unreachable: a check with fields is a table, started above
		return nil
	}
	c := &p.team.Checks[n]
	key := rel[1]
	if p.checkSeen[name][key] {
		return nil // a deeper key of a field already read
	}
	field += "." + toml.Key{key}.String()
	p.checkSeen[name][key] = true
	val := table[key]
	switch key {
	case "command":
		s, err := p.str(i, field, val, `command = "go test ./..."`)
		if err != nil {
			return err
		}
		if c.Command, err = p.checkCommand(i, field, s); err != nil {
			return err
		}
	case "timeout":
		d, err := p.duration(i, field, val, "timeout", false)
		if err != nil {
			return err
		}
		c.Timeout = d
	case "dir":
		s, err := p.str(i, field, val, `dir = "backend"`)
		if err != nil {
			return err
		}
		if err := CheckDirRule(s); err != nil {
			return p.errorf(i, field, err.Error())
		}
		c.Dir = s
	default:
		return p.errorf(i, field, "unknown key: a check may set "+strings.Join(checkKeys, ", "))
	}
	return nil
}

// checkCommand validates a check's command.
func (p *teamParser) checkCommand(i int, field, s string) (string, error) {
	switch {
	case strings.TrimSpace(s) == "":
		return "", p.errorf(i, field, `must not be empty: give the shell command to run, like "go test ./..."`)
	case strings.ContainsRune(s, 0):
		return "", p.errorf(i, field, "holds a NUL byte: give a shell command")
	}
	return s, nil
}

// finishChecks checks that every check table named its command.
func (p *teamParser) finishChecks() error {
	for _, c := range p.team.Checks {
		if c.Command == "" {
			return &troupe.FieldError{File: p.file, Line: c.Line, Field: "checks." + string(c.Name) + ".command",
				Msg: `missing: every check needs one, like command = "go test ./..."`}
		}
	}
	return nil
}

// CheckDirRule returns why dir cannot be a check's folder, nil when it
// can: relative to the workspace, clean, with no "..".
func CheckDirRule(dir string) error {
	switch {
	case dir == "":
		return fmt.Errorf(`must not be empty: remove it to run the check in the workspace itself, or name a folder in it, like dir = "backend"`)
	case filepath.IsAbs(dir):
		return fmt.Errorf(`bad dir %q: it is absolute; name a folder relative to the agent's workspace, like dir = "backend"`, dir)
	case !filepath.IsLocal(dir) || strings.ContainsRune(dir, 0):
		return fmt.Errorf(`bad dir %q: it leaves the workspace; name a folder inside it, like dir = "backend"`, dir)
	case filepath.Clean(dir) != dir:
		return fmt.Errorf(`bad dir %q: write it clean, as %q`, dir, filepath.Clean(dir))
	}
	return nil
}
