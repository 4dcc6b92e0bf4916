package project

import (
	"reflect"
	"testing"

	"github.com/BurntSushi/toml"
)

// trickyTOML holds valid TOML whose keys are hard to find by scanning.
var trickyTOML = []string{
	"a = \"\"\"\nb = 1\n\\\"\"\"\nc = 2\"\"\"\nd = 1\n",
	"a = '''\n[x]\n''''\nb = \"\"\"\"\"\"\nc = ''''''\n",
	"a = \"q\\\"[x]\" # [y]\nb = 'c:\\'\n",
	"\"a.b\" = 1\n'c\"d' = 2\n\"\\u00e9\\x41\\t\" = 3\n\"\" = 4\n",
	"a . b . c = 1\n[ x . \"y z\" ]\nk = 2\n[[ t ]]\n[[t]]\nk = 3\n",
	"a = [ { b = 1 }, [ { c = { d = 2 } } ], # {e = 3}\n\"x\" ]\n",
	"a = { b.c = 1, d = { e = [ { f = 2 } ] } }\n",
	"a = {\n  b = 1, # comment\n  c = 2,\n}\n",
	"d1 = 1979-05-27 07:32:00Z\nd2 = [1979-05-27 07:32:00, 1979-05-27]\nt = { x = 1979-05-27 07:32:00Z, y = 1 }\n",
	"n = [1, 2.5, -inf, nan, 0x1F, true, 07:32:00]\n",
	"\xef\xbb\xbfa = 1\r\n[b]\r\nc = 2\r\n",
	"[a.b.c]\n[a]\nd = 1\n",
}

// TestScanKeys checks that the key scanner finds the decoder's keys, so that
// errors carry lines.
func TestScanKeys(t *testing.T) {
	for _, src := range trickyTOML {
		var raw map[string]any
		md, err := toml.Decode(src, &raw)
		if err != nil {
			t.Errorf("%q is not valid TOML: %v", src, err)
			continue
		}
		if keyLines(src, md.Keys()) == nil {
			var got []toml.Key
			for _, k := range scanKeys(src) {
				got = append(got, k.key)
			}
			t.Errorf("%q:\nscanned %q\ndecoded %q", src, got, md.Keys())
		}
	}
	src := "a = \"\"\"\nb = 1\n\"\"\"\n\n[x]\ny = { z = 1 }\n"
	var raw map[string]any
	md, _ := toml.Decode(src, &raw)
	lines := keyLines(src, md.Keys())
	if want := []int{1, 5, 6, 6}; !reflect.DeepEqual(lines, want) {
		t.Errorf("lines of %q = %v, want %v", src, lines, want)
	}
}
