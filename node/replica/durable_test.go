package replica

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// durGate holds WaitDurable while armed: the log's sync "takes" until
// release.
type durGate struct {
	*logstore.Log
	armed   atomic.Bool
	release chan struct{}
	defer_  atomic.Int32 // SetDeferSync(true) calls
}

func (g *durGate) WaitDurable(index uint64) error {
	if g.armed.Load() {
		<-g.release
	}
	return g.Log.WaitDurable(index)
}

func (g *durGate) SetDeferSync(on bool) error {
	if on {
		g.defer_.Add(1)
	}
	return g.Log.SetDeferSync(on)
}

// The sole voter of a group defers its syncs, and still acknowledges a
// write, and shows it to readers, only once its entry is durable.
func TestSoleVoterAcksOnlyDurableEntries(t *testing.T) {
	g := &durGate{release: make(chan struct{})}
	r := openSingle(t, t.TempDir(), func(c *Config) {
		c.openLog = func(dir string) (dataLog, error) {
			l, err := logstore.Open(logstore.Options{Dir: dir, OffsetFunc: EntryOffsets})
			g.Log = l
			return g, err
		}
	})
	defer r.Close()
	if g.defer_.Load() != 1 {
		t.Fatalf("SetDeferSync(true) called %d times on a sole voter, want 1", g.defer_.Load())
	}
	ctx := context.Background()
	if _, _, err := r.Append(ctx, [][]byte{makeBatch(1, "first")}, 0, 0); err != nil {
		t.Fatal(err)
	}
	hw := r.HighWatermark()
	g.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Append(ctx, [][]byte{makeBatch(2, "second")}, 0, 0)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("append acknowledged (%v) before its entry was durable", err)
	case <-time.After(200 * time.Millisecond):
	}
	if got := r.HighWatermark(); got != hw {
		t.Fatalf("high watermark %d before the entry was durable, want %d", got, hw)
	}
	g.armed.Store(false)
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := r.HighWatermark(); got != hw+2 {
		t.Fatalf("high watermark %d after the sync, want %d", got, hw+2)
	}
}

// recTransport records the order of calls against end.
type recTransport struct {
	raft.Transport
	calls []string
}

func (t *recTransport) AppendEntries(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error {
	t.calls = append(t.calls, "append")
	return nil
}

func (t *recTransport) RequestPreVote(raft.ServerID, raft.ServerAddress, *raft.RequestPreVoteRequest, *raft.RequestPreVoteResponse) error {
	t.calls = append(t.calls, "prevote")
	return nil
}

func (t *recTransport) InstallSnapshot(raft.ServerID, raft.ServerAddress, *raft.InstallSnapshotRequest, *raft.InstallSnapshotResponse, io.Reader) error {
	t.calls = append(t.calls, "snapshot")
	return nil
}

// The group's first message to another server ends deferred syncs before
// it is sent, once; a log that cannot be made durable sends nothing.
func TestDurableTransportEndsDeferralFirst(t *testing.T) {
	_, inner := raft.NewInmemTransport("a")
	rec := &recTransport{Transport: inner}
	tr, ok := wrapTransport(rec, func() error { rec.calls = append(rec.calls, "end"); return nil })
	if !ok {
		t.Fatal("a pre-vote transport was not wrapped")
	}
	tr.AppendEntries("b", "b", &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
	tr.(raft.WithPreVote).RequestPreVote("b", "b", &raft.RequestPreVoteRequest{}, &raft.RequestPreVoteResponse{})
	tr.InstallSnapshot("b", "b", &raft.InstallSnapshotRequest{}, &raft.InstallSnapshotResponse{}, nil)
	if got := rec.calls; len(got) != 4 || got[0] != "end" || got[1] != "append" || got[2] != "prevote" || got[3] != "snapshot" {
		t.Fatalf("calls %v, want end first and once", got)
	}

	boom := errors.New("sync failed")
	rec2 := &recTransport{Transport: inner}
	tr2, _ := wrapTransport(rec2, func() error { return boom })
	if err := tr2.AppendEntries("b", "b", &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{}); !errors.Is(err, boom) {
		t.Fatalf("AppendEntries with a failed flush: %v, want %v", err, boom)
	}
	if len(rec2.calls) != 0 {
		t.Fatalf("sent %v although the log could not be made durable", rec2.calls)
	}
}

// A replica of a group of several voters keeps syncing in StoreLogs.
func TestGroupOfSeveralVotersDoesNotDefer(t *testing.T) {
	g := &durGate{release: make(chan struct{})}
	addr, tr := raft.NewInmemTransport("n1")
	r, err := Open(Config{
		ID: raftmeta.BucketID{TableID: 1, Bucket: 0}, Dir: t.TempDir(), LocalID: "n1", LocalAddr: addr,
		Transport: tr, Raft: testTuning(), Logger: testLogger(t),
		Bootstrap: []raft.Server{{ID: "n1", Address: addr, Suffrage: raft.Voter}, {ID: "n2", Address: "n2", Suffrage: raft.Voter}},
		openLog: func(dir string) (dataLog, error) {
			l, err := logstore.Open(logstore.Options{Dir: dir, OffsetFunc: EntryOffsets})
			g.Log = l
			return g, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := g.defer_.Load(); n != 0 {
		t.Fatalf("SetDeferSync(true) called %d times in a group of two voters", n)
	}
}
