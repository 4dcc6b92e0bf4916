package engine

import (
	"testing"
	"time"
)

func TestLimitUntilClampsToADayAhead(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name        string
		reset, want time.Time
	}{
		{"unsaid", time.Time{}, time.Time{}},
		{"ahead", now.Add(90 * time.Second), now.Add(90 * time.Second)},
		{"past", now.Add(-time.Hour), now},
		{"years away", now.AddDate(30, 0, 0), now.Add(MaxLimitWait)},
		{"a day", now.Add(MaxLimitWait), now.Add(MaxLimitWait)},
	} {
		if got := LimitUntil(c.reset, now); !got.Equal(c.want) {
			t.Errorf("%s: LimitUntil(%v) = %v, want %v", c.name, c.reset, got, c.want)
		}
	}
}
