package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An in-flight or linger setting for a batching client the run does not
// use, a negative in-flight count, or an unknown or unusable --spread is refused before anything is sent
// (the server address here has nothing listening).
func TestInflightFlagsNeedTheirClient(t *testing.T) {
	ctx := context.Background()
	const nowhere = "127.0.0.1:1"
	for _, cfg := range []ProduceConfig{
		{Server: nowhere, Format: "json", BatchRows: 1, Clients: 1, Duration: time.Second, Inflight: 1},
		{Server: nowhere, Format: "json", BatchRows: 1, Clients: 1, Duration: time.Second, Appender: true, Inflight: -1},
	} {
		_, err := Produce(ctx, cfg)
		if err == nil || !strings.Contains(err.Error(), "--appender-inflight") {
			t.Errorf("Produce(Appender %v, Inflight %d) = %v, want an --appender-inflight error", cfg.Appender, cfg.Inflight, err)
		}
	}
	linger := ProduceConfig{Server: nowhere, Format: "json", BatchRows: 1, Clients: 1, Duration: time.Second, Linger: time.Millisecond}
	if _, err := Produce(ctx, linger); err == nil || !strings.Contains(err.Error(), "--appender-linger") {
		t.Errorf("Produce(Linger without Appender) = %v, want an --appender-linger error", err)
	}
	for _, cfg := range []ProduceConfig{
		{Server: nowhere, Format: "json", BatchRows: 1, Clients: 1, Duration: time.Second, Spread: "keyed"},
		{Server: nowhere, Format: "json", BatchRows: 1, Clients: 1, Duration: time.Second, Appender: true, Spread: "random"},
	} {
		if _, err := Produce(ctx, cfg); err == nil || !strings.Contains(err.Error(), "--spread") {
			t.Errorf("Produce(Spread %q, Appender %v) = %v, want a --spread error", cfg.Spread, cfg.Appender, err)
		}
	}
	if _, err := Lookup(ctx, PKConfig{Server: nowhere, Keys: 10, Duration: time.Second, BatchedLinger: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "--batched-linger") {
		t.Errorf("Lookup(BatchedLinger without Batched) = %v, want a --batched-linger error", err)
	}
	for _, cfg := range []PKConfig{
		{Server: nowhere, Keys: 10, Duration: time.Second, BatchedInflight: 1},
		{Server: nowhere, Keys: 10, Duration: time.Second, Batched: true, BatchedInflight: -1},
	} {
		_, err := Lookup(ctx, cfg)
		if err == nil || !strings.Contains(err.Error(), "--batched-inflight") {
			t.Errorf("Lookup(Batched %v, BatchedInflight %d) = %v, want a --batched-inflight error", cfg.Batched, cfg.BatchedInflight, err)
		}
	}
}

// Counts and durations of zero or less are refused before anything is sent
// (a run with --batch 0 used to send empty requests and report them).
func TestBenchNeedsPositiveCounts(t *testing.T) {
	ctx := context.Background()
	const nowhere = "127.0.0.1:1"
	ok := ProduceConfig{Server: nowhere, Format: "json", BatchRows: 1, Clients: 1, Duration: time.Second}
	for _, mod := range []func(*ProduceConfig){
		func(c *ProduceConfig) { c.BatchRows = 0 },
		func(c *ProduceConfig) { c.Clients = -1 },
		func(c *ProduceConfig) { c.Duration = 0 },
	} {
		cfg := ok
		mod(&cfg)
		if _, err := Produce(ctx, cfg); err == nil || !strings.Contains(err.Error(), "want positive values") {
			t.Errorf("Produce(%+v) = %v, want a positive values error", cfg, err)
		}
	}
	if _, err := Fetch(ctx, FetchConfig{Server: nowhere, Buckets: 1}); err == nil || !strings.Contains(err.Error(), "--rows 0") {
		t.Errorf("Fetch(Rows 0) = %v, want a --rows error", err)
	}
	for _, cfg := range []PKConfig{{Server: nowhere, Keys: 10, BatchRows: 1}, {Server: nowhere, Keys: 10, BatchRows: 0, Duration: time.Second}} {
		if _, err := Upsert(ctx, cfg); err == nil || !strings.Contains(err.Error(), "want positive values") {
			t.Errorf("Upsert(%+v) = %v, want a positive values error", cfg, err)
		}
	}
	if _, err := Lookup(ctx, PKConfig{Server: nowhere, Keys: 10}); err == nil || !strings.Contains(err.Error(), "want positive values") {
		t.Errorf("Lookup(Duration 0) = %v, want a positive values error", err)
	}
}

// With --spread turn the requests in flight are spread evenly: with as many
// clients as buckets each client keeps to its own bucket, with fewer they
// take the buckets in turn. With random each client reaches every bucket.
func TestBucketChooser(t *testing.T) {
	const buckets, requests = 8, 400
	spreads := func(cfg ProduceConfig, w int) map[int32]int {
		seen := map[int32]int{}
		next := bucketChooser(cfg, w)
		for i := range requests {
			b := next(i)
			if b < 0 || b >= buckets {
				t.Fatalf("%+v worker %d request %d: bucket %d of %d", cfg, w, i, b, buckets)
			}
			seen[b]++
		}
		return seen
	}
	for w := range buckets {
		if got := spreads(ProduceConfig{Buckets: buckets, Clients: buckets}, w); len(got) != 1 || got[int32(w)] != requests {
			t.Errorf("turn, %d clients: worker %d sent to %v, want bucket %d only", buckets, w, got, w)
		}
	}
	if got := spreads(ProduceConfig{Buckets: buckets, Clients: 2}, 1); len(got) != buckets/2 || got[1] != requests/4 || got[7] != requests/4 {
		t.Errorf("turn, 2 clients: worker 1 sent to %v, want buckets 1, 3, 5, 7 in turn", got)
	}
	for w := range 2 {
		if got := spreads(ProduceConfig{Buckets: buckets, Clients: buckets, Spread: "random"}, w); len(got) != buckets {
			t.Errorf("random: worker %d sent to %v, want every bucket", w, got)
		}
	}
}
