package project

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/troupe-dev/troupe/internal/projfile"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// An agent profile is the person's own agent definition, kept outside any
// project in ProfileDir as NAME.toml: the keys of an [[agent]] table but
// name (and profile: profiles do not nest), written at the top level, with
// its engine's table as [ENGINE] ([claude], [openai]...). An agent of a
// team that says profile = "NAME" gets every key of the profile it does not
// set itself: its own keys win, a table (an engine's options, sandbox)
// whole; env is merged variable by variable; prompt and prompt_file count
// as one key, as do runner and runner_labels. The team in force is the
// resolved one, so a profile's change goes through the approval of C17 as
// an edit of the team file would.

// ProfileDir is the folder of the person's agent profiles:
// $XDG_CONFIG_HOME/troupe/profiles, else ~/.config/troupe/profiles.
// getenv reads the environment (os.Getenv).
func ProfileDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "troupe", "profiles"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the profiles folder: %w: set HOME or XDG_CONFIG_HOME", err)
		}
		home = h
	}
	return filepath.Join(home, ".config", "troupe", "profiles"), nil
}

// defaultProfileDir is ProfileDir of this process's environment, "" when
// there is none (no profile is then found).
func defaultProfileDir() string {
	d, _ := ProfileDir(os.Getenv)
	return d
}

// ProfileFile is the path of profile name in dir.
func ProfileFile(dir, name string) string { return filepath.Join(dir, name+".toml") }

// Profile is one profile of the folder, as Profiles lists it.
type Profile struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Engine and Model are the profile's, when it sets them.
	Engine string `json:"engine,omitempty"`
	Model  string `json:"model,omitempty"`
	// Error is why the profile does not load ("" when it does).
	Error string `json:"error,omitempty"`
}

// Profiles lists the profiles in dir (the *.toml files named as an agent
// is), by name; none when dir does not exist. A profile that does not
// decode is listed with its Error. At most MaxProfiles are listed: cut
// says that the folder holds more.
func Profiles(dir string) (ps []Profile, cut bool, err error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list profiles: %w", err)
	}
	var out []Profile
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".toml")
		if !ok || !namePattern.MatchString(name) {
			continue
		}
		p := Profile{Name: name, Path: ProfileFile(dir, name)}
		m, _, _, err := readProfile(dir, name)
		if err != nil {
			p.Error = err.Error()
		} else {
			p.Engine, _ = m["engine"].(string)
			p.Model, _ = m["model"].(string)
		}
		if len(out) == MaxProfiles {
			return out, true, nil
		}
		out = append(out, p)
	}
	return out, false, nil
}

// MaxProfiles bounds what Profiles lists.
const MaxProfiles = 1000

// TeamProfiles returns, for each agent of a team file that names a
// profile, the profile's name, in file order ("" agents left out). It
// reads the file alone (the profiles are not); a file that does not
// decode has none.
func TeamProfiles(data []byte) []AgentProfile {
	var raw struct {
		Agent []struct {
			Name    string `toml:"name"`
			Profile string `toml:"profile"`
		} `toml:"agent"`
	}
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil
	}
	var out []AgentProfile
	for _, a := range raw.Agent {
		if a.Profile != "" {
			out = append(out, AgentProfile{Agent: troupe.AgentID(a.Name), Profile: a.Profile})
		}
	}
	return out
}

// AgentProfile is an agent that names a profile.
type AgentProfile struct {
	Agent   troupe.AgentID `json:"agent"`
	Profile string         `json:"profile"`
}

// readProfile reads and decodes profile name of dir: its table, its keys
// in file order with their lines, and its source.
func readProfile(dir, name string) (map[string]any, []toml.Key, []byte, error) {
	path := ProfileFile(dir, name)
	if dir == "" {
		return nil, nil, nil, fmt.Errorf("no profiles folder: set HOME or XDG_CONFIG_HOME")
	}
	src, _, err := projfile.Team.ReadIn(dir, name+".toml")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("%s does not exist: create it (troupe profiles lists the profiles there), or remove profile", path)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	var m map[string]any
	md, err := toml.Decode(string(src), &m)
	if err != nil {
		fe := syntaxError(path, string(src), err).(*troupe.FieldError)
		return nil, nil, src, fe
	}
	keys := md.Keys()
	lines := keyLines(string(src), keys)
	for i, k := range keys {
		if len(k) == 1 && (k[0] == "name" || k[0] == "profile") {
			line := 0
			if i < len(lines) {
				line = lines[i]
			}
			msg := "a profile does not name its agent: remove name (the team's [[agent]] names it)"
			if k[0] == "profile" {
				msg = "profiles do not nest: remove profile, and copy what this profile should share"
			}
			return nil, nil, src, &troupe.FieldError{File: path, Line: line, Field: k[0], Msg: msg}
		}
	}
	return m, keys, src, nil
}

// origin is where a key of the expanded team comes from: the team file
// (the zero origin), or a profile.
type origin struct {
	file    string // the profile's path
	profile string // its name
}

// pairs are keys that count as one when a profile is merged: an agent that
// sets either one takes neither from its profile.
var pairs = [][2]string{{"prompt", "prompt_file"}, {"runner", "runner_labels"}}

// expandProfiles merges, into each [[agent]] table that names a profile,
// the keys of that profile it does not set itself, and appends those keys
// to the parser's list after the agent's own, with the profile's lines.
// A profile that does not load is kept in p.profileErr, reported at the
// agent's profile key.
func (p *teamParser) expandProfiles() {
	if len(p.agents) == 0 {
		return
	}
	var keys []toml.Key
	var lines []int
	var origins []origin
	n, headers := -1, 0 // the agent whose keys are being copied; headers seen
	flush := func() {
		if n < 0 || n >= len(p.agents) {
			return
		}
		k, l, o := p.profileKeys(n)
		keys, lines, origins = append(keys, k...), append(lines, l...), append(origins, o...)
	}
	for i, k := range p.keys {
		if k[0] != "agent" || len(k) == 1 {
			flush()
			n = -1
			if k[0] == "agent" {
				n, headers = headers, headers+1 // this header's agent
			}
		}
		keys = append(keys, k)
		lines = append(lines, p.line(i))
		origins = append(origins, origin{})
	}
	flush()
	p.keys, p.lines, p.origins = keys, lines, origins
}

// profileKeys merges agent n's profile into its table and returns the keys
// it brought, prefixed with "agent", their lines and origin.
func (p *teamParser) profileKeys(n int) ([]toml.Key, []int, []origin) {
	m := p.agents[n]
	v, named := m["profile"]
	if !named {
		return nil, nil, nil
	}
	fail := func(err error) ([]toml.Key, []int, []origin) {
		if p.profileErr == nil {
			p.profileErr = map[int]error{}
		}
		p.profileErr[n] = err
		return nil, nil, nil
	}
	name, ok := v.(string)
	switch {
	case !ok:
		return fail(&troupe.FieldError{Field: "profile", Msg: fmt.Sprintf(`must be a string, not %s: write it like profile = "reviewer"`, typeName(v))})
	case !namePattern.MatchString(name):
		return fail(&troupe.FieldError{Field: "profile", Msg: fmt.Sprintf("bad profile name %q: %s (the file is NAME.toml in %s)", name, nameRule, p.profiles)})
	}
	pm, pkeys, src, err := readProfile(p.profiles, name)
	if p.used != nil {
		p.used(name, src)
	}
	if err != nil {
		return fail(err)
	}
	path := ProfileFile(p.profiles, name)
	plines := keyLines(string(src), pkeys)
	engine, _ := m["engine"].(string)
	if engine == "" {
		engine, _ = pm["engine"].(string)
	}
	take := map[string]bool{} // the profile's top-level keys the agent gets
	for k := range pm {
		if _, own := m[k]; own && k != "env" {
			continue
		}
		if slices.Contains(troupe.Engines, troupe.Engine(k)) && k != engine {
			continue // another engine's options: not this agent's
		}
		skip := false
		for _, pr := range pairs {
			if (k == pr[0] || k == pr[1]) && (m[pr[0]] != nil || m[pr[1]] != nil) {
				skip = true
			}
		}
		if !skip {
			take[k] = true
		}
	}
	var keys []toml.Key
	var lines []int
	var origins []origin
	ownEnv, _ := m["env"].(map[string]any)
	hasEnv := m["env"] != nil
	for j, k := range pkeys {
		if !take[k[0]] {
			continue
		}
		if k[0] == "env" && hasEnv {
			// Merged variable by variable: the agent's win.
			if len(k) != 2 || ownEnv == nil {
				continue
			}
			if _, own := ownEnv[k[1]]; own {
				continue
			}
			if penv, ok := pm["env"].(map[string]any); ok {
				ownEnv[k[1]] = penv[k[1]]
			}
		} else if len(k) == 1 {
			m[k[0]] = pm[k[0]]
		}
		keys = append(keys, append(toml.Key{"agent"}, k...))
		line := 0
		if j < len(plines) {
			line = plines[j]
		}
		lines = append(lines, line)
		origins = append(origins, origin{file: path, profile: name})
	}
	return keys, lines, origins
}
