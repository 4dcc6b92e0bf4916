package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBrowserTeamEditAndAddProject: in the Team view the person edits the
// team file (a new agent is held, approved in Needs you, then in force),
// an edit over a file changed since is refused with the text kept; and a
// project is added by its folder, its team's grants shown before adding.
func TestBrowserTeamEditAndAddProject(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, "[[agent]]\nname = \"dev\"\nengine = \"fake\"\n")
	d := startDaemon(t, state, "--project", proj)
	p := newPage(t, d.login)
	setText := func(sel, text string) {
		t.Helper()
		eval[bool](p, fmt.Sprintf(`(t => { t.value = %q; t.dispatchEvent(new Event("input", {bubbles: true})); return true })(document.querySelector(%q))`, text, sel))
	}
	file := filepath.Join(proj, ".troupe", "team.toml")

	p.click("open the team", "#tab-team")
	p.wait("the team file", `document.querySelector("#team-text")?.value.includes('name = "dev"')`, 20*time.Second)
	edited := "[[agent]]\nname = \"dev\"\nengine = \"fake\"\n\n[[agent]]\nname = \"reviewer\"\nengine = \"fake\"\n"
	setText("#team-text", edited)
	p.click("save", "#team-save")
	p.wait("held for approval", `document.querySelector("#team-msg")?.innerText.includes("Needs you")`, 10*time.Second)
	if b, _ := os.ReadFile(file); string(b) != edited {
		t.Fatalf("the team file after the save: %q", b)
	}
	p.shot("team-saved")
	p.click("go to Needs you", "#team-msg a")
	p.wait("the held change", `document.querySelector('[data-team-change] [data-grant-agent="reviewer"]')`, 10*time.Second)
	p.click("approve it", "[data-team-change] button.allow")
	p.wait("reviewer in the team", `document.querySelector('#agents tr[data-agent="reviewer"]')`, 10*time.Second)

	// The file changes under the editor: the save is refused, the text kept.
	p.click("back to the team", "#tab-team")
	p.wait("the file as saved", `document.querySelector("#team-text")?.value.includes("reviewer")`, 10*time.Second)
	if err := os.WriteFile(file, []byte(edited+"# changed by someone else\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.expectConsole("409 (Conflict)") // the refused save
	setText("#team-text", edited+"# mine\n")
	p.click("save over the changed file", "#team-save")
	p.wait("the conflict said", `document.querySelector("#team-err")?.innerText.includes("changed since you opened it")`, 10*time.Second)
	if v := eval[string](p, `document.querySelector("#team-text").value`); !strings.HasSuffix(v, "# mine\n") {
		t.Errorf("the text after a refused save: %q", v)
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), "# mine") {
		t.Errorf("a refused save was written: %q", b)
	}

	// A new project, by its folder: its grants first, then added.
	other := t.TempDir()
	writeTeam(t, other, "[[agent]]\nname = \"builder\"\nengine = \"fake\"\npermission_mode = \"acceptEdits\"\n")
	setText("#add-path", other)
	p.click("show its team", "#add-preview")
	p.wait("its grants", `document.querySelector('#add-grants [data-grant-agent="builder"]')?.innerText.includes("acceptEdits")`, 10*time.Second)
	p.shot("add-project")
	p.click("add it", "#add-confirm")
	p.wait("the new project listed and selected", `[...document.querySelectorAll("#projects a.selected")].some(a => a.title === `+fmt.Sprintf("%q", other)+`)`, 10*time.Second)
	p.wait("its team shown", `document.querySelector('#agents tr[data-agent="builder"]')`, 10*time.Second)
	// A folder that is not one: said, nothing added.
	p.expectConsole("/api/projects/preview") // the refused preview
	setText("#add-path", filepath.Join(other, "missing"))
	p.click("show a missing folder", "#add-preview")
	p.wait("the error", `document.querySelector("#add-err")?.innerText.length > 0`, 10*time.Second)
}
