package peer

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A follower that missed more entries than fit in one frame catches up:
// the transport sends the longest prefix of raft's batch that fits
// (raft then sends the rest), instead of failing the same oversized
// AppendEntries forever.
func TestLaggingFollowerCatchesUpPastFrameLimit(t *testing.T) {
	const frame = 64 << 10
	muxes := make([]*Mux, 3)
	for i := range muxes {
		o := testOpts()
		o.MaxFrameSize = frame
		m, err := Listen("127.0.0.1:0", o)
		if err != nil {
			t.Fatal(err)
		}
		muxes[i] = m
		defer m.Close()
	}
	trs := make([]raft.Transport, 3)
	for i, m := range muxes {
		tr, err := m.Transport("bucket")
		if err != nil {
			t.Fatal(err)
		}
		trs[i] = tr
	}
	reps := bootstrap(t, trs)
	defer func() {
		for _, rp := range reps {
			rp.stop(t)
		}
	}()
	l := leaderOf(t, reps)
	lagging := (l + 1) % 3
	reps[lagging].stop(t)

	// 40 entries of 8 KiB, five times what one frame holds, proposed at
	// once: raft sends them to the remaining follower in batches larger
	// than a frame, too.
	for i := range 40 {
		b := make([]byte, 8<<10)
		binary.BigEndian.PutUint64(b, uint64(i+1))
		reps[l].r.Apply(b, 10*time.Second)
	}
	waitFor(t, 20*time.Second, func() error {
		if n, _, _ := reps[l].fsm.state(); n != 40 {
			return fmt.Errorf("leader applied %d of 40 entries: the follower that is up does not get them", n)
		}
		return nil
	})
	tr, err := muxes[lagging].Transport("bucket") // stopping raft closed the old one
	if err != nil {
		t.Fatal(err)
	}
	reps[lagging].start(t, tr)
	waitFor(t, 20*time.Second, func() error {
		if err := sameState(reps[l].fsm, reps[lagging].fsm); err != nil {
			return fmt.Errorf("lagging follower: %w", err)
		}
		return nil
	})
	if n, sum, _ := reps[lagging].fsm.state(); n != 40 || sum != 40*41/2 {
		t.Fatalf("lagging follower applied %d entries summing to %d, want 40 summing to %d", n, sum, 40*41/2)
	}
}

// fitFrame's bounds hold for msgpack as encoded: the prefix it keeps
// always fits in the frame, for entries of any size, down to empty ones
// where the per-entry overhead is all there is.
func TestFitFrameFits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cs := getCodec()
	defer putCodec(cs)
	for _, tc := range []struct {
		name          string
		maxFrame      int
		entries, size int // size < 0: random up to -size
	}{
		{"empty entries", 64 << 10, 5000, 0},
		{"small entries", 64 << 10, 5000, 40},
		{"big entries", 1 << 20, 300, 8 << 10},
		{"mixed", 1 << 20, 2000, -4 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := &raft.AppendEntriesRequest{
				RPCHeader:         raft.RPCHeader{ID: []byte("node-12345"), Addr: []byte("127.0.0.1:9124")},
				Term:              1 << 40,
				PrevLogEntry:      1 << 50,
				PrevLogTerm:       1 << 40,
				LeaderCommitIndex: 1 << 50,
			}
			for i := range tc.entries {
				n := tc.size
				if n < 0 {
					n = rng.IntN(-n)
				}
				args.Entries = append(args.Entries, &raft.Log{
					Index: 1<<50 + uint64(i), Term: 1 << 40, Type: raft.LogCommand,
					Data: make([]byte, n), Extensions: make([]byte, n%7), AppendedAt: time.Now(),
				})
			}
			all := len(args.Entries)
			fitFrame(args, tc.maxFrame)
			if len(args.Entries) == 0 || len(args.Entries) == all {
				t.Fatalf("kept %d of %d entries, want a non-empty proper prefix", len(args.Entries), all)
			}
			cs.w.b = cs.w.b[:0]
			buf, err := cs.encodeFrame(typeAppendEntries, args)
			if err != nil {
				t.Fatal(err)
			}
			if len(buf) > tc.maxFrame {
				t.Fatalf("frame of %d entries is %d bytes, over the %d limit", len(args.Entries), len(buf), tc.maxFrame)
			}
		})
	}
}
