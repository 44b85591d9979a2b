package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
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
		Bootstrap: bootWith(raft.Server{ID: "n1", Address: addr, Suffrage: raft.Voter}, raft.Server{ID: "n2", Address: "n2", Suffrage: raft.Voter}),
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

// syncGateFS is a filesystem whose files' Sync waits while held, and
// takes at least delay; with lag (setLag) the data becomes durable only
// after it (a slow flush, which a crash can cut short).
type syncGateFS struct {
	logstore.FS
	delay time.Duration
	mu    sync.Mutex
	held  chan struct{} // non-nil: Sync waits until it is closed
	lag   time.Duration

	flushing sync.Mutex // held by a Sync with lag
}

func (fs *syncGateFS) setLag(d time.Duration) {
	fs.mu.Lock()
	fs.lag = d
	fs.mu.Unlock()
}

func (fs *syncGateFS) OpenFile(name string, flag int, perm os.FileMode) (logstore.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &syncGateFile{File: f, fs: fs}, nil
}

func (fs *syncGateFS) hold() {
	fs.mu.Lock()
	fs.held = make(chan struct{})
	fs.mu.Unlock()
}

// release lets held syncs and later ones through (a no-op when not held).
func (fs *syncGateFS) release() {
	fs.mu.Lock()
	if fs.held != nil {
		close(fs.held)
		fs.held = nil
	}
	fs.mu.Unlock()
}

type syncGateFile struct {
	logstore.File
	fs *syncGateFS
}

func (f *syncGateFile) Sync() error {
	f.fs.mu.Lock()
	held, lag := f.fs.held, f.fs.lag
	f.fs.mu.Unlock()
	if held != nil {
		<-held
	}
	if lag > 0 {
		// One flush at a time, as a disk does: what is written while
		// one runs waits for the next.
		f.fs.flushing.Lock()
		defer f.fs.flushing.Unlock()
		time.Sleep(lag)
	}
	start := time.Now()
	err := f.File.Sync()
	time.Sleep(f.fs.delay - time.Since(start))
	return err
}

// ackGateTransport is an in-memory transport that checks successful
// AppendEntries answers as rpc/peer.Transport.GateAppendAck does.
type ackGateTransport struct {
	*raft.InmemTransport
	check atomic.Pointer[func(*raft.AppendEntriesRequest) error]
	out   chan raft.RPC
	stop  chan struct{}
	once  sync.Once
}

func newAckGateTransport(tr raft.Transport) raft.Transport {
	t := &ackGateTransport{InmemTransport: tr.(*raft.InmemTransport), out: make(chan raft.RPC), stop: make(chan struct{})}
	go t.forward()
	return t
}

func (t *ackGateTransport) GateAppendAck(check func(*raft.AppendEntriesRequest) error) {
	t.check.Store(&check)
}

func (t *ackGateTransport) Consumer() <-chan raft.RPC { return t.out }

func (t *ackGateTransport) Close() error {
	t.once.Do(func() { close(t.stop) })
	return t.InmemTransport.Close()
}

// forward hands raft the requests; answers to AppendEntries pass the check.
func (t *ackGateTransport) forward() {
	for {
		var rpc raft.RPC
		select {
		case rpc = <-t.InmemTransport.Consumer():
		case <-t.stop:
			return
		}
		req, isAppend := rpc.Command.(*raft.AppendEntriesRequest)
		answer := rpc.RespChan
		got := make(chan raft.RPCResponse, 1)
		if isAppend {
			rpc.RespChan = got
		}
		select {
		case t.out <- rpc:
		case <-t.stop:
			return
		}
		if !isAppend {
			continue
		}
		go func() {
			select {
			case resp := <-got:
				if ae, ok := resp.Response.(*raft.AppendEntriesResponse); ok && ae.Success && resp.Error == nil {
					if check := t.check.Load(); check != nil {
						resp.Error = (*check)(req)
					}
				}
				answer <- resp
			case <-t.stop:
			}
		}()
	}
}

// A leader of three voters sends its entries to its followers while its
// own sync is still running (unless SerialLeaderSync), and still
// acknowledges a write, moves its high watermark, and lets its followers
// apply, only once its own copy is durable.
func TestLeaderSyncsInParallel(t *testing.T) {
	for _, serial := range []bool{false, true} {
		t.Run(map[bool]string{false: "parallel", true: "serial"}[serial], func(t *testing.T) {
			var mu sync.Mutex
			fsOf := map[raft.ServerID]*syncGateFS{}
			c := &testCluster{t: t, wrap: newAckGateTransport, tweak: func(cfg *Config) {
				fs := &syncGateFS{FS: logstore.OSFS{}}
				mu.Lock()
				fsOf[cfg.LocalID] = fs
				mu.Unlock()
				cfg.Log.FS = fs
				cfg.Raft.SerialLeaderSync = serial
			}}
			c.init(3)
			defer c.closeAll()
			li, followers := c.firstWrite()
			leader := c.reps[li]
			hw, last := leader.HighWatermark(), mustLastIndex(t, leader)
			waitFor(t, 5*time.Second, func() error { return allAt(followers, hw) })

			mu.Lock()
			held := fsOf[leader.cfg.LocalID]
			mu.Unlock()
			held.hold()
			defer held.release() // before closeAll, which waits for the syncs
			ctx := context.Background()
			acked := make(chan error, 2)
			appendAsync := func(seq int32) {
				go func() {
					_, _, err := leader.Append(ctx, [][]byte{makeBatch(2, "held")}, 1, seq)
					acked <- err
				}()
			}
			appendAsync(1)
			if serial {
				time.Sleep(200 * time.Millisecond)
				for _, f := range followers {
					if got := mustLastIndex(t, f); got != last {
						t.Fatalf("follower stored up to raft index %d while the leader's sync was held, want %d", got, last)
					}
				}
			} else {
				// The followers store the entry meanwhile; a second write's
				// AppendEntries would tell them the first is committed.
				waitFor(t, 5*time.Second, func() error { return allStored(t, followers, last+1) })
				appendAsync(2)
				waitFor(t, 5*time.Second, func() error { return allStored(t, followers, last+2) })
				time.Sleep(100 * time.Millisecond)
			}
			select {
			case err := <-acked:
				t.Fatalf("write acknowledged (%v) before the leader's copy was durable", err)
			default:
			}
			for _, r := range c.reps {
				if got := r.HighWatermark(); got != hw {
					t.Fatalf("high watermark %d before the leader's copy was durable, want %d", got, hw)
				}
			}

			held.release()
			writes := 1
			if !serial {
				writes = 2
			}
			for range writes {
				if err := <-acked; err != nil {
					t.Fatal(err)
				}
			}
			want := hw + int64(2*writes)
			if got := leader.HighWatermark(); got != want {
				t.Fatalf("leader's high watermark %d after the sync, want %d", got, want)
			}
			waitFor(t, 5*time.Second, func() error { return allAt(followers, want) })
		})
	}
}

// firstWrite stores one batch (writer 1, seq 0) and returns the index of
// the leader and its followers.
func (c *testCluster) firstWrite() (int, []*Replica) {
	c.t.Helper()
	if _, err := c.append([][]byte{makeBatch(1, "first")}, 1, 0); err != nil {
		c.t.Fatal(err)
	}
	li := c.leader()
	var followers []*Replica
	for i, r := range c.reps {
		if i != li {
			followers = append(followers, r)
		}
	}
	return li, followers
}

func mustLastIndex(t *testing.T, r *Replica) uint64 {
	t.Helper()
	i, err := r.log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func allStored(t *testing.T, reps []*Replica, index uint64) error {
	for _, r := range reps {
		if got := mustLastIndex(t, r); got < index {
			return fmt.Errorf("%s stored up to raft index %d, want %d", r.cfg.LocalID, got, index)
		}
	}
	return nil
}

func allAt(reps []*Replica, hw int64) error {
	for _, r := range reps {
		if got := r.HighWatermark(); got != hw {
			return fmt.Errorf("%s at high watermark %d, want %d", r.cfg.LocalID, got, hw)
		}
	}
	return nil
}

// A replica acknowledges appended entries only once none of them waits
// for a deferred sync, and the leader's rule defers only its own
// non-configuration entries.
func TestAckSyncedAndLeaderDefers(t *testing.T) {
	fs := &syncGateFS{FS: logstore.OSFS{}}
	l, err := logstore.Open(logstore.Options{Dir: t.TempDir(), FS: fs, OffsetFunc: EntryOffsets})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetDeferWhen(func([]*raft.Log) bool { return true })
	entries := func(from, to uint64) []*raft.Log {
		var out []*raft.Log
		for i := from; i <= to; i++ {
			out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogNoop})
		}
		return out
	}
	if err := l.StoreLogs(entries(1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(2); err != nil {
		t.Fatal(err)
	}
	fs.hold()
	defer fs.release()
	if err := l.StoreLogs(entries(3, 4)); err != nil {
		t.Fatal(err)
	}
	ack := ackSynced(l)
	if err := ack(&raft.AppendEntriesRequest{PrevLogEntry: 4}); err != nil {
		t.Fatalf("an answer acknowledging no entry: %v", err)
	}
	if err := ack(&raft.AppendEntriesRequest{Entries: entries(2, 2)}); err != nil {
		t.Fatalf("an answer acknowledging synced entries: %v", err)
	}
	acked := make(chan error, 1)
	go func() { acked <- ack(&raft.AppendEntriesRequest{PrevLogEntry: 2, Entries: entries(3, 4)}) }()
	select {
	case err := <-acked:
		t.Fatalf("entries acknowledged (%v) while their sync was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	fs.release()
	if err := <-acked; err != nil {
		t.Fatal(err)
	}

	c := newTestCluster(t, 3)
	defer c.closeAll()
	li, _ := c.firstWrite()
	cmd := []*raft.Log{{Index: 9, Term: 2, Type: raft.LogCommand}}
	conf := []*raft.Log{{Index: 9, Term: 2, Type: raft.LogCommand}, {Index: 10, Term: 2, Type: raft.LogConfiguration}}
	for i, r := range c.reps {
		rule := leaderDefers(r.raft)
		if got, want := rule(cmd), i == li; got != want {
			t.Errorf("replica %d (leader %v): defers commands = %v", i, i == li, got)
		}
		if rule(conf) {
			t.Errorf("replica %d defers a configuration entry", i)
		}
	}
}

// memDisks gives every replica of a cluster a MemFS of its own (behind a
// syncGateFS), kept across restarts, and the image a machine crash leaves
// of it.
type memDisks struct {
	mu sync.Mutex
	fs map[raft.ServerID]*syncGateFS
}

// newMemCluster starts three replicas, each on a memDisks disk.
func newMemCluster(t *testing.T) (*testCluster, *memDisks) {
	d := &memDisks{fs: make(map[raft.ServerID]*syncGateFS)}
	c := &testCluster{t: t, wrap: newAckGateTransport, tweak: func(cfg *Config) { cfg.Log.FS = d.of(cfg.LocalID) }}
	c.init(3)
	return c, d
}

// of is the disk of replica id.
func (d *memDisks) of(id raft.ServerID) *syncGateFS {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fs[id] == nil {
		d.fs[id] = &syncGateFS{FS: logstore.NewMemFS()}
	}
	return d.fs[id]
}

// crash returns what a machine crash now would leave of id's disk.
func (d *memDisks) crash(id raft.ServerID) *logstore.MemFS {
	return d.of(id).FS.(*logstore.MemFS).Crash()
}

// replace makes fs id's disk, for its next start.
func (d *memDisks) replace(id raft.ServerID, fs *logstore.MemFS) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fs[id] = &syncGateFS{FS: fs}
}

// A leader whose machine crashes before its own copy of an entry is
// synced (its followers hold theirs) loses the entry from its log; the
// cluster keeps it exactly once, the writer's retry is answered with it,
// and the old leader comes back with the same data as the others.
func TestLeaderCrashBeforeItsSync(t *testing.T) {
	c, disks := newMemCluster(t)
	defer c.closeAll()
	li, followers := c.firstWrite()
	leader := c.reps[li]
	last := mustLastIndex(t, leader)
	held := disks.of(leader.cfg.LocalID)
	held.hold()
	defer held.release()
	go func() { _, _, _ = leader.Append(context.Background(), [][]byte{makeBatch(2, "held")}, 1, 1) }()
	waitFor(t, 5*time.Second, func() error { return allStored(t, followers, last+1) })

	// The machine crashes now: what its log had not synced is gone. The
	// process goes on, cut off, until it is closed; nothing it does after
	// this point reaches the others.
	crashed := disks.crash(leader.cfg.LocalID)
	c.isolate(li)
	held.release()
	c.closeReplica(li)
	disks.replace(leader.cfg.LocalID, crashed)
	c.restart(li)
	if got := mustLastIndex(t, c.reps[li]); got != last {
		t.Fatalf("the crashed leader's log ends at raft index %d after the crash, want %d", got, last)
	}

	// The writer retries seq 1 wherever the leader now is.
	if _, err := c.append([][]byte{makeBatch(2, "held")}, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.append([][]byte{makeBatch(1, "after")}, 1, 2); err != nil {
		t.Fatal(err)
	}
	want := int64(1 + 2 + 1)
	waitFor(t, 10*time.Second, func() error { return allAt(c.reps, want) })
	ref := fetchAll(t, c.reps[0])
	idx := index(t, ref)
	for s := int32(0); s <= 2; s++ {
		if n := len(idx[ws{1, s}]); n != 1 {
			t.Fatalf("writer 1 seq %d stored %d times, want once", s, n)
		}
	}
	sameBatches(t, ref, c.reps)
}

// A power loss of all three machines at once, while writers append, keeps
// every write acknowledged before it exactly once, and the replicas agree
// afterwards: an acknowledgement means a majority synced it, the leader's
// parallel sync included.
func TestPowerLossKeepsEveryAcknowledgedWrite(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			c, disks := newMemCluster(t)
			defer c.closeAll()
			li, followers := c.firstWrite()
			// Flushes slow enough for a crash to cut them short, and
			// uneven: one follower fast, the leader slower (its sync runs
			// in parallel with theirs), the other follower slowest. A
			// write raft counts committed with the fast follower is then
			// durable on that one alone for a while, and must not be
			// acknowledged in that window (without the FSM's wait for
			// the leader's sync, this test loses writes).
			lags := [3]time.Duration{2 * time.Millisecond, 0, 4 * time.Millisecond}
			for i, r := range []*Replica{c.reps[li], followers[0], followers[1]} {
				disks.of(r.cfg.LocalID).setLag(lags[i])
			}

			var ackMu sync.Mutex
			var acked []ws
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for w := int64(2); w <= 5; w++ {
				wg.Go(func() {
					for seq := int32(0); ctx.Err() == nil; {
						i := c.leader()
						if i < 0 {
							time.Sleep(time.Millisecond)
							continue
						}
						c.mu.Lock()
						r := c.reps[i]
						c.mu.Unlock()
						cctx, cancel := context.WithTimeout(ctx, time.Second)
						_, _, err := r.Append(cctx, [][]byte{makeBatch(1, fmt.Sprintf("w%d-%d", w, seq))}, w, seq)
						cancel()
						if err != nil {
							continue // the same sequence again, as a client retries
						}
						ackMu.Lock()
						acked = append(acked, ws{w, seq})
						ackMu.Unlock()
						seq++
					}
				})
			}
			time.Sleep(time.Duration(150+50*round) * time.Millisecond)

			// The power goes: what each machine synced is what it keeps.
			ackMu.Lock()
			before := append([]ws(nil), acked...)
			ackMu.Unlock()
			crashed := make(map[raft.ServerID]*logstore.MemFS)
			for _, r := range c.reps {
				crashed[r.cfg.LocalID] = disks.crash(r.cfg.LocalID)
			}
			stop()
			wg.Wait()
			c.closeAll()
			if len(before) == 0 {
				t.Fatal("no write was acknowledged before the crash")
			}

			for id, fs := range crashed {
				disks.replace(id, fs)
			}
			for _, i := range rand.Perm(len(c.reps)) { // whoever starts first tends to lead
				c.restart(i)
			}
			// A new leader commits an entry of its term, and with it
			// everything before; then every replica applies it all.
			if _, err := c.append([][]byte{makeBatch(1, "after")}, 1, 1); err != nil {
				t.Fatal(err)
			}
			li = c.leader()
			waitFor(t, 10*time.Second, func() error { return allAt(c.reps, c.reps[li].HighWatermark()) })
			ref := fetchAll(t, c.reps[li])
			idx := index(t, ref)
			for k, bases := range idx {
				if len(bases) != 1 {
					t.Fatalf("writer %d seq %d stored %d times", k.w, k.s, len(bases))
				}
			}
			for _, k := range before {
				if len(idx[k]) != 1 {
					t.Fatalf("writer %d seq %d, acknowledged before the power loss, is gone (%d writes acknowledged before it)", k.w, k.s, len(before))
				}
			}
			sameBatches(t, ref, c.reps)
			t.Logf("%d writes acknowledged before the power loss, %d stored after it", len(before), len(idx))
		})
	}
}
