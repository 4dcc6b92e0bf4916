package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func echo(name string) Tool {
	return Tool{Spec: Spec{Name: name, Description: name, Schema: json.RawMessage(`{}`)},
		Handle: func(_ context.Context, c Caller, args json.RawMessage) (string, error) {
			return name + " as " + c.Key.String() + ": " + string(args), nil
		}}
}

func TestCatalogComposesInOrderAndCallsAsCaller(t *testing.T) {
	c := NewCatalog([]Tool{echo("a"), echo("b")}, nil, []Tool{echo("c")})
	var names []string
	for _, s := range c.Specs() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "a,b,c" {
		t.Fatalf("specs = %s, want a,b,c", got)
	}
	k := troupe.RuntimeKey{Project: "p1", Agent: "lead"}
	out, err := c.Call(t.Context(), Caller{Key: k}, "c", json.RawMessage(`{"x":1}`))
	if err != nil || out != `c as p1/lead: {"x":1}` {
		t.Fatalf("call c = %q, %v", out, err)
	}
	_, err = c.Call(t.Context(), Caller{Key: k}, "nope", nil)
	if err == nil || !strings.Contains(err.Error(), `unknown tool "nope": the tools are a, b, c`) {
		t.Fatalf("unknown tool: %v", err)
	}
}

func TestCatalogRefusesDuplicatesAndMissingHandlers(t *testing.T) {
	for name, groups := range map[string][][]Tool{
		"duplicate":  {{echo("a")}, {echo("a")}},
		"no handler": {{{Spec: Spec{Name: "x"}}}},
		"no name":    {{{Handle: echo("a").Handle}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: NewCatalog did not panic", name)
				}
			}()
			NewCatalog(groups...)
		}()
	}
}

func TestDecodeArgs(t *testing.T) {
	type in struct {
		To   string `json:"to"`
		Text string `json:"text"`
	}
	for _, tc := range []struct{ args, want string }{
		{`{"to":"a","text":"b"}`, ""},
		{``, `missing argument "to"`},
		{`{"to":"","text":"b"}`, `missing argument "to"`},
		{`{"to":null,"text":"b"}`, `missing argument "to"`},
		{`{"to":"a","text":"b","x":1}`, "bad arguments"},
		{`{"to":5}`, "bad arguments"},
		{`[1]`, "bad arguments"},
	} {
		var v in
		err := DecodeArgs(json.RawMessage(tc.args), &v, "to", "text")
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("DecodeArgs(%s) = %v, want %q", tc.args, err, tc.want)
		}
	}
}
