package cli

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// interactive are the commands that run something in this terminal or as
// a server rather than read or change a thing: they print no result, so
// they take no --json.
var interactive = []string{"troupe serve", "troupe runner", "troupe attach", "troupe observe", "troupe resume",
	"troupe fork", "troupe mcp-bridge", "troupe fakemodel"}

// TestEveryCommandHasJSON walks every command: each that reads or changes
// something takes --json; each group (troupe task, troupe memory…) runs
// its help alone and refuses an unknown word as a usage error.
func TestEveryCommandHasJSON(t *testing.T) {
	root, _ := newRoot(io.Discard, io.Discard, false, false)
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			walk(s)
		}
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		path := c.CommandPath()
		if c.HasSubCommands() && !strings.Contains(c.Use, " ") { // a group, not a command with commands of its own (troupe attempt TASK)
			if err := c.Args(c, []string{"bogus"}); err == nil {
				t.Errorf("%s takes an unknown word without a usage error", path)
			}
			return
		}
		n++
		if slices.Contains(interactive, path) {
			return
		}
		if c.Flags().Lookup("json") == nil && c.InheritedFlags().Lookup("json") == nil {
			t.Errorf("%s has no --json", path)
		}
	}
	walk(root)
	if n < 50 {
		t.Errorf("walked %d commands; want them all (50 or more)", n)
	}
}
