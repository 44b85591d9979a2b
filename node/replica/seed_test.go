package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestSeedStartsAtOffset: a group bootstrapped with StartOffset (a bucket
// started anew after it lost every replica) starts its log there, across
// a restart, on one replica and on three (each seeds the same snapshot;
// the followers end up with the leader's batches byte for byte).
func TestSeedStartsAtOffset(t *testing.T) {
	const start = 1000
	ctx := context.Background()
	t.Run("one replica", func(t *testing.T) {
		dir := t.TempDir()
		r := openSingle(t, dir, func(c *Config) { c.StartOffset = start })
		if hw, ls := r.HighWatermark(), r.LogStartOffset(); hw != start || ls != start {
			r.Close()
			t.Fatalf("seeded: high watermark %d, log start %d, want %d and %d", hw, ls, start, start)
		}
		if _, _, _, err := r.FetchLocal(ctx, start-1, 1<<20, 0); !errors.Is(err, ErrOffsetOutOfRange) {
			r.Close()
			t.Fatalf("fetch below the start: %s, want ErrOffsetOutOfRange", errString(err))
		}
		want := int64(start)
		for i := range 5 {
			base, count, err := r.Append(ctx, [][]byte{makeBatch(3, fmt.Sprint(i))}, 1, int32(i))
			if err != nil || base != want || count != 3 {
				r.Close()
				t.Fatalf("append %d: (%d, %d, %s), want base %d count 3", i, base, count, errString(err), want)
			}
			want += 3
		}
		before := fetchAll(t, r)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		// A restart restores the seed snapshot and replays the entries
		// after it; StartOffset and Bootstrap no longer matter.
		r = openSingle(t, dir, func(c *Config) { c.StartOffset = 7 })
		defer r.Close()
		waitFor(t, 10*time.Second, func() error {
			if hw := r.HighWatermark(); hw != want {
				return fmt.Errorf("high watermark %d after reopen, want %d", hw, want)
			}
			return nil
		})
		if ls := r.LogStartOffset(); ls != start {
			t.Fatalf("log start %d after reopen, want %d", ls, start)
		}
		sameBatches(t, before, []*Replica{r})
		if base, _, err := r.Append(ctx, [][]byte{makeBatch(1, "next")}, 1, 5); err != nil || base != want {
			t.Fatalf("append after reopen: base %d (%s), want %d", base, errString(err), want)
		}
	})
	t.Run("three replicas", func(t *testing.T) {
		c := newTestClusterWith(t, 3, func(cfg *Config) { cfg.StartOffset = start })
		defer c.closeAll()
		var bases []int64
		for i := range 10 {
			base, err := c.append([][]byte{makeBatch(2, fmt.Sprint(i))}, 4, int32(i))
			if err != nil {
				t.Fatal(err)
			}
			bases = append(bases, base)
		}
		for i, b := range bases {
			if b != start+int64(2*i) {
				t.Fatalf("append %d at offset %d, want %d", i, b, start+2*i)
			}
		}
		lead := c.reps[c.leader()]
		want := fetchAll(t, lead)
		waitFor(t, 10*time.Second, func() error {
			for i, r := range c.reps {
				if hw := r.HighWatermark(); hw != start+20 {
					return fmt.Errorf("replica %d high watermark %d, want %d", i, hw, start+20)
				}
			}
			return nil
		})
		sameBatches(t, want, c.reps)
	})
	t.Run("primary-key bucket refused", func(t *testing.T) {
		cfg := Config{PK: &PKConfig{}, StartOffset: start}
		r := &Replica{cfg: cfg}
		if err := r.seed(raft.Configuration{}); err == nil {
			t.Fatal("a primary-key bucket was seeded at an offset")
		}
	})
}
