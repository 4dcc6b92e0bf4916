package permission

import (
	"strings"
	"testing"
)

// TestDecideTable walks the whole table of the package doc (and the
// README): every mode against every class, plus allowed_tools.
func TestDecideTable(t *testing.T) {
	classes := []Class{Talk, Read, Edit, Command, Unknown}
	want := map[string]string{ // per mode, the verdicts for talk, read, edit, command, unknown
		"":          "AAQQQ",
		Default:     "AAQQQ",
		Auto:        "AAQQQ",
		Manual:      "AAQQQ",
		"weird":     "AAQQQ",
		AcceptEdits: "AAAQQ",
		Bypass:      "AAAAA",
		Plan:        "AADDQ",
		DontAsk:     "AADDD",
	}
	letter := map[Verdict]byte{Allow: 'A', Ask: 'Q', Deny: 'D'}
	for mode, w := range want {
		var got []byte
		for _, c := range classes {
			v, why := Decide(mode, nil, "tool", c)
			got = append(got, letter[v])
			if (v == Deny) != (why != "") {
				t.Errorf("mode %q class %s: verdict %v with reason %q", mode, c, v, why)
			}
		}
		if string(got) != w {
			t.Errorf("mode %q: %s, want %s", mode, got, w)
		}
	}
	for _, mode := range []string{"", Plan, DontAsk} {
		for _, name := range []string{"run_in_background", "mcp__troupe__run_in_background"} {
			if v, _ := Decide(mode, []string{name}, "run_in_background", Command); v != Allow {
				t.Errorf("mode %q with allowed_tools %s: %v, want allowed", mode, name, v)
			}
		}
	}
	if v, why := Decide(DontAsk, []string{"Bash"}, "Edit", Edit); v != Deny || !strings.Contains(why, "allowed_tools") {
		t.Errorf("dontAsk, Edit not allowed: %v %q", v, why)
	}
}

// TestRankFollowsTheTable: a mode ranks above another only if it lets
// through, without the person, everything the other does. (auto is left
// out: troupe's table asks as in default, but the engine's own tools are
// let through by its classifier, so it ranks just below bypassPermissions.)
func TestRankFollowsTheTable(t *testing.T) {
	modes := []string{DontAsk, Plan, Default, Manual, "", AcceptEdits, Bypass}
	through := func(m string) (n int) {
		for _, c := range []Class{Talk, Read, Edit, Command, Unknown} {
			if v, _ := Decide(m, nil, "t", c); v == Allow {
				n += 2
			} else if v == Ask {
				n++
			}
		}
		return n
	}
	for _, a := range modes {
		for _, b := range modes {
			ra, _ := Rank(a)
			rb, _ := Rank(b)
			if ra < rb && through(a) > through(b) {
				t.Errorf("%q ranks below %q but lets more through", a, b)
			}
		}
	}
	if _, ok := Rank("yolo"); ok {
		t.Error("an unknown mode has a rank")
	}
}
