package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMemoryCLI: the person's side of the memory notes, through the
// daemon: a note written with flags, edited in $EDITOR, listed, searched,
// shown as its file holds it, removed; --json parsed on each; a bad edit
// keeps the text typed and says where.
func TestMemoryCLI(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, "[[agent]]\nname = \"dev\"\nengine = \"fake\"\n")
	d := startDaemon(t, state, "--project", proj)
	defer d.stop(syscall.SIGTERM)
	cli := func(env []string, args ...string) (string, string, int) {
		t.Helper()
		return runCLIEnv(t, append(os.Environ(), env...), state, proj, args...)
	}
	mustJSON := func(out string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
	}

	if out, _, code := cli(nil, "memory", "list"); code != 0 || !strings.Contains(out, "no notes yet") {
		t.Fatalf("memory list on no notes: %d %q", code, out)
	}
	out, errOut, code := cli(nil, "memory", "edit", "Release Steps", "--description", "how a release goes out", "--body", "tag, then push\n", "--json")
	var saved struct {
		Name, Description, Type string
		Body                    *string
	}
	if code != 0 {
		t.Fatalf("memory edit with flags: %d\n%s%s", code, out, errOut)
	}
	mustJSON(out, &saved)
	if saved.Name != "release-steps" || saved.Body == nil || *saved.Body != "tag, then push\n" || saved.Type != "project" {
		t.Fatalf("the saved note: %+v", saved)
	}
	file := filepath.Join(proj, ".troupe", "memory", "release-steps.md")
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), "how a release goes out") {
		t.Fatalf("the note's file: %v\n%s", err, b)
	}

	// In the editor: a script standing for it changes the body.
	editor := filepath.Join(t.TempDir(), "ed.sh")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/then push/then push, then announce/' \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli([]string{"VISUAL=", "EDITOR=" + editor}, "memory", "edit", "release-steps"); code != 0 || !strings.Contains(out, "note release-steps saved") {
		t.Fatalf("memory edit in the editor: %d\n%s%s", code, out, errOut)
	}
	if out, _, code := cli([]string{"VISUAL=", "EDITOR=true"}, "memory", "edit", "release-steps"); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("memory edit left as it was: %d %q", code, out)
	}
	// An editor that breaks the front matter: refused, the text kept.
	breaker := filepath.Join(t.TempDir(), "break.sh")
	if err := os.WriteFile(breaker, []byte("#!/bin/sh\nsed -i 's/^description:.*//' \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = cli([]string{"VISUAL=", "EDITOR=" + breaker}, "memory", "edit", "release-steps")
	if code == 0 || !strings.Contains(errOut, "description") || !strings.Contains(errOut, "your text is in ") {
		t.Fatalf("a broken edit: %d\n%s", code, errOut)
	}
	kept := strings.TrimSpace(errOut[strings.Index(errOut, "your text is in ")+len("your text is in "):])
	kept = kept[:strings.IndexAny(kept, ": ")]
	if b, err := os.ReadFile(kept); err != nil || !strings.Contains(string(b), "then announce") {
		t.Errorf("the text of the broken edit, in %s: %v", kept, err)
	}

	out, _, code = cli(nil, "memory", "show", "release-steps")
	if code != 0 || !strings.HasPrefix(out, "---\n") || !strings.Contains(out, "tag, then push, then announce") {
		t.Fatalf("memory show: %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(file); string(b) != out {
		t.Errorf("memory show prints\n%s\nthe file holds\n%s", out, b)
	}
	if _, err := os.Stat(filepath.Dir(file)); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Notes []struct{ Name, Snippet string }
	}
	out, _, code = cli(nil, "memory", "search", "announce", "--json")
	if code != 0 {
		t.Fatalf("memory search: %d %s", code, out)
	}
	mustJSON(out, &list)
	if len(list.Notes) != 1 || list.Notes[0].Name != "release-steps" || !strings.Contains(list.Notes[0].Snippet, "announce") {
		t.Errorf("memory search announce: %+v", list)
	}
	if out, _, code := cli(nil, "memory", "list"); code != 0 || !strings.Contains(out, "release-steps") || !strings.Contains(out, "how a release goes out") {
		t.Errorf("memory list: %d\n%s", code, out)
	}

	if _, errOut, code := cli(nil, "memory", "show"); code == 0 || !strings.Contains(errOut, "like: troupe memory show") {
		t.Errorf("memory show without a name: %d %s", code, errOut)
	}
	if out, errOut, code := cli(nil, "memory", "rm", "release-steps"); code != 0 || !strings.Contains(out, "note release-steps removed") {
		t.Fatalf("memory rm: %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the note's file after rm: %v", err)
	}
	if _, errOut, code := cli(nil, "memory", "rm", "release-steps"); code == 0 || !strings.Contains(errOut, "no note of this name") {
		t.Errorf("memory rm of a missing note: %d %s", code, errOut)
	}
}
