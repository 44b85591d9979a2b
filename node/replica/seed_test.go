package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/raftmeta"
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
	t.Run("primary-key bucket without the lost state refused", func(t *testing.T) {
		cfg := Config{PK: &PKConfig{}, StartOffset: start}
		r := &Replica{cfg: cfg}
		if err := r.seed(raft.Configuration{}); err == nil {
			t.Fatal("a primary-key bucket was seeded at an offset")
		}
	})
}

// lostEntry is a raft entry of a lost group as remote storage keeps it.
type lostEntry struct {
	index uint64
	data  []byte
}

// lostState captures what remote storage would hold of r: its newest raft
// snapshot and the entries after it.
func lostState(t *testing.T, r *Replica) (snap []byte, entries []lostEntry, from int64) {
	t.Helper()
	metas, err := r.snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot to restore from: %v", err)
	}
	_, rc, err := r.snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if snap, err = io.ReadAll(rc); err != nil {
		t.Fatal(err)
	}
	b, err := readPKHeader(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	err = r.log.Read(st.NextOffset, r.HighWatermark(), 1<<30, func(index uint64, base int64, count int32, data []byte) bool {
		entries = append(entries, lostEntry{index, bytes.Clone(data)})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap, entries, st.NextOffset
}

// TestSeedPrimaryKeyFromLostState: a primary-key bucket restored at an
// offset takes the lost group's KV snapshot and the changelog after it:
// every row reads as the lost group left it, writes continue at the start
// offset with the rows merged on top, a restart keeps it all, and a
// changelog with a gap is refused.
func TestSeedPrimaryKeyFromLostState(t *testing.T) {
	st := openKV(t, t.TempDir())
	defer st.Close()
	old := openSingle(t, t.TempDir(), func(c *Config) { c.PK = pkConfig(t, st, 1, nil) })
	for i := range 60 {
		write(t, old, &PKWrite{Rows: []kvstore.Row{row(int64(i%10), int64(i), fmt.Sprint("v", i))}}, 1, int32(i))
		if i == 30 {
			if err := old.raft.Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := make([]string, 10)
	for i := range want {
		want[i] = lookupRow(t, old, int64(i))
	}
	end := old.HighWatermark()
	snap, entries, from := lostState(t, old)
	old.Close()
	if from <= 0 || from >= end || len(entries) == 0 {
		t.Fatalf("snapshot at offset %d of %d with %d entries after it: the test needs both", from, end, len(entries))
	}
	lost := func(entries []lostEntry) *LostState {
		return &LostState{
			Snapshot: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(snap)), nil },
			Changelog: func(from, to int64, fn func(uint64, []byte) error) error {
				for _, e := range entries {
					if err := fn(e.index, e.data); err != nil {
						return err
					}
				}
				return nil
			},
		}
	}

	st2 := openKV(t, t.TempDir())
	defer st2.Close()
	dir := t.TempDir()
	restored := func(c *Config) {
		c.PK, c.StartOffset, c.Lost = pkConfig(t, st2, 1, nil), end, lost(entries)
	}
	r := openSingle(t, dir, restored)
	if hw := r.HighWatermark(); hw != end {
		r.Close()
		t.Fatalf("restored high watermark %d, want %d", hw, end)
	}
	for i := range want {
		if got := lookupRow(t, r, int64(i)); got != want[i] {
			r.Close()
			t.Fatalf("restored row %d = %s, want %s", i, got, want[i])
		}
	}
	base, _ := write(t, r, &PKWrite{Rows: []kvstore.Row{row(3, 1000, "new"), row(42, 1, "new")}}, 2, 0)
	if base != end {
		r.Close()
		t.Fatalf("first write after the restore at offset %d, want %d", base, end)
	}
	want[3] = "3,1000,new"
	r.Close()
	r = openSingle(t, dir, func(c *Config) { c.PK = pkConfig(t, st2, 1, nil) })
	defer r.Close()
	for i := range want {
		if got := lookupRow(t, r, int64(i)); got != want[i] {
			t.Fatalf("after a restart: row %d = %s, want %s", i, got, want[i])
		}
	}
	if got := lookupRow(t, r, 42); got != "42,1,new" {
		t.Fatalf("after a restart: row 42 = %s", got)
	}

	st3 := openKV(t, t.TempDir())
	defer st3.Close()
	addr, tr := raft.NewInmemTransport("gap")
	_, err := Open(Config{ID: raftmeta.BucketID{TableID: 1}, Dir: t.TempDir(), LocalID: "n1", LocalAddr: addr, Transport: tr,
		Bootstrap: bootWith(raft.Server{ID: "n1", Address: addr, Suffrage: raft.Voter}), Raft: testTuning(), Logger: testLogger(t),
		PK: pkConfig(t, st3, 1, nil), StartOffset: end, Lost: lost(entries[1:])})
	if err == nil || !strings.Contains(err.Error(), "want") {
		t.Fatalf("a changelog with a gap: %v, want it refused", err)
	}
}
