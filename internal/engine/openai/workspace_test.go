package openai

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSearchTreeBounds: search_text does not go deeper than
// maxSearchDepth folders (a deep tree made by an agent costs O(depth²)
// opens through the root) nor open more than maxSearchDirs folders (empty
// ones count), and says so; what lies within the bounds is found.
func TestSearchTreeBounds(t *testing.T) {
	dir := t.TempDir()
	ws, err := openWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()
	p := dir
	for i := 1; i <= maxSearchDepth+16; i++ {
		p = filepath.Join(p, "d")
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if i == 10 || i == maxSearchDepth || i == maxSearchDepth+1 {
			os.WriteFile(filepath.Join(p, "f.txt"), []byte("needle at "+strconv.Itoa(i)+"\n"), 0o644)
		}
	}
	out, err := ws.searchText(context.Background(), json.RawMessage(`{"pattern":"needle"}`))
	if err != nil || !strings.Contains(out, "needle at 10") || !strings.Contains(out, "needle at "+strconv.Itoa(maxSearchDepth)+"\n") ||
		strings.Contains(out, "needle at "+strconv.Itoa(maxSearchDepth+1)) || !strings.Contains(out, "levels down were not searched") {
		t.Errorf("deep search = %q, %v", out, err)
	}
	// From a sub-folder the depth counts from there.
	out, err = ws.searchText(context.Background(), json.RawMessage(`{"pattern":"needle","path":"d/d/d/d/d/d/d/d/d/d"}`))
	if err != nil || !strings.Contains(out, "needle at "+strconv.Itoa(maxSearchDepth+1)) {
		t.Errorf("search from a sub-folder = %q, %v", out, err)
	}
	os.RemoveAll(filepath.Join(dir, "d"))
	wide := filepath.Join(dir, "w")
	os.Mkdir(wide, 0o755)
	for i := range maxSearchDirs + 10 {
		if err := os.Mkdir(filepath.Join(wide, strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err = ws.searchText(context.Background(), json.RawMessage(`{"pattern":"needle"}`))
	if err != nil || !strings.Contains(out, "no match") || !strings.Contains(out, "stopped after "+strconv.Itoa(maxSearchDirs)+" folders") {
		t.Errorf("wide search = %q, %v", out, err)
	}
}

// TestReadFileRefusesBinary: a file with a NUL byte near its start is a
// tool error naming it, not bytes (and escape sequences) handed to the
// model and the events; text, UTF-8 included, is read.
func TestReadFileRefusesBinary(t *testing.T) {
	dir := t.TempDir()
	ws, err := openWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()
	os.WriteFile(filepath.Join(dir, "bin"), []byte{0x7f, 'E', 'L', 'F', 2, 1, 0, 0, 0x1b, ']', '5', '2'}, 0o644)
	os.WriteFile(filepath.Join(dir, "text"), []byte("héllo\n"), 0o644)
	if out, err := ws.readFile(json.RawMessage(`{"path":"bin"}`)); err == nil || !strings.Contains(err.Error(), "not a text file") {
		t.Errorf("read_file bin = %q, %v", out, err)
	}
	if out, err := ws.readFile(json.RawMessage(`{"path":"text"}`)); err != nil || out != "héllo\n" {
		t.Errorf("read_file text = %q, %v", out, err)
	}
}

// TestLongPathRefused: a path past maxPath bytes is a tool error, before
// anything is made (write_file once made 100,000 nested folders from one
// call, a tree os.RemoveAll could not delete).
func TestLongPathRefused(t *testing.T) {
	dir := t.TempDir()
	ws, err := openWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()
	b, _ := json.Marshal(map[string]string{"path": strings.Repeat("a/", maxPath/2) + "f.txt", "content": "x"})
	if out, err := ws.writeFile(b); err == nil || !strings.Contains(err.Error(), "more than 4096") {
		t.Errorf("write_file of a long path = %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Error("folders were made")
	}
	if out, err := ws.readFile(json.RawMessage(`{"path":"` + strings.Repeat("x", maxPath+1) + `"}`)); err == nil {
		t.Errorf("read_file of a long path = %q", out)
	}
}

// TestWriteResolvesLinksFirst: a write through a symbolic link names, and
// is checked as, the file it changes; a link into .git makes nothing there
// (not even the folders of the path) before it is refused (C15).
func TestWriteResolvesLinksFirst(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{".git", ".troupe"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), []byte("# team\n"), 0o644)
	os.Symlink(".git", filepath.Join(dir, "g"))
	os.Symlink("sub/../.troupe/team.toml", filepath.Join(dir, "notes.txt"))
	os.Symlink(filepath.Join(dir, ".git"), filepath.Join(dir, "abs"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	ws, err := openWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()
	for _, p := range []string{"g/index.lock/x", "g/MERGE_HEAD", "abs/hooks/pre-commit", "sub/../g/config"} {
		b, _ := json.Marshal(map[string]string{"path": p, "content": "x"})
		if out, err := ws.writeFile(b); err == nil || !strings.Contains(err.Error(), ".git") {
			t.Errorf("write_file %s = %q, %v; want refused naming .git", p, out, err)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dir, ".git"))
	if len(ents) != 0 {
		t.Errorf(".git holds %d entries after refused writes: %v", len(ents), ents)
	}
	if got, err := ws.resolve("notes.txt"); err != nil || got != ".troupe/team.toml" {
		t.Errorf("resolve(notes.txt) = %q, %v; want .troupe/team.toml", got, err)
	}
	if got, err := ws.resolve("new/dir/f.txt"); err != nil || got != "new/dir/f.txt" {
		t.Errorf("resolve(new/dir/f.txt) = %q, %v", got, err)
	}
	os.Symlink("/etc", filepath.Join(dir, "out"))
	if got, err := ws.resolve("out/passwd"); err == nil {
		t.Errorf("resolve(out/passwd) = %q, want an error", got)
	}
}
