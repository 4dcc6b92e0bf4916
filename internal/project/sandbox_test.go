package project

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestParseTeamSandbox(t *testing.T) {
	no, yes := false, true
	for _, tt := range []struct {
		name, src string
		want      troupe.AgentSandbox
	}{
		{"default", "", troupe.AgentSandbox{}},
		{"off", "sandbox = false", troupe.AgentSandbox{Enabled: &no}},
		{"on", "sandbox = true", troupe.AgentSandbox{Enabled: &yes}},
		{"table", "[agent.sandbox]\nenabled = true\nreadable = [\"~/.config/tool\"]\nwritable = [\"/opt/cache\", \"build\"]\nhidden = [\"secrets\"]\nnetwork = false\n",
			troupe.AgentSandbox{Enabled: &yes, Readable: []string{"~/.config/tool"}, Writable: []string{"/opt/cache", "build"}, Hidden: []string{"secrets"}, Network: &no}},
		{"table off", "[agent.sandbox]\nenabled = false\n", troupe.AgentSandbox{Enabled: &no}},
		{"caps", "[agent.sandbox]\nmemory = \"4GiB\"\nprocesses = 512\n", troupe.AgentSandbox{Memory: 4 << 30, Processes: 512}},
		{"no caps", "[agent.sandbox]\nmemory = \"none\"\nprocesses = \"none\"\n", troupe.AgentSandbox{Memory: troupe.NoCap, Processes: troupe.NoCap}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			team, err := ParseTeam("team.toml", []byte("[[agent]]\nname = \"dev\"\nengine = \"fake\"\n"+tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if got := team.Agents[0].Sandbox; !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("sandbox = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseTeamSandboxBad(t *testing.T) {
	for _, tt := range []struct{ src, field, msg string }{
		{`sandbox = "off"`, "sandbox", "must be true, false"},
		{"[agent.sandbox]\nenabled = \"no\"\n", "sandbox.enabled", "true or false"},
		{"[agent.sandbox]\nnetwork = 0\n", "sandbox.network", "true or false"},
		{"[agent.sandbox]\nhidden = \"x\"\n", "sandbox.hidden", ""},
		{"[agent.sandbox]\nwritable = [\"/\"]\n", "sandbox.writable", "whole machine"},
		{"[agent.sandbox]\nreadable = [\"../other\"]\n", "sandbox.readable", "out of the workspace"},
		{"[agent.sandbox]\nwritable = [\"\"]\n", "sandbox.writable", "empty path"},
		{"[agent.sandbox]\nmounts = []\n", "sandbox.mounts", "unknown key"},
		{"[agent.sandbox]\nmemory = \"4 gigs\"\n", "sandbox.memory", `"4 gigs": want a size like "4GiB"`},
		{"[agent.sandbox]\nmemory = 4\n", "sandbox.memory", "must be a size"},
		{"[agent.sandbox]\nmemory = \"1MiB\"\n", "sandbox.memory", "at least 64MiB"},
		{"[agent.sandbox]\nprocesses = 2\n", "sandbox.processes", "at least 16"},
		{"[agent.sandbox]\nprocesses = \"many\"\n", "sandbox.processes", "processes = 512"},
	} {
		_, err := ParseTeam("team.toml", []byte("[[agent]]\nname = \"dev\"\nengine = \"fake\"\n"+tt.src))
		var fe *troupe.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%q: error %v, want a FieldError", tt.src, err)
			continue
		}
		if !strings.HasSuffix(fe.Field, tt.field) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: error %v (field %q), want field %q and %q", tt.src, err, fe.Field, tt.field, tt.msg)
		}
	}
}
