package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/doctor"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// initEngines are the engines troupe init writes an agent for, in the
// order it prefers them for the lead.
var initEngines = []troupe.Engine{troupe.EngineClaude, troupe.EngineCodex, troupe.EngineOpenCode, troupe.EngineFake}

// initResult is what troupe init did (--json).
type initResult struct {
	Path     string `json:"path"`
	TeamFile string `json:"team_file"`
	// Written: the team file was written now; false: it was there and
	// was left as it is.
	Written bool            `json:"written"`
	Engines []troupe.Engine `json:"engines"`
	// Fallback: no engine was ready here, so the team is on the fake
	// engine.
	Fallback bool `json:"fallback,omitempty"`
	// NotReady are the engines whose CLI doctor found but that cannot
	// run yet (no login, not on PATH), with doctor's fixes.
	NotReady []initNotReady `json:"not_ready,omitempty"`
	// Daemon: "running" or "not running".
	Daemon string `json:"daemon"`
	// Project is the registered project's id ("" when the daemon is
	// down); Registered: registered now; false with a Project: it was.
	Project    troupe.ProjectID `json:"project,omitempty"`
	Registered bool             `json:"registered"`
	TeamError  string           `json:"team_error,omitempty"`
	// Changed: something was written or registered.
	Changed bool   `json:"changed"`
	Next    string `json:"next"`
}

type initNotReady struct {
	Engine troupe.Engine `json:"engine"`
	Why    []string      `json:"why"`
	Fixes  []string      `json:"fixes"`
}

func initCmd(g *globals) *cobra.Command {
	var engines []string
	c := &cobra.Command{
		Use:   "init [PATH]",
		Short: "Start a team in a folder: write a commented .troupe/team.toml for the engines you have and register the project",
		Long: "Write PATH/.troupe/team.toml (default: the current folder) with one agent per engine whose CLI\n" +
			"troupe doctor finds ready on this machine (claude, codex, opencode; --engine chooses instead, repeatable),\n" +
			"or troupe's built-in fake engine when there is none, so the team answers offline. Every key it sets\n" +
			"is explained in a comment, with commented examples of a worktree agent, a profile and checks.\n" +
			"Then register the folder with the running daemon (as troupe project add does), and print the\n" +
			"next command to try. An existing team file is never overwritten: run twice, init changes nothing.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "."
			if len(args) == 1 {
				path = args[0]
			}
			res, err := runInit(cmd.Context(), g, path, engines)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			printInit(g, res)
			return nil
		},
	}
	c.Flags().StringArrayVar(&engines, "engine", nil, "write an agent for this engine instead of those found: claude, codex, opencode or fake (repeatable)")
	c.Flags().BoolVar(&g.json, "json", false, "print what was done as JSON")
	return c
}

// runInit writes the team file (unless there is one) and registers the
// folder with the daemon when one runs.
func runInit(ctx context.Context, g *globals, path string, want []string) (initResult, error) {
	dir, err := filepath.Abs(path)
	if err != nil {
		return initResult{}, fmt.Errorf("init %s: %w", path, err)
	}
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return initResult{}, fmt.Errorf("init %s: the folder does not exist: create it (mkdir -p %s) or give another one", path, dir)
	case err != nil:
		return initResult{}, fmt.Errorf("init %s: %w", path, err)
	case !fi.IsDir():
		return initResult{}, fmt.Errorf("init %s: not a folder: give the project's folder", path)
	}
	res := initResult{Path: dir, TeamFile: filepath.Join(dir, project.TeamFile)}
	engines, err := parseInitEngines(want)
	if err != nil {
		return initResult{}, err
	}
	if fi, err := os.Stat(filepath.Dir(res.TeamFile)); err == nil && !fi.IsDir() {
		return initResult{}, fmt.Errorf("init %s: %s is not a folder: move it away, then run troupe init again", path, filepath.Dir(res.TeamFile))
	}
	if _, err := os.Lstat(res.TeamFile); err == nil {
		// Never overwritten: its agents are the person's.
		engines = nil
		if team, err := readTeamFile(dir); err == nil {
			for _, a := range team.Agents {
				if !slices.Contains(engines, a.Engine) {
					engines = append(engines, a.Engine)
				}
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return initResult{}, fmt.Errorf("init %s: %w", path, err)
	} else {
		if engines == nil {
			engines, res.NotReady = foundEngines(ctx)
		}
		if len(engines) == 0 {
			engines, res.Fallback = []troupe.Engine{troupe.EngineFake}, true
		}
		if err := writeTeam(dir, res.TeamFile, engines); err != nil {
			return initResult{}, err
		}
		res.Written, res.Changed = true, true
	}
	res.Engines = engines

	res.Daemon = "not running"
	cl, err := g.client()
	if err == nil {
		err = registerInit(ctx, cl, dir, &res)
	}
	switch {
	case errors.Is(err, client.ErrNotRunning):
	case err != nil:
		return res, fmt.Errorf("init %s: the team file is %s; register it: %w", path, res.TeamFile, err)
	}
	res.Next = nextCommand(dir, res)
	return res, nil
}

// parseInitEngines checks --engine's values; nil when none was given.
func parseInitEngines(want []string) ([]troupe.Engine, error) {
	var out []troupe.Engine
	for _, w := range want {
		e := troupe.Engine(strings.TrimSpace(w))
		if !slices.Contains(initEngines, e) {
			names := make([]string, len(initEngines))
			for i, x := range initEngines {
				names[i] = string(x)
			}
			return nil, fmt.Errorf("--engine %q: troupe init writes agents for %s; write other engines' agents in the team file by hand (README, \"Teams\")", w, strings.Join(names, ", "))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// foundEngines are the engines troupe doctor finds ready here (CLI on
// PATH, a login), and those it finds but that cannot run yet.
func foundEngines(ctx context.Context) ([]troupe.Engine, []initNotReady) {
	var ready []troupe.Engine
	var not []initNotReady
	for _, c := range doctor.Run(ctx, doctor.Options{}) {
		e := troupe.Engine(c.Engine)
		if c.CLI == "" || !slices.Contains(initEngines, e) {
			continue
		}
		switch {
		case c.OK:
			ready = append(ready, e)
		case c.Path != "":
			not = append(not, initNotReady{Engine: e, Why: c.Problems, Fixes: c.Fixes})
		}
	}
	return ready, not
}

// registerInit registers dir with the daemon, unless it is registered.
func registerInit(ctx context.Context, cl *client.Client, dir string, res *initResult) error {
	canon, err := project.Canonical(dir)
	if err != nil {
		return err
	}
	p, err := cl.ResolveProject(ctx, canon)
	if err == nil && p.Path == canon {
		res.Daemon, res.Project, res.TeamError = "running", p.ID, p.TeamError
		return nil
	}
	if err != nil && !errors.Is(err, troupe.ErrNotFound) {
		return err
	}
	res.Daemon = "running"
	p, err = cl.AddProject(ctx, canon)
	if err != nil {
		return err
	}
	res.Project, res.Registered, res.Changed, res.TeamError = p.ID, true, true, p.TeamError
	return nil
}

// agentName is the name troupe init gives the agent of engine e, the
// i-th it writes: the first one leads.
func agentName(i int, e troupe.Engine) string {
	if i == 0 {
		return "lead"
	}
	return string(e)
}

// nextCommand is the command to try next.
func nextCommand(dir string, res initResult) string {
	where := ""
	if wd, err := os.Getwd(); err != nil || !sameDir(wd, dir) {
		where = " --project " + shellQuote(dir)
	}
	lead := "lead"
	if !res.Written {
		if team, err := readTeamFile(dir); err == nil && len(team.Agents) > 0 {
			lead = string(team.Agents[0].Name)
		}
	}
	ask := fmt.Sprintf("troupe ask %s \"what is in this folder?\"%s", lead, where)
	if res.Daemon != "running" {
		return "troupe serve --project " + shellQuote(dir) + "   # then, in another terminal: " + ask
	}
	return ask
}

// readTeamFile parses dir's team file, its profiles resolved.
func readTeamFile(dir string) (*project.Team, error) {
	data, err := os.ReadFile(filepath.Join(dir, project.TeamFile))
	if err != nil {
		return nil, err
	}
	return project.ParseTeam(filepath.Join(dir, project.TeamFile), data)
}

func sameDir(a, b string) bool {
	ca, err1 := project.Canonical(a)
	cb, err2 := project.Canonical(b)
	return err1 == nil && err2 == nil && ca == cb
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func printInit(g *globals, res initResult) {
	if res.Written {
		fmt.Fprintf(g.out, "wrote %s: %s\n", res.TeamFile, describeAgents(res.Engines))
		if res.Fallback {
			fmt.Fprintln(g.out, "no engine CLI is ready on this machine (troupe doctor says how to install and log in to one): the lead runs on troupe's built-in fake engine, which answers offline; change its engine in the team file once you have one")
		}
	} else {
		fmt.Fprintf(g.out, "%s already exists: left as it is (troupe init never overwrites a team file: edit it, or remove it and run troupe init again)\n", res.TeamFile)
	}
	for _, n := range res.NotReady {
		fmt.Fprintf(g.out, "%s was found but is not ready (%s): %s; then add its agent to the team file\n", n.Engine, strings.Join(n.Why, "; "), strings.Join(n.Fixes, "; "))
	}
	switch {
	case res.Registered:
		fmt.Fprintf(g.out, "registered %s as project %s\n", res.Path, res.Project)
	case res.Project != "":
		fmt.Fprintf(g.out, "%s is already registered as project %s\n", res.Path, res.Project)
	default:
		fmt.Fprintln(g.out, "no troupe daemon is running, so the folder is not registered yet: the command below starts one with it")
	}
	if res.TeamError != "" {
		fmt.Fprintf(g.errw, "warning: the team file does not load: %s (fix it; troupe team diff shows what waits for you)\n", res.TeamError)
	}
	if !res.Changed {
		fmt.Fprintln(g.out, "nothing changed")
	}
	fmt.Fprintf(g.out, "next: %s\n", res.Next)
}

// describeAgents says which agents the team file has.
func describeAgents(engines []troupe.Engine) string {
	var parts []string
	for i, e := range engines {
		parts = append(parts, fmt.Sprintf("%s (%s)", agentName(i, e), e))
	}
	return plural(len(engines), "agent", "agents") + ": " + strings.Join(parts, ", ")
}

// writeTeam writes the commented team file, refusing to replace one.
func writeTeam(dir, file string, engines []troupe.Engine) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("init %s: make .troupe: %w: check the folder's permissions", dir, err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("init %s: %s appeared meanwhile: left as it is, run troupe init again", dir, file)
	}
	if err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	_, werr := f.WriteString(teamSource(engines))
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		os.Remove(file)
		return fmt.Errorf("init %s: write %s: %w", dir, file, werr)
	}
	return nil
}

// teamSource is the commented team file of an agent per engine.
func teamSource(engines []troupe.Engine) string {
	var b strings.Builder
	b.WriteString(`# This project's team, written by troupe init. Each [[agent]] table is one
# agent; troupe starts its engine's program when a message comes for it.
# Edit this file while the daemon runs: a change that narrows what an agent
# may do applies at once; one that widens it (a tool, a mode, a command, a
# folder) waits for you: troupe team diff, then troupe team approve.
# Every key is in README.md, "Teams".
`)
	for i, e := range engines {
		name := agentName(i, e)
		b.WriteString("\n[[agent]]\n")
		b.WriteString("# name: how you and the other agents address it (troupe ask " + name + " \"...\").\n")
		fmt.Fprintf(&b, "name = %q\n", name)
		b.WriteString("# engine: the program that runs it: claude, codex, opencode, openai, acp,\n# terminal, or fake (troupe's built-in scripted agent: offline, no key).\n")
		fmt.Fprintf(&b, "engine = %q\n", e)
		b.WriteString("# prompt: who it is, told at the start of each of its sessions.\n")
		if i == 0 {
			b.WriteString("prompt = \"You lead this project's team. Ask the other agents when it helps.\"\n")
		} else {
			b.WriteString("prompt = \"You work on this project with the lead; answer its questions.\"\n")
		}
		b.WriteString("# turn_timeout: how long it may stay silent in one turn before troupe ends\n# the turn (an ask to it then fails with no_reply).\n")
		b.WriteString("turn_timeout = \"10m\"\n")
		switch e {
		case troupe.EngineFake:
			b.WriteString("\n# [agent.fake]: the fake engine's script, run for each message ({text} is\n# the message). Replace engine = \"fake\" and this table with a real engine.\n")
			b.WriteString("[agent.fake]\nrespond = \"!say Hello from the fake engine: you said {text}\"\n")
		default:
			b.WriteString("# What it may do without asking you, for example (README, \"Permissions\"):\n")
			b.WriteString("# permission_mode = \"acceptEdits\"\n# allowed_tools = [\"Read\", \"Edit\"]\n")
		}
	}
	profiles, _ := project.ProfileDir(os.Getenv)
	engine := engines[0]
	fmt.Fprintf(&b, `
# More, uncommented when you want them:
#
# An agent in a git worktree of its own (branch troupe/coder): your checkout
# is untouched until troupe merge coder. The folder must be a git repository.
# [[agent]]
# name = "coder"
# engine = %[1]q
# workspace = "worktree"
#
# An agent from one of your profiles: %[2]s/reviewer.toml holds
# the keys of an agent (engine, model, permission_mode, prompt...) for every
# project; the agent's own keys win. troupe profiles lists yours.
# [[agent]]
# name = "reviewer"
# profile = "reviewer"
#
# The project's checks, run by troupe in an agent's workspace (troupe check test):
# [checks]
# test = "go test ./..."
`, engine, profiles)
	return b.String()
}
