package layout

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's top folder, seen from this package's folder.
const root = "../.."

var (
	// citation is a contract cited by number: C1, C15 (not C0, a set of
	// control characters, and not TestC4_..., a name).
	citation = regexp.MustCompile(`\bC([1-9][0-9]*)\b`)
	// heading is a contract's definition in docs/CONTRACTS.md.
	heading = regexp.MustCompile(`^## C([1-9][0-9]*) `)
	// outside is a citation of a document that is not in the repository:
	// the design brief this project started from, or a numbered section of
	// notes kept elsewhere.
	outside = regexp.MustCompile(`design\.md|§[0-9][0-9.]*`)
	// testName is a test named in docs/CONTRACTS.md, in backquotes.
	testName = regexp.MustCompile("`((?:Test|test)[A-Za-z0-9_]+)`")
	// testFunc is a test or suite case defined in a Go file.
	testFunc = regexp.MustCompile(`^func ((?:Test|test)[A-Za-z0-9_]+)\(`)
)

// TestContractCitations: every contract a Go file cites is defined in
// docs/CONTRACTS.md, every test that file names exists, and no Go or
// Markdown file cites a document outside the repository.
func TestContractCitations(t *testing.T) {
	defined := map[string]bool{}
	named := map[string]int{} // test name → line in CONTRACTS.md
	contracts := filepath.Join(root, "docs", "CONTRACTS.md")
	eachLine(t, contracts, func(n int, line string) {
		if m := heading.FindStringSubmatch(line); m != nil {
			defined[m[1]] = true
		}
		for _, m := range testName.FindAllStringSubmatch(line, -1) {
			named[m[1]] = n
		}
	})
	if len(defined) == 0 {
		t.Fatalf("%s defines no contract (headings \"## C<N> <title>\")", contracts)
	}

	tests := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == root:
			case strings.HasPrefix(name, "."), name == "node_modules", name == "testdata":
				return filepath.SkipDir // not ours, or data rather than citations
			}
			return nil
		}
		goFile := strings.HasSuffix(path, ".go")
		if !goFile && !strings.HasSuffix(path, ".md") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		eachLine(t, path, func(n int, line string) {
			if m := outside.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, a document outside the repository: cite docs/CONTRACTS.md (contracts), docs/TARGETS.md (limits) or docs/engines/ (engines' behaviour)", rel, n, m)
			}
			if !goFile {
				return
			}
			if m := testFunc.FindStringSubmatch(line); m != nil {
				tests[m[1]] = true
			}
			for _, m := range citation.FindAllStringSubmatch(line, -1) {
				if !defined[m[1]] {
					t.Errorf("%s:%d cites C%s, which docs/CONTRACTS.md does not define: fix the citation or add a \"## C%s\" section", rel, n, m[1], m[1])
				}
			}
		})
		return nil
	})
	if err != nil {
		t.Fatalf("walk the repository: %v", err)
	}
	for name, n := range named {
		if !tests[name] {
			t.Errorf("docs/CONTRACTS.md:%d names %s, which no Go file defines: rename it there too", n, name)
		}
	}
}

// eachLine calls f with each line of the file at path, numbered from 1.
func eachLine(t *testing.T, path string, f func(n int, line string)) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer file.Close()
	s := bufio.NewScanner(file)
	s.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; s.Scan(); n++ {
		f(n, s.Text())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
}
