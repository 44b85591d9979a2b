package logstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func runtimeGosched() { runtime.Gosched() }

// countFSM applies commands carrying a counter and checks their order.
type countFSM struct {
	mu   sync.Mutex
	last uint64
	n    int
	bad  error
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := binary.LittleEndian.Uint64(l.Data)
	if v != uint64(f.n) && f.bad == nil {
		f.bad = fmt.Errorf("applied counter %d at position %d", v, f.n)
	}
	f.n++
	f.last = l.Index
	return nil
}
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("no snapshots") }
func (f *countFSM) Restore(io.ReadCloser) error         { return fmt.Errorf("no snapshots") }

func (f *countFSM) state() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.bad
}

func waitFor(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRaftSingleNode runs hashicorp/raft on the Log (LogStore and
// StableStore), applies 10k entries, restarts and replays them.
func TestRaftSingleNode(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	syncer := NewSyncer(nil)
	defer syncer.Close()
	// Every command holds one record; raft stamps nothing, so the FSM
	// counter doubles as the data offset.
	opts := Options{Dir: dir, OffsetFunc: testOffsets, Syncer: syncer, SegmentBytes: 256 << 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	const n = 10000
	start := func() (*raft.Raft, *Log, *countFSM, raft.ServerAddress, raft.Transport) {
		l, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		cfg := raft.DefaultConfig()
		cfg.LocalID = "n1"
		cfg.HeartbeatTimeout = 50 * time.Millisecond
		cfg.ElectionTimeout = 50 * time.Millisecond
		cfg.LeaderLeaseTimeout = 50 * time.Millisecond
		cfg.SnapshotThreshold = 1 << 40
		cfg.BatchApplyCh = true // lets the leader batch concurrent Applies into one StoreLogs
		cfg.Logger = hclog.NewNullLogger()
		addr, trans := raft.NewInmemTransport("n1")
		fsm := &countFSM{}
		r, err := raft.NewRaft(cfg, fsm, l, l, raft.NewInmemSnapshotStore(), trans)
		if err != nil {
			t.Fatal(err)
		}
		return r, l, fsm, addr, trans
	}
	r, l, fsm, addr, trans := start()
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() error {
		if r.State() != raft.Leader {
			return fmt.Errorf("not leader")
		}
		return nil
	})
	t0 := time.Now()
	futs := make([]raft.ApplyFuture, n)
	for i := range n {
		futs[i] = r.Apply(cmd(0, 0, int64(i), 1, int64(i), 0).Data[:20:20], 0)
		// payload: the counter, after the 20-byte offset header
		_ = futs[i]
	}
	for _, f := range futs {
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("applied %d entries in %v", n, time.Since(t0))
	// The counter sits in the offset header too (data[0:8] = i).
	_ = fsm
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	trans.(io.Closer).Close()
	last, _ := l.LastIndex()
	if l.NextOffset() != n {
		t.Fatalf("NextOffset = %d, want %d", l.NextOffset(), n)
	}
	l.Close()

	r, l, fsm, _, trans = start()
	defer func() {
		r.Shutdown().Error()
		trans.(io.Closer).Close()
		l.Close()
	}()
	if got, _ := l.LastIndex(); got != last {
		t.Fatalf("LastIndex after restart = %d, want %d", got, last)
	}
	waitFor(t, 10*time.Second, func() error {
		got, err := fsm.state()
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("FSM replayed %d of %d", got, n)
		}
		return nil
	})
	var count int
	if err := l.Read(0, l.NextOffset(), 1<<30, func(_ uint64, base int64, c int32, _ []byte) bool {
		if base != int64(count) || c != 1 {
			t.Fatalf("Read base %d count %d at %d", base, c, count)
		}
		count++
		return true
	}); err != nil || count != n {
		t.Fatalf("Read visited %d, err %v", count, err)
	}
}
