package terminal

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

func TestWithoutAnimation(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"⠋ Building (1s)", "⠙ Building (2s)", true},
		{"✻ Thinking… (12s · esc to interrupt)", "✽ Thinking… (13s · esc to interrupt)", true},
		{"| compiling 0:41", "/ compiling 0:42", true},
		{"elapsed 1.5 s", "elapsed 2.5 s", true},
		{"waiting 250ms", "waiting 300ms", true},
		{"◐ loading", "◓ loading", true},
		{"Building (1s)", "Built (2s)", false},
		{"Downloading 45%", "Downloading 46%", false},
		{"test 3 of 10", "test 4 of 10", false},
		{"a - b", "a + b", false},
		{"line one", "line one\nline two", false},
	} {
		if got := withoutAnimation(c.a) == withoutAnimation(c.b); got != c.same {
			t.Errorf("%q vs %q: same %v, want %v (%q, %q)", c.a, c.b, got, c.same, withoutAnimation(c.a), withoutAnimation(c.b))
		}
	}
}

// TestAnimationIsNotActivity (issue 22): on fake time, a program whose
// screen only turns a spinner and counts seconds is not active; a change
// of what the screen says is.
func TestAnimationIsNotActivity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := newFakeTerm()
		ft.show("BUSY", "⠋ working (0s)")
		s := NewSession(SessionSpec{Name: "a", Term: ft, Driver: screenDriver{}})
		defer s.Close(context.Background())
		synctest.Wait()
		first := s.Activity()
		if first.Count == 0 {
			t.Fatal("the first screen counted no activity")
		}
		frames := []string{"⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
		for i := 1; i <= 40; i++ {
			time.Sleep(time.Second)
			ft.show("BUSY", frames[i%len(frames)]+" working ("+strconv.Itoa(i)+"s)")
			synctest.Wait()
		}
		if a := s.Activity(); a.Count != first.Count || !a.At.Equal(first.At) {
			t.Errorf("after 40 s of spinner: activity %+v, want it where it was (%+v)", a, first)
		}
		time.Sleep(time.Second)
		ft.show("BUSY", "⠋ working (41s)", "compiled main.go")
		synctest.Wait()
		if a := s.Activity(); a.Count == first.Count || !a.At.After(first.At) {
			t.Errorf("a new line on screen: activity %+v, want it advanced past %+v", a, first)
		}
	})
}
