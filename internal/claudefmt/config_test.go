package claudefmt

import (
	"strings"
	"testing"
)

// CLAUDE_CONFIG_DIR wins over HOME, as in the CLI.
func TestConfigDir(t *testing.T) {
	env := map[string]string{"HOME": "/home/p"}
	get := func(k string) string { return env[k] }
	if d, err := ConfigDir(get); err != nil || d != "/home/p/.claude" {
		t.Errorf("HOME only: %q, %v", d, err)
	}
	env["CLAUDE_CONFIG_DIR"] = "/etc/cc"
	if d, err := ConfigDir(get); err != nil || d != "/etc/cc" {
		t.Errorf("CLAUDE_CONFIG_DIR: %q, %v", d, err)
	}
}

// MungePath names a working directory's transcript folder as the CLI
// does: every character but [A-Za-z0-9] a "-"; past 200, cut and hashed.
func TestMungePath(t *testing.T) {
	if got := MungePath("/home/lab-a/work/fixproj"); got != "-home-lab-a-work-fixproj" {
		t.Errorf("MungePath = %q", got)
	}
	if got := MungePath("/tmp/été 1"); got != "-tmp--t--1" {
		t.Errorf("MungePath of accents and a space = %q", got)
	}
	long := "/" + strings.Repeat("a", 250)
	got := MungePath(long)
	if !strings.HasPrefix(got, "-"+strings.Repeat("a", 199)+"-") || len(got) <= 201 || MungePath(long+"b") == got {
		t.Errorf("MungePath of a long path = %q", got)
	}
}
