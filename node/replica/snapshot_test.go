package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// logDump is a replica's stored entries with records, as raft index, base
// offset, count and data.
type logDump struct {
	start, next int64
	entries     []string
}

func dumpLog(t testing.TB, r *Replica) logDump {
	t.Helper()
	d := logDump{start: r.log.StartOffset(), next: r.log.NextOffset()}
	err := r.log.Read(d.start, d.next, 1<<30, func(index uint64, base int64, count int32, data []byte) bool {
		d.entries = append(d.entries, fmt.Sprintf("%d@%d+%d:%x", index, base, count, data))
		return true
	})
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	return d
}

// newSnapCluster runs n replicas with small segments and waits for a
// leader.
func newSnapCluster(t *testing.T, n int, tweak func(*Config)) *testCluster {
	c := newTestClusterWith(t, n, func(cfg *Config) {
		cfg.Log.SegmentBytes = 8 << 10
		if tweak != nil {
			tweak(cfg)
		}
	})
	t.Cleanup(c.closeAll)
	waitFor(t, 10*time.Second, func() error {
		if c.leader() < 0 {
			return errors.New("no leader")
		}
		return nil
	})
	return c
}

// rowWriter appends 3-row batches of ~300 bytes as one idempotent writer.
type rowWriter struct {
	t   *testing.T
	c   *testCluster
	seq int32
}

func (w *rowWriter) write(n int) {
	for range n {
		if _, err := w.c.append([][]byte{makeBatch(3, fmt.Sprintf("row %d %s", w.seq, bytes.Repeat([]byte{'x'}, 300)))}, 7, w.seq); err != nil {
			w.t.Fatal(err)
		}
		w.seq++
	}
}

// stopFollower closes replica i once it has applied index applied, after
// handing leadership away if it leads.
func stopFollower(t *testing.T, c *testCluster, i int, applied uint64) {
	waitFor(t, 10*time.Second, func() error {
		if a, _ := c.reps[i].stats(); a < applied {
			return fmt.Errorf("replica %d applied %d", i, a)
		}
		return nil
	})
	if c.leader() == i {
		if err := c.reps[i].Raft().LeadershipTransfer().Error(); err != nil {
			t.Fatal(err)
		}
	}
	c.closeReplica(i)
}

// cutHead deletes the head of ld's log through raft index upTo (as
// retention and tiering do: after a snapshot that covers it), keeping the
// segments after it.
func cutHead(t *testing.T, ld *Replica, upTo uint64) {
	first, _ := ld.log.FirstIndex()
	if _, err := ld.trimHead(upTo, func(maxIndex uint64) (int, error) {
		return 0, ld.log.DeleteRange(first, min(upTo, maxIndex))
	}); err != nil {
		t.Fatal(err)
	}
	if f, _ := ld.log.FirstIndex(); f <= first {
		t.Fatalf("the log still starts at raft index %d", f)
	}
}

// snapshotCluster runs 3 replicas with small segments, stops replica 2,
// writes, cuts the leader's log head past what replica 2 holds, writes
// more and restarts replica 2, which can only catch up from a snapshot
// (whose section is the leader's entries between its log start and the
// snapshot). It returns the cluster and the leader's index once replica 2
// has applied everything.
func snapshotCluster(t *testing.T, tweak func(*Config)) (*testCluster, int) {
	c := newSnapCluster(t, 3, tweak)
	w := &rowWriter{t: t, c: c}
	w.write(20)
	stopFollower(t, c, 2, 20)
	w.write(150)
	l, ld := cutPastStopped(t, c, w)
	w.write(30)
	c.restart(2)
	waitCaughtUp(t, c.reps[2], ld)
	return c, l
}

// cutPastStopped writes 50 more batches and then cuts the log head of the
// leader, and of every other running replica, through the last entry
// before them, past every stopped replica. The others too: on a loaded
// host leadership may move before a stopped replica restarts, and it must
// find no log to catch up from wherever it does.
func cutPastStopped(t *testing.T, c *testCluster, w *rowWriter) (int, *Replica) {
	l := c.leader()
	ld := c.reps[l]
	behind, _ := ld.log.LastIndex()
	w.write(50)
	for i, r := range c.reps {
		if r == nil {
			continue
		}
		waitFor(t, 10*time.Second, func() error {
			if a := r.Raft().AppliedIndex(); a < behind {
				return fmt.Errorf("replica %d applied raft index %d, want %d", i, a, behind)
			}
			return nil
		})
		cutHead(t, r, behind)
	}
	return l, ld
}

// transferTo hands leadership to replica i, again while a transfer times
// out (raft gives one its election timeout, 100 ms in tests).
func transferTo(t *testing.T, c *testCluster, i int) {
	waitFor(t, 20*time.Second, func() error {
		l := c.leader()
		if l == i {
			return nil
		}
		if l < 0 {
			return errors.New("no leader")
		}
		err := c.reps[l].Raft().LeadershipTransferToServer(c.layout[i].ID, c.addrs[i]).Error()
		return fmt.Errorf("replica %d does not lead yet (transfer: %v)", i, err)
	})
}

// waitCaughtUp waits until r has applied what the leader ld has.
func waitCaughtUp(t *testing.T, r, ld *Replica) {
	t.Helper()
	waitFor(t, 20*time.Second, func() error {
		la, _ := ld.stats()
		if a, _ := r.stats(); a != la {
			return fmt.Errorf("replica applied %d, the leader %d", a, la)
		}
		return nil
	})
}

// TestSnapshotCarriesTheLeadersLog: a replica that catches up from a raft
// snapshot takes the leader's local log with it, so it holds what the
// leader holds — not only the entries after the snapshot — and keeps it
// across a restart.
func TestSnapshotCarriesTheLeadersLog(t *testing.T) {
	c, l := snapshotCluster(t, nil)
	ld := c.reps[l]
	metas, err := c.reps[2].snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("replica 2 has no snapshot (%v): it did not catch up from one", err)
	}
	want := dumpLog(t, ld)
	got := dumpLog(t, c.reps[2])
	if got.start != want.start || got.next != want.next || len(got.entries) != len(want.entries) {
		t.Fatalf("replica 2 holds offsets [%d, %d) in %d entries, the leader [%d, %d) in %d",
			got.start, got.next, len(got.entries), want.start, want.next, len(want.entries))
	}
	for i := range want.entries {
		if got.entries[i] != want.entries[i] {
			t.Fatalf("entry %d differs:\n replica 2 %.80s\n leader    %.80s", i, got.entries[i], want.entries[i])
		}
	}
	if f, _ := c.reps[2].log.FirstIndex(); f >= metas[0].Index {
		t.Fatalf("replica 2's log starts at raft index %d, its snapshot is at %d: it took no entries before it", f, metas[0].Index)
	}

	// Restarted, replica 2 restores the snapshot it received and keeps
	// its log (the section is skipped: the log continues from it).
	c.closeReplica(2)
	c.restart(2)
	waitCaughtUp(t, c.reps[2], ld)
	if again := dumpLog(t, c.reps[2]); again.start != want.start || again.next != want.next || len(again.entries) != len(want.entries) {
		t.Fatalf("after a restart replica 2 holds [%d, %d) in %d entries, want [%d, %d) in %d",
			again.start, again.next, len(again.entries), want.start, want.next, len(want.entries))
	}

	// Leading, it serves the whole log and takes writes at the next offset.
	transferTo(t, c, 2)
	base, err := c.append([][]byte{makeBatch(2, "after")}, 8, 0)
	if err != nil || base != want.next {
		t.Fatalf("append on replica 2 = %d, %v; want offset %d", base, err, want.next)
	}
}

// TestSnapshotWithoutLogEmptiesTheLog: a snapshot sent without a log
// section (the cluster's nodes cannot all read one yet) restores as
// before: the follower's log is emptied and continues at the snapshot's
// next offset, densely.
func TestSnapshotWithoutLogEmptiesTheLog(t *testing.T) {
	c, l := snapshotCluster(t, func(cfg *Config) { cfg.SnapshotLog = func() bool { return false } })
	want := dumpLog(t, c.reps[l])
	got := dumpLog(t, c.reps[2])
	if got.next != want.next || got.start <= want.start {
		t.Fatalf("replica 2 holds [%d, %d), the leader [%d, %d): want a later start, the same end", got.start, got.next, want.start, want.next)
	}
	if n := len(got.entries); n == 0 || got.entries[n-1] != want.entries[len(want.entries)-1] {
		t.Fatalf("replica 2's last entry differs from the leader's")
	}
}

// readSection reads a whole section from b: its header and entries.
func readSection(b []byte) (logSection, []*raft.Log, error) {
	r := bytes.NewReader(b)
	sec, err := readSectionHeader(r)
	if err != nil {
		return sec, nil, err
	}
	sr := newSectionReader(r, sec)
	var out []*raft.Log
	for {
		e, err := sr.entry()
		if err != nil {
			return sec, out, err
		}
		if e == nil {
			return sec, out, nil
		}
		out = append(out, e)
	}
}

func sectionBytes(sec logSection, entries ...*raft.Log) []byte {
	var body []byte
	for _, e := range entries {
		body = appendSectionEntry(body, e)
	}
	sec.Bytes = uint64(len(body))
	return append(sec.appendHeader(nil), body...)
}

// TestSectionReaderChecksEntries: a section reads back as written, and one
// whose entries do not match its header (a missing index, a wrong last
// term, bytes left over or missing) is refused as ErrCorruptSnapshot.
func TestSectionReaderChecksEntries(t *testing.T) {
	e5 := &raft.Log{Index: 5, Term: 2, Type: raft.LogNoop}
	e6 := &raft.Log{Index: 6, Term: 3, Type: raft.LogCommand, Data: []byte("data"), Extensions: []byte("ext")}
	good := sectionBytes(logSection{First: 5, Last: 6, LastTerm: 3, StartOffset: 10}, e5, e6)
	sec, got, err := readSection(good)
	if err != nil || len(got) != 2 || sec.StartOffset != 10 || got[1].Term != 3 || string(got[1].Data) != "data" || string(got[1].Extensions) != "ext" {
		t.Fatalf("readSection = %+v, %+v, %v", sec, got, err)
	}
	e7 := &raft.Log{Index: 7, Term: 3, Type: raft.LogNoop}
	for name, b := range map[string][]byte{
		"missing index": sectionBytes(logSection{First: 5, Last: 6, LastTerm: 3}, e5, e7),
		"last term":     sectionBytes(logSection{First: 5, Last: 6, LastTerm: 9}, e5, e6),
		"truncated":     good[:len(good)-2],
		"cut at entry":  good[:sectionHeaderLen],
		"left over":     append(sectionBytes(logSection{First: 5, Last: 6, LastTerm: 3}, e5, e6, e7)[:0:0], sectionBytes(logSection{First: 5, Last: 6, LastTerm: 3}, e5, e6, e7)...),
		"empty range":   sectionBytes(logSection{First: 6, Last: 5}),
	} {
		if _, _, err := readSection(b); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: %v, want ErrCorruptSnapshot", name, err)
		}
	}
}

// FuzzReadSection: any bytes either read as a section or fail with
// ErrCorruptSnapshot, without panicking or allocating more than the
// section claims (each entry is bounded by maxSectionEntry and by the
// section's own length).
func FuzzReadSection(f *testing.F) {
	f.Add(sectionBytes(logSection{First: 5, Last: 6, LastTerm: 3, StartOffset: 10},
		&raft.Log{Index: 5, Term: 2, Type: raft.LogNoop},
		&raft.Log{Index: 6, Term: 3, Type: raft.LogCommand, Data: []byte("data")}))
	f.Add([]byte(sectionMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		sec, entries, err := readSection(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v is not ErrCorruptSnapshot", err)
			}
			return
		}
		if uint64(len(entries)) != sec.Last-sec.First+1 {
			t.Fatalf("%d entries for [%d, %d]", len(entries), sec.First, sec.Last)
		}
	})
}

// capTransport keeps the snapshot stream it is asked to send.
type capTransport struct {
	raft.Transport
	size int64
	data []byte
}

func (t *capTransport) InstallSnapshot(_ raft.ServerID, _ raft.ServerAddress, args *raft.InstallSnapshotRequest, _ *raft.InstallSnapshotResponse, data io.Reader) error {
	t.size = args.Size
	var err error
	t.data, err = io.ReadAll(data)
	return err
}

// TestSendSnapshotReplacesAReceivedSection: a replica that leads with a
// snapshot it received (the old leader's section in front of the state)
// sends it with its own log section in place of the old one, and a size
// that matches what it sends.
func TestSendSnapshotReplacesAReceivedSection(t *testing.T) {
	r := openSingle(t, t.TempDir(), nil)
	defer r.Close()
	for s := range int32(5) {
		if _, _, err := r.Append(context.Background(), [][]byte{makeBatch(2, fmt.Sprint("b", s))}, 3, s); err != nil {
			t.Fatal(err)
		}
	}
	last, _ := r.log.LastIndex()
	var e raft.Log
	if err := r.log.GetLog(last, &e); err != nil {
		t.Fatal(err)
	}
	state := []byte("the FSM state")
	stored := append(sectionBytes(logSection{First: 2, Last: 2, LastTerm: 9}, &raft.Log{Index: 2, Term: 9, Type: raft.LogNoop}), state...)
	_, inner := raft.NewInmemTransport("x")
	ct := &capTransport{Transport: inner}
	args := &raft.InstallSnapshotRequest{LastLogIndex: last, LastLogTerm: e.Term, Size: int64(len(stored))}
	if err := r.sendSnapshot(ct, nil, "n2", "x", args, &raft.InstallSnapshotResponse{}, bytes.NewReader(stored)); err != nil {
		t.Fatal(err)
	}
	if ct.size != int64(len(ct.data)) {
		t.Fatalf("sent Size %d, but %d bytes", ct.size, len(ct.data))
	}
	br := bytes.NewReader(ct.data)
	sec, err := readSectionHeader(br)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := r.log.FirstIndex()
	if sec.First != first || sec.Last != last || sec.LastTerm != e.Term {
		t.Fatalf("sent section [%d, %d] term %d, want [%d, %d] term %d", sec.First, sec.Last, sec.LastTerm, first, last, e.Term)
	}
	if err := newSectionReader(br, sec).skip(); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(br); !bytes.Equal(rest, state) {
		t.Fatalf("after the section: %q, want the state %q alone", rest, state)
	}
}

// TestReceivedSnapshotIsSentOn: a replica that caught up from a snapshot
// and then leads sends that snapshot on to a replica further behind, with
// its own log section in place of the one it received, and the receiver
// ends up holding the same log.
func TestReceivedSnapshotIsSentOn(t *testing.T) {
	c := newSnapCluster(t, 5, nil)
	w := &rowWriter{t: t, c: c}
	w.write(20)
	stopFollower(t, c, 4, 20) // furthest behind
	w.write(100)
	l, _ := c.waitLeader(t, -1)
	a, _ := c.reps[l].stats()
	stopFollower(t, c, 3, a)
	w.write(100)
	_, ld := cutPastStopped(t, c, w)
	c.restart(3) // catches up from ld's snapshot, section included
	waitCaughtUp(t, c.reps[3], ld)
	metas, err := c.reps[3].snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("replica 3 has no snapshot (%v)", err)
	}
	transferTo(t, c, 3)
	w.write(10)
	// Replica 4 is behind replica 3's log start: it needs replica 3's
	// latest snapshot, the one it received.
	if f, _ := c.reps[3].log.FirstIndex(); f <= 21 {
		t.Fatalf("replica 3's log starts at raft index %d, replica 4 could catch up from it", f)
	}
	if m, _ := c.reps[3].snaps.List(); len(m) == 0 || m[0].ID != metas[0].ID {
		t.Fatalf("replica 3 took a snapshot of its own: the test needs the received one latest")
	}
	c.restart(4)
	waitCaughtUp(t, c.reps[4], c.reps[3])
	want, got := dumpLog(t, c.reps[3]), dumpLog(t, c.reps[4])
	if got.start != want.start || got.next != want.next || len(got.entries) != len(want.entries) {
		t.Fatalf("replica 4 holds [%d, %d) in %d entries, replica 3 [%d, %d) in %d",
			got.start, got.next, len(got.entries), want.start, want.next, len(want.entries))
	}
}
