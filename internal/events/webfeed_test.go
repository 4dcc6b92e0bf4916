package events

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestWebFeedSubscribesToEveryType: the web UI's EventSource listens to
// the types it names (web/src/feed.ts eventTypes) and to no other, so a
// type of the catalogue missing there is an event the browser never sees.
func TestWebFeedSubscribesToEveryType(t *testing.T) {
	goSrc, err := os.ReadFile("types.go")
	if err != nil {
		t.Fatal(err)
	}
	tsSrc, err := os.ReadFile("../../web/src/feed.ts")
	if err != nil {
		t.Fatal(err)
	}
	var catalogue []string
	for _, m := range regexp.MustCompile(`Type = "([a-z_.]+)"`).FindAllStringSubmatch(string(goSrc), -1) {
		catalogue = append(catalogue, m[1])
	}
	list := regexp.MustCompile(`(?s)export const eventTypes = \[(.*?)\];`).FindStringSubmatch(string(tsSrc))
	if len(catalogue) < 10 || list == nil {
		t.Fatalf("read %d types from types.go and eventTypes %v from feed.ts: the test no longer reads them", len(catalogue), list != nil)
	}
	var web []string
	for _, m := range regexp.MustCompile(`"([a-z_.]+)"`).FindAllStringSubmatch(list[1], -1) {
		web = append(web, m[1])
	}
	for _, ty := range catalogue {
		if !slices.Contains(web, ty) {
			t.Errorf("event type %s is not in web/src/feed.ts eventTypes: the browser never receives it", ty)
		}
	}
	for _, ty := range web {
		if !slices.Contains(catalogue, ty) {
			t.Errorf("web/src/feed.ts listens to %s, which is not in the catalogue", ty)
		}
	}
}
