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
	muxes, reps := smallFrameGroup(t, nil)
	l := leaderOf(t, reps)
	lagging := (l + 1) % 3
	reps[lagging].stop(t)

	// 40 entries of 8 KiB, five times what one frame holds, proposed at
	// once: raft sends them to the remaining follower in batches larger
	// than a frame, too.
	applyBig(reps[l].r, 40)
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

// smallFrameGroup starts a 3-voter raft group "bucket" over three muxes
// whose frames hold 64 KiB, stopped at the end of the test.
func smallFrameGroup(t *testing.T, tune func(*raft.Config)) ([]*Mux, []*replica) {
	t.Helper()
	muxes := make([]*Mux, 3)
	trs := make([]raft.Transport, 3)
	for i := range muxes {
		o := testOpts()
		o.MaxFrameSize = 64 << 10
		m, err := Listen("127.0.0.1:0", o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		muxes[i] = m
		if trs[i], err = m.Transport("bucket"); err != nil {
			t.Fatal(err)
		}
	}
	reps := bootstrapTuned(t, trs, tune)
	t.Cleanup(func() {
		for _, rp := range reps {
			rp.stop(t)
		}
	})
	return muxes, reps
}

// applyBig proposes n entries of 8 KiB on r (their first 8 bytes count
// 1..n) without waiting for them.
func applyBig(r *raft.Raft, n int) {
	for i := range n {
		b := make([]byte, 8<<10)
		binary.BigEndian.PutUint64(b, uint64(i+1))
		r.Apply(b, 10*time.Second)
	}
}

// A burst of entries larger than a frame, with nothing after it, commits
// at once: its parts do not wait for raft's next idle round (a minute
// here). (Followers learn the commit index only from the next
// AppendEntries, so only the leader's applies are checked; the followers
// must hold every entry.)
func TestBurstPastFrameLimitCommitsAtOnce(t *testing.T) {
	_, reps := smallFrameGroup(t, func(c *raft.Config) { c.CommitTimeout = time.Minute })
	l := leaderOf(t, reps)
	applyN(t, reps[l].r, 1) // followers are in pipeline mode
	applyBig(reps[l].r, 40)
	waitFor(t, 20*time.Second, func() error {
		if n, sum, _ := reps[l].fsm.state(); n != 41 || sum != 1+40*41/2 {
			return fmt.Errorf("leader applied %d entries summing to %d, want 41 summing to %d", n, sum, 1+40*41/2)
		}
		return nil
	})
	last := reps[l].r.LastIndex()
	waitFor(t, 5*time.Second, func() error {
		for i, rp := range reps {
			if got := rp.r.LastIndex(); got != last {
				return fmt.Errorf("replica %d holds entries up to %d, want %d", i, got, last)
			}
		}
		return nil
	})
}

// splitAppend's parts carry every entry once, in order, each part's
// previous entry the last of the part before, and each fits its frame as
// msgpack encodes it, for entries of any size, down to empty ones where
// the per-entry overhead is all there is.
func TestSplitAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cs := getCodec()
	defer putCodec(cs)
	for _, tc := range []struct {
		name          string
		maxFrame      int
		entries, size int // size < 0: random up to -size
		wantParts     bool
	}{
		{"fits", 64 << 10, 10, 100, false},
		{"empty entries", 64 << 10, 5000, 0, true},
		{"small entries", 64 << 10, 5000, 40, true},
		{"big entries", 1 << 20, 300, 8 << 10, true},
		{"mixed", 1 << 20, 2000, -4 << 10, true},
		{"one entry over the frame", 1 << 10, 1, 4 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := &raft.AppendEntriesRequest{
				RPCHeader:         raft.RPCHeader{ID: []byte("node-12345"), Addr: []byte("127.0.0.1:9124")},
				Term:              1 << 40,
				PrevLogEntry:      1<<50 - 1,
				PrevLogTerm:       1<<40 - 1,
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
			orig := *args
			parts := splitAppend(args, tc.maxFrame)
			if args.PrevLogEntry != orig.PrevLogEntry || len(args.Entries) != tc.entries {
				t.Fatal("splitAppend changed the request it was given")
			}
			if got := len(parts) > 1; got != tc.wantParts {
				t.Fatalf("%d parts, want split = %v", len(parts), tc.wantParts)
			}
			prevIndex, prevTerm, next := orig.PrevLogEntry, orig.PrevLogTerm, 0
			for i, p := range parts {
				if len(p.Entries) == 0 {
					t.Fatalf("part %d has no entries", i)
				}
				if p.PrevLogEntry != prevIndex || p.PrevLogTerm != prevTerm {
					t.Fatalf("part %d previous entry %d/%d, want %d/%d", i, p.PrevLogEntry, p.PrevLogTerm, prevIndex, prevTerm)
				}
				if p.Term != orig.Term || p.LeaderCommitIndex != orig.LeaderCommitIndex || string(p.RPCHeader.ID) != string(orig.RPCHeader.ID) {
					t.Fatalf("part %d: term, commit index or header differ from the request's", i)
				}
				for _, e := range p.Entries {
					if e != orig.Entries[next] {
						t.Fatalf("part %d: entry %d out of order", i, next)
					}
					next++
				}
				last := p.Entries[len(p.Entries)-1]
				prevIndex, prevTerm = last.Index, last.Term
				cs.w.b = cs.w.b[:0]
				buf, err := cs.encodeFrame(typeAppendEntries, p)
				if err != nil {
					t.Fatal(err)
				}
				if len(buf) > tc.maxFrame && len(p.Entries) > 1 {
					t.Fatalf("part %d of %d entries is %d bytes, over the %d limit", i, len(p.Entries), len(buf), tc.maxFrame)
				}
			}
			if next != tc.entries {
				t.Fatalf("parts carry %d entries, want %d", next, tc.entries)
			}
		})
	}
}
