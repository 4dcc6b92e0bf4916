package procstat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestParse: fields are counted from the last ')', whatever the command
// name holds; anything short or malformed is refused.
func TestParse(t *testing.T) {
	line := "4242 (we (ird) name) S 1 4242 4243 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615\n"
	st, err := Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stat{State: 'S', PPID: 1, PGRP: 4242, Session: 4243, Start: 987654}) {
		t.Errorf("got %+v", st)
	}
	if st.StartString() != "987654" || st.Zombie() {
		t.Errorf("StartString %q, Zombie %v", st.StartString(), st.Zombie())
	}
	rest := "Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21"
	for _, comm := range []string{"claude", "a b", "x) (y", ") ) (", "((", "evil) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 999"} {
		st, err := Parse(fmt.Appendf(nil, "123 (%s) %s\n", comm, rest))
		if err != nil || st.Start != 424242 || !st.Zombie() {
			t.Errorf("comm %q: got %+v, %v; want start 424242, a zombie", comm, st, err)
		}
	}
	for _, bad := range []string{
		"", "1 (x", "1 (x) S 1 2", "123 claude S 1",
		"1 (x) SS 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"1 (x) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 -5",
		"1 (c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 notanumber",
	} {
		if st, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted it: %+v", bad, st)
		}
	}
}

// TestRead: this process as the kernel sees it; a child that exited and
// was reaped is not there.
func TestRead(t *testing.T) {
	self, err := Read(os.Getpid())
	if err != nil || self.Start == 0 || self.PPID != os.Getppid() || self.Zombie() {
		t.Errorf("own stat: %+v, %v", self, err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if st, err := Read(cmd.Process.Pid); err == nil {
		// The pid may have been reused at once; then it is a later process.
		if st.Start < self.Start {
			t.Errorf("a reaped child's pid reads as %+v", st)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a reaped child: %v, want fs.ErrNotExist", err)
	}
}

func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("4242 (we (ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000"))
	f.Add([]byte("1 (x) Z 0 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Parse(b)
		if err == nil && !strings.Contains(string(b), ")") {
			t.Errorf("parsed %+v without a ')'", st)
		}
	})
}
