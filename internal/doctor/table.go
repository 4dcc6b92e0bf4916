package doctor

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Table writes the report for a person: one line per engine, then the
// fixes, one line each.
func Table(w io.Writer, cs []Check) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENGINE\tREADY\tCLI\tVERSION\tLOGIN")
	for _, c := range cs {
		ready := "yes"
		if !c.OK {
			ready = "no"
		}
		cli := "-"
		switch {
		case c.CLI == "":
		case c.Path == "":
			cli = c.CLI + " not found"
		default:
			cli = c.Path
		}
		ver := "-"
		switch {
		case c.Needs != "" && c.Version != "":
			ver = c.Version + " (needs " + c.Needs + ")"
		case c.Needs != "":
			ver = "- (needs " + c.Needs + ")"
		case c.Version != "" && c.VersionTested:
			ver = c.Version + " (tested)"
		case c.Version != "":
			ver = fmt.Sprintf("%s (untested; tested: %s)", c.Version, c.Tested)
		case c.Path != "":
			ver = "? (tested: " + c.Tested + ")"
		case c.CLI != "":
			ver = "- (tested: " + c.Tested + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Engine, ready, cli, ver, c.Login)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	first := true
	for _, c := range cs {
		for _, f := range c.Fixes {
			if first {
				fmt.Fprintln(w, "\nto fix:")
				first = false
			}
			fmt.Fprintf(w, "  %s: %s\n", c.Engine, f)
		}
	}
	return nil
}
