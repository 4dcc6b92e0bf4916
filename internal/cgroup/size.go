package cgroup

import (
	"fmt"
	"strconv"
	"strings"
)

// units are the suffixes ParseSize reads: K, M, G, T and KiB ... TiB are
// powers of 1024 (as systemd's MemoryMax); KB ... TB powers of 1000.
var units = map[string]int64{
	"": 1, "B": 1,
	"K": 1 << 10, "KiB": 1 << 10, "KB": 1e3,
	"M": 1 << 20, "MiB": 1 << 20, "MB": 1e6,
	"G": 1 << 30, "GiB": 1 << 30, "GB": 1e9,
	"T": 1 << 40, "TiB": 1 << 40, "TB": 1e12,
}

// ParseSize reads a size like "4GiB", "512MiB", "1.5G" or "2000000000"
// (bytes).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult, ok := units[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("%q is not a size: write one like \"4GiB\" or \"512MiB\"", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 || f*float64(mult) >= 1<<62 {
		return 0, fmt.Errorf("%q is not a size: write one like \"4GiB\" or \"512MiB\"", s)
	}
	return int64(f * float64(mult)), nil
}

// FormatSize writes n bytes in the largest binary unit that holds it
// exactly ("4GiB", "1536MiB", "1000B"); ParseSize reads it back.
func FormatSize(n int64) string {
	for _, u := range []string{"TiB", "GiB", "MiB", "KiB"} {
		if m := units[u]; n >= m && n%m == 0 {
			return strconv.FormatInt(n/m, 10) + u
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
