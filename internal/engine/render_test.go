package engine

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestRenderNamesEachMessageKindAndSender(t *testing.T) {
	in := Input{Turn: "t1", Messages: []troupe.Message{
		{ID: 1, From: "lead", Kind: troupe.KindMessage, Text: "fyi: the build is red"},
		{ID: 2, From: troupe.Person, Kind: troupe.KindMessage, Text: "stop at six", Redelivered: true},
		{ID: 3, From: "task", Kind: troupe.KindTask, Text: "task tk1 exited 0"},
		{ID: 4, From: "qa", Kind: troupe.KindReply, Request: "r7", Text: "42"},
		{ID: 5, From: "dev", Kind: troupe.KindResult, Request: "r8", Text: "done"},
	}}
	want := "[message from lead]\nfyi: the build is red\n\n" +
		"[message from the person you work for] [redelivered: troupe restarted while you handled this; you may have begun on it already]\nstop at six\n\n" +
		"[a background task you started has ended]\ntask tk1 exited 0\n\n" +
		"[answer from qa to your question (request r7)]\n42\n\n" +
		"[result from dev of the task you delegated (request r8)]\ndone"
	if got := Render(in); got != want {
		t.Errorf("Render =\n%s\nwant\n%s", got, want)
	}
	ask := Render(Input{Messages: []troupe.Message{{From: "lead", Kind: troupe.KindAsk, Request: "r1", Text: "why?"}}})
	if want := "[question from lead (request r1): your final answer in this turn is sent back to it; or call reply]\nwhy?"; ask != want {
		t.Errorf("ask = %q, want %q", ask, want)
	}
	del := Render(Input{Messages: []troupe.Message{{From: "lead", Kind: troupe.KindDelegate, Request: "r2", Text: "fix it"}}})
	if want := "[task delegated by lead (request r2): do it; your final message in this turn is reported back as its result]\nfix it"; del != want {
		t.Errorf("delegate = %q, want %q", del, want)
	}
}

func TestRenderedLenBoundsRender(t *testing.T) {
	ms := []troupe.Message{
		{ID: 1, From: "lead", Kind: troupe.KindMessage, Text: "fyi"},
		{ID: 2, From: troupe.Person, Kind: troupe.KindAsk, Request: "r1", Text: "why?", Redelivered: true},
		{ID: 3, From: "task", Kind: troupe.KindTask, Text: ""},
	}
	sum := 0
	for i, m := range ms {
		sum += RenderedLen(m)
		got := len(Render(Input{Messages: ms[:i+1]}))
		if got > sum || got < sum-2 {
			t.Errorf("Render of %d messages is %d bytes, RenderedLen sums to %d: want the sum, less the last separator", i+1, got, sum)
		}
	}
}
