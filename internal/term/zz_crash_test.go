package term

import "testing"

func TestCrashDECSTBM(t *testing.T) {
	e := NewEmulator(20, 6, nil)
	defer e.Close()
	e.Write([]byte("\x1b[2;7r00000000000\x1b[7B\n\n"))
}
