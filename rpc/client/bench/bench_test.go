package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An in-flight or linger setting for a batching client the run does not
// use, or a negative in-flight count, is refused before anything is sent
// (the server address here has nothing listening).
func TestInflightFlagsNeedTheirClient(t *testing.T) {
	ctx := context.Background()
	const nowhere = "127.0.0.1:1"
	for _, cfg := range []ProduceConfig{
		{Server: nowhere, Format: "json", BatchRows: 1, Clients: 1, Inflight: 1},
		{Server: nowhere, Format: "json", BatchRows: 1, Clients: 1, Appender: true, Inflight: -1},
	} {
		_, err := Produce(ctx, cfg)
		if err == nil || !strings.Contains(err.Error(), "--appender-inflight") {
			t.Errorf("Produce(Appender %v, Inflight %d) = %v, want an --appender-inflight error", cfg.Appender, cfg.Inflight, err)
		}
	}
	linger := ProduceConfig{Server: nowhere, Format: "json", BatchRows: 1, Clients: 1, Linger: time.Millisecond}
	if _, err := Produce(ctx, linger); err == nil || !strings.Contains(err.Error(), "--appender-linger") {
		t.Errorf("Produce(Linger without Appender) = %v, want an --appender-linger error", err)
	}
	if _, err := Lookup(ctx, PKConfig{Server: nowhere, Keys: 10, BatchedLinger: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "--batched-linger") {
		t.Errorf("Lookup(BatchedLinger without Batched) = %v, want a --batched-linger error", err)
	}
	for _, cfg := range []PKConfig{
		{Server: nowhere, Keys: 10, BatchedInflight: 1},
		{Server: nowhere, Keys: 10, Batched: true, BatchedInflight: -1},
	} {
		_, err := Lookup(ctx, cfg)
		if err == nil || !strings.Contains(err.Error(), "--batched-inflight") {
			t.Errorf("Lookup(Batched %v, BatchedInflight %d) = %v, want a --batched-inflight error", cfg.Batched, cfg.BatchedInflight, err)
		}
	}
}
