package term

import (
	"testing"
	"time"
)

// FuzzEmulator feeds random bytes to the emulator path a PTY's output
// takes (split in two writes, then a screen read, a resize and a render):
// no panic, and no write that never returns (a query whose reply nobody
// reads used to block forever). Inputs are bounded at 64 KB.
func FuzzEmulator(f *testing.F) {
	for _, seed := range []string{
		"hello\r\nworld",
		"\x1b[6n\x1b[c\x1b[>0q\x1b]11;?\x07\x1b[?2026$p",
		"\x1b[?1049h\x1b[2J\x1b[10;10Hx\x1b[1J\x1b[?1049l",
		"\x1b_Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA\x1b\\",
		"\x1b[5;20r\x1b[20;1H\n\n\n\x1b[r",
		"日本語\xe6\x97",
	} {
		f.Add([]byte(seed), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		if len(data) > 64<<10 {
			return
		}
		replies := 0
		e := NewEmulator(40, 10, func(b []byte) { replies += len(b) })
		done := make(chan struct{})
		go func() {
			defer close(done)
			k := int(split) % (len(data) + 1)
			e.Write(data[:k])
			e.Write(data[k:])
			_ = e.Screen().All()
			e.Resize(20+int(split)%60, 5+int(split)%30)
			_ = e.Render()
			e.Write(data)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the emulator did not return in 10s on %q", data)
		}
		e.Close()
	})
}
