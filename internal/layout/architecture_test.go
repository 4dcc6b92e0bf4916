package layout

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureTable: every package of the module has one row in
// ARCHITECTURE.md's table, and the row's imports column names exactly the
// module's packages its packages import (tests aside; a package listed in
// the same row is not counted), so the map cannot drift from the code.
func TestArchitectureTable(t *testing.T) {
	src, err := os.ReadFile("../../ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := tableRows(string(src))
	if len(rows) < 10 {
		t.Fatalf("ARCHITECTURE.md's package table has %d rows", len(rows))
	}
	byPath := map[string]pkg{}
	for _, p := range load(t) {
		byPath[short(p.ImportPath)] = p
	}
	listed := map[string]int{}
	for i, r := range rows {
		var imports []string
		for _, name := range r.packages {
			listed[name]++
			p, ok := byPath[name]
			if !ok {
				t.Errorf("row %d names %s, which is no package of the module", i+1, name)
				continue
			}
			for _, imp := range p.Imports {
				if s := short(imp); strings.HasPrefix(imp, mod) && !slices.Contains(r.packages, s) {
					imports = append(imports, s)
				}
			}
		}
		slices.Sort(imports)
		imports = slices.Compact(imports)
		if !slices.Equal(imports, r.imports) {
			t.Errorf("ARCHITECTURE.md, the row of %s: imports %q, the code imports %q", strings.Join(r.packages, ", "), strings.Join(r.imports, ", "), strings.Join(imports, ", "))
		}
	}
	for name := range byPath {
		if listed[name] != 1 {
			t.Errorf("%s is in %d rows of ARCHITECTURE.md's package table, want 1", name, listed[name])
		}
	}
}

// short is a package's path as the table writes it: without the module and
// internal/ ("engine/claude", "cmd/troupe").
func short(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, mod), "internal/")
}

type archRow struct {
	packages []string // short paths
	imports  []string // sorted
}

var backticked = regexp.MustCompile("`([^`]+)`")

// tableRows reads the package table: the first cell's backticked paths
// (a path without a folder is under the previous one's: `inbox/inboxtest`
// after `internal/store/storetest` is internal/inbox/inboxtest), the third
// cell's names.
func tableRows(md string) []archRow {
	var rows []archRow
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| package |") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 || strings.HasPrefix(cells[0], "---") {
			continue
		}
		var r archRow
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			if m[1] == "web/" {
				continue // the front end's folder, not a Go package
			}
			r.packages = append(r.packages, short(m[1]))
		}
		for _, name := range strings.Split(cells[2], ",") {
			if name = strings.TrimSpace(name); name != "" {
				r.imports = append(r.imports, name)
			}
		}
		slices.Sort(r.imports)
		rows = append(rows, r)
	}
	return rows
}
