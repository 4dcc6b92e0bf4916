package main

import (
	be "encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemonStopsWhenItsDatabaseIsDeleted: a send after the database file
// was deleted under the running daemon fails, saying so, and the daemon
// exits non-zero soon after rather than write into a deleted file.
func TestDaemonStopsWhenItsDatabaseIsDeleted(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	d := startDaemon(t, state, "--project", proj)
	// Nothing runs yet (no turn, so no journal batch): the next write is
	// the send's.
	if err := os.Remove(filepath.Join(state, "troupe.db")); err != nil {
		t.Fatal(err)
	}
	_, errs, code := runCLI(t, state, proj, "send", "lead", "after")
	t.Logf("send after the delete: %s", errs)
	// Another write of the daemon's own (its sessions index, a journal
	// batch) can find the file gone first, on a loaded machine: the daemon
	// has then stopped, and the send finds it not running.
	stoppedFirst := strings.Contains(errs, "daemon is not running")
	if code == 0 || !stoppedFirst && !strings.Contains(errs, "troupe.db is gone (the file was deleted)") {
		t.Errorf("send after the delete: exit %d, %q; want a failure naming the file", code, errs)
	}
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon still runs 10 s after its database was deleted")
	}
	if stoppedFirst && !strings.Contains(d.logs.String(), "the file was deleted") {
		t.Errorf("the daemon stopped before the send without saying its database was deleted; its log:\n%s", d.logs.String())
	}
	if ee, ok := errors.AsType[*exec.ExitError](d.err); !ok || ee.ExitCode() == 0 {
		t.Errorf("daemon exit: %v, want a non-zero status", d.err)
	}
	// Nothing of the deleted file is left to replay: the next start
	// creates a fresh database.
	startDaemon(t, state)
}

// TestDamagedDatabaseRefusedThenRepaired: a damaged database stops serve
// with what to do; doctor --repair is refused while a daemon runs, then
// exports what is readable; serve starts again.
func TestDamagedDatabaseRefusedThenRepaired(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	d := startDaemon(t, state, "--project", proj)
	for range 3 {
		mustTroupe(t, state, proj, "send", "lead", strings.Repeat("hello ", 100))
	}
	if _, errs, code := runCLI(t, state, proj, "doctor", "--repair"); code == 0 || !strings.Contains(errs, "stop it first") {
		t.Errorf("doctor --repair under a running daemon: exit %d %q, want a refusal", code, errs)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
	db := filepath.Join(state, "troupe.db")
	damageLeaf(t, db)

	_, errs, code := runCLI(t, state, proj, "serve", "--addr", "127.0.0.1:0")
	if want := "the database is damaged (quick_check: "; code == 0 || !strings.Contains(errs, want) ||
		!strings.Contains(errs, "(cp "+db+" "+db+".bad), then run troupe doctor --repair --state-dir "+state) {
		t.Fatalf("serve on a damaged database: exit %d, %q; want a refusal saying how to repair", code, errs)
	}
	out := mustTroupe(t, state, proj, "doctor", "--repair")
	if !strings.Contains(out, "damaged database moved to "+db+".damaged-") || !strings.Contains(out, "messages") {
		t.Errorf("doctor --repair said:\n%s", out)
	}
	t.Logf("doctor --repair:\n%s", out)
	startDaemon(t, state, "--project", proj)
	mustTroupe(t, state, proj, "send", "lead", "after the repair")
}

// damageLeaf overwrites, with junk, the last b-tree table leaf page
// (type 0x0d, past page 1) holding rows.
func damageLeaf(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int(be.BigEndian.Uint16(b[16:18]))
	page := -1
	for p := 1; (p+1)*size <= len(b); p++ {
		if b[p*size] == 0x0d && be.BigEndian.Uint16(b[p*size+3:]) > 0 {
			page = p
		}
	}
	if page < 0 {
		t.Fatal("no table leaf page with rows")
	}
	for i := range size {
		b[page*size+i] = byte(i*7 + 13)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStateDirWritableByOthersRefused: serve and the CLI refuse a state
// dir others can write, saying which chmod to run.
func TestStateDirWritableByOthersRefused(t *testing.T) {
	state := t.TempDir()
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	want := "state dir " + state + " is writable by others (mode 0777): run chmod 700 " + state
	for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0"}, {"status"}} {
		if _, errs, code := runCLI(t, state, state, args...); code == 0 || !strings.Contains(errs, want) {
			t.Errorf("troupe %v on a 0777 state dir: exit %d, %q; want %q", args, code, errs, want)
		}
	}
}
