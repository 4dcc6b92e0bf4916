package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkStart is the start cost of one sandboxed process: the time to
// run /bin/true under an agent's whole policy, less the same run
// unsandboxed (target p50 ≤ 20 ms, issue 20), per mechanism.
func BenchmarkStart(b *testing.B) {
	f := newFixture(b)
	run := func(b *testing.B, p Policy) []time.Duration {
		argv, err := Wrap(p, []string{"/bin/true"})
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		return lat
	}
	base := func() time.Duration {
		var lat []time.Duration
		for range 20 {
			t0 := time.Now()
			exec.Command("/bin/true").Run()
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		return lat[len(lat)/2]
	}()
	// caps: the same with the agent's cgroup, v1 where the machine has
	// it (the helper joins it first: one more exec under bubblewrap).
	cg := cgroup.Open(cgroup.Options{StateDir: b.TempDir()})
	b.Cleanup(cg.Close)
	for _, c := range []struct {
		mech Mechanism
		caps bool
	}{{Bubblewrap, false}, {Landlock, false}, {Bubblewrap, true}, {Landlock, true}} {
		mech := c.mech
		name := "mechanism=" + string(mech)
		if c.caps {
			name += "/caps"
		}
		b.Run(name, func(b *testing.B) {
			if r := Detect(); mech == Bubblewrap && r.Bwrap == "" || mech == Landlock && r.LandlockABI == 0 {
				b.Skipf("no %s here", mech)
			}
			p := Build(f.inputs())
			p.Mechanism, p.AsInit = mech, true
			if c.caps {
				g, err := cg.Group(troupe.RuntimeKey{Project: "p", Agent: "a"}, cgroup.Limits{Memory: 1 << 30, Processes: 512})
				if err != nil || g.IsZero() {
					b.Skipf("no caps here: %v %s", err, cg.Report().Text())
				}
				p.Cgroup = g
			}
			p.Helper = []string{os.Args[0], "-test.run=^$"}
			lat := run(b, p)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(lat[len(lat)/2]-base), "p50-ms")
			b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]-base), "p99-ms")
			b.ReportMetric(ms(base), "unsandboxed-ms")
		})
	}
}
