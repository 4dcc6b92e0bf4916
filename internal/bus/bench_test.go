package bus

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkServerStart: Start (JetStream on, file store, auth, the
// daemon's in-process connection) on a fresh folder, to ready.
func BenchmarkServerStart(b *testing.B) {
	var lat []time.Duration
	for b.Loop() {
		dir := b.TempDir()
		t0 := time.Now()
		s, err := Start(ServerOptions{Dir: dir, Addr: "127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkDurablePublish: a runner's durable publish over TCP loopback,
// from the request to the stream's acknowledgement on its inbox (each
// message fsync'd by the server), with an idempotency key.
func BenchmarkDurablePublish(b *testing.B) {
	s, err := Start(ServerOptions{Dir: b.TempDir(), Addr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	djs, err := jetstream.New(s.Conn())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := EnsureStream(ctx, djs, "a", 1<<30, 1); err != nil {
		b.Fatal(err)
	}
	c, err := s.AddRunner("a")
	if err != nil {
		b.Fatal(err)
	}
	nc, err := Dial(ctx, c, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 256)
	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		t0 := time.Now()
		if _, err := js.Publish(ctx, Durable("a")+".task", data, jetstream.WithMsgID("task:"+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
