package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// personGit is what the person's own git says of the project: status
// (but the lines of the files named in rewound), index and stash.
func personGit(t *testing.T, dir string, rewound ...string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"status", "--porcelain"}, {"diff", "--cached"}, {"stash", "list"}, {"rev-parse", "HEAD"}} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	lines:
		for l := range strings.Lines(string(out)) {
			for _, f := range rewound {
				if args[0] == "status" && strings.HasSuffix(strings.TrimSpace(l), " "+f) {
					continue lines
				}
			}
			b.WriteString(l)
		}
		b.WriteString("--\n")
	}
	return b.String()
}

// TestCheckpointsRewindThroughTheCLI: an openai agent's shell commands
// change files in a git project folder; troupe checkpoints lists a
// checkpoint per turn with its files, troupe diff --turn shows what the
// turn wrote, troupe rewind puts the files back and says how to undo,
// and the undo restores them; the person's git status, index, stash and
// HEAD never change (but for the files rewound). A second agent in the
// same folder has checkpoints of its own. A rewind while the agent is in
// a turn is refused, naming troupe interrupt.
func TestCheckpointsRewindThroughTheCLI(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	git := func(dir string, args ...string) {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=p", "-c", "user.email=p@p"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	r := newOpenAIRig(t, nil, "bypassPermissions", func(dir string) {
		git(dir, "init", "-q")
		for _, f := range []string{"f.txt", "staged.txt", "stashed.txt"} {
			os.WriteFile(filepath.Join(dir, f), []byte("v0\n"), 0o644)
		}
		git(dir, "add", "f.txt", "staged.txt", "stashed.txt")
		git(dir, "commit", "-qm", "the person's")
		os.WriteFile(filepath.Join(dir, "stashed.txt"), []byte("stash me\n"), 0o644)
		git(dir, "stash", "-q")
		os.WriteFile(filepath.Join(dir, "staged.txt"), []byte("staged\n"), 0o644)
		git(dir, "add", "staged.txt")
	})
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLIEnv(t, r.env, r.state, r.proj, args...)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(r.proj, name))
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(b)
	}
	checkpoints := func(agent string) []api.Checkpoint {
		t.Helper()
		out, errb, code := cli("checkpoints", agent, "--json")
		var res api.CheckpointsResponse
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Unavailable != "" {
			t.Fatalf("troupe checkpoints %s --json: %d %s %s", agent, code, out, errb)
		}
		return res.Checkpoints
	}
	person := personGit(t, r.proj)
	samePerson := func(step string) {
		t.Helper()
		if got := personGit(t, r.proj, "f.txt", "new.txt"); got != person {
			t.Fatalf("%s: the person's git changed:\n%s\nwas:\n%s", step, got, person)
		}
	}

	r.answer("x", `[[tool:run_command {"command":"echo v1 > f.txt"}]]`)
	r.answer("x", `[[tool:run_command {"command":"echo v2 > f.txt; echo n > new.txt"}]]`)
	if read("f.txt") != "v2\n" || read("new.txt") != "n\n" {
		t.Fatalf("the agent's commands wrote f.txt %q, new.txt %q", read("f.txt"), read("new.txt"))
	}
	samePerson("after the turns")
	cps := checkpoints("x")
	if len(cps) != 2 || cps[0].Reason != "turn" || cps[0].Files != 1 || cps[1].Files != 2 || cps[0].Turn == "" || cps[1].Seq != 2 {
		t.Fatalf("checkpoints of x = %+v, want two turns: 1 file, then 2", cps)
	}
	out, errb, code := cli("checkpoints", "x")
	if code != 0 || !strings.Contains(out, "CHECKPOINT") || !strings.Contains(out, "turn "+string(cps[1].Turn)) {
		t.Fatalf("troupe checkpoints x: %d %s %s", code, out, errb)
	}
	out, errb, code = cli("diff", "x", "--turn", "2")
	if code != 0 || !strings.Contains(out, "f.txt") || !strings.Contains(out, "-v1\n+v2") || !strings.Contains(out, "new.txt") || !strings.Contains(out, "+n") {
		t.Fatalf("troupe diff x --turn 2: %d %s %s", code, out, errb)
	}
	if _, errb, code := cli("diff", "x", "--turn", "9"); code == 0 || !strings.Contains(errb, "troupe checkpoints x lists them") {
		t.Fatalf("troupe diff x --turn 9: %d %s, want an error naming troupe checkpoints", code, errb)
	}

	out, errb, code = cli("rewind", "x", "1")
	if code != 0 || !strings.Contains(out, "to undo: troupe rewind x 3") {
		t.Fatalf("troupe rewind x 1: %d %s %s", code, out, errb)
	}
	if read("f.txt") != "v1\n" || !strings.Contains(read("new.txt"), "no such file") {
		t.Fatalf("after the rewind f.txt %q, new.txt %q; want v1 and gone", read("f.txt"), read("new.txt"))
	}
	samePerson("after the rewind")
	if _, errb, code := cli("rewind", "x", "3"); code != 0 {
		t.Fatalf("troupe rewind x 3 (the undo): %d %s", code, errb)
	}
	if read("f.txt") != "v2\n" || read("new.txt") != "n\n" {
		t.Fatalf("after the undo f.txt %q, new.txt %q; want v2 and n", read("f.txt"), read("new.txt"))
	}
	samePerson("after the undo")
	if cps := checkpoints("x"); len(cps) != 4 || cps[2].Reason != "rewind to 1" || cps[3].Reason != "rewind to 3" {
		t.Fatalf("checkpoints of x after two rewinds = %+v", cps)
	}

	// The helper, in the same folder: its own checkpoints, from 1; its
	// turn changed nothing.
	r.answer("helper", "hello")
	if hs := checkpoints("helper"); len(hs) != 1 || hs[0].Seq != 1 || hs[0].Files != 0 || hs[0].Reason != "turn" {
		t.Fatalf("checkpoints of helper = %+v, want its one turn, no file", hs)
	}
	if cps := checkpoints("x"); len(cps) != 4 {
		t.Fatalf("x has %d checkpoints after the helper's turn, want 4", len(cps))
	}
	out, _, _ = cli("agents")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasSuffix(lines[0], "CHECKPOINTS  WHY") ||
		!strings.HasSuffix(lines[1], " on           -") || !strings.HasSuffix(lines[2], " on           -") {
		t.Errorf("troupe agents in a git project: %s; want checkpoints on", out)
	}

	// A rewind while x is in a turn: refused, nothing changed.
	done := make(chan troupe.Request, 1)
	go func() {
		req, _ := r.cl.Ask(r.ctx, r.p, "x", "[[sleep:5s]] slow", 0)
		done <- req
	}()
	r.waitState("x", troupe.StateBusy)
	if _, errb, code := cli("rewind", "x", "1"); code == 0 || !strings.Contains(errb, "troupe interrupt x") {
		t.Fatalf("troupe rewind x 1 in a turn: %d %s, want refused naming troupe interrupt", code, errb)
	}
	if read("f.txt") != "v2\n" {
		t.Fatalf("a refused rewind changed f.txt to %q", read("f.txt"))
	}
	if req := <-done; req.State != troupe.ReqAnswered {
		t.Fatalf("the slow ask = %+v", req)
	}
	samePerson("at the end")
}
