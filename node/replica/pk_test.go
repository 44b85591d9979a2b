package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/logstore/record"
)

// pkSchema: id BIGINT NOT NULL (key), total BIGINT, name STRING.
func pkSchema() *record.Schema {
	return &record.Schema{ID: 1, PrimaryKey: []string{"id"}, Columns: []record.Column{
		{Name: "id", Type: record.Type{Kind: record.KindBigInt}},
		{Name: "total", Type: record.Type{Kind: record.KindBigInt}, Nullable: true},
		{Name: "name", Type: record.Type{Kind: record.KindString}, Nullable: true},
	}}
}

// pkConfig builds the PK part of a replica config on store st.
func pkConfig(t testing.TB, st *kvstore.Store, prefix uint64, props map[string]string) *PKConfig {
	t.Helper()
	s := pkSchema()
	codec, err := kvstore.NewCodec(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := kvstore.NewMerger(s, props)
	if err != nil {
		t.Fatal(err)
	}
	return &PKConfig{KV: st.Replica(prefix, codec), Merger: m, Schema: s, Compression: record.CompressionZSTD, ZstdLevel: 3}
}

func openKV(t testing.TB, dir string) *kvstore.Store {
	t.Helper()
	st, err := kvstore.Open(dir, kvstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func row(id, total int64, name string) kvstore.Row {
	r := kvstore.Row{kvstore.Int(id), kvstore.Int(total), kvstore.Str(name)}
	if name == "" {
		r[2] = kvstore.Null()
	}
	return r
}

// lookupRow looks one key up and renders the row ("<nil>" when absent).
func lookupRow(t testing.TB, r *Replica, id int64) string {
	t.Helper()
	pk := r.cfg.PK
	key, err := pk.KV.Codec().AppendKey(nil, row(id, 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := r.Lookup(context.Background(), [][]byte{key}, 0)
	if err != nil {
		t.Fatalf("Lookup(%d): %v", id, err)
	}
	if vals[0] == nil {
		return "<nil>"
	}
	rw, err := pk.KV.Codec().DecodeRow(nil, vals[0])
	if err != nil {
		t.Fatal(err)
	}
	return fmtRow(rw)
}

func fmtRow(r kvstore.Row) string {
	var b strings.Builder
	for i, v := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		switch {
		case v.Null:
			b.WriteString("null")
		case v.B != nil:
			b.Write(v.B)
		default:
			fmt.Fprint(&b, v.I)
		}
	}
	return b.String()
}

// changelog decodes every changelog record this replica stored, as
// "offset type row" lines.
func changelog(t testing.TB, r *Replica) []string { return changelogLines(t, r, false) }

// changelogLines decodes every changelog record this replica stored, each
// batch with its own schema version, as "offset type row" lines, with
// the version ("offset vN type row") when withVersion is set.
func changelogLines(t testing.TB, r *Replica, withVersion bool) []string {
	t.Helper()
	var out []string
	for _, b := range fetchAll(t, r) {
		bt, _, err := record.ParseBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bt.HasChangeType() {
			t.Fatalf("changelog batch at %d lacks the change-type attribute", bt.BaseOffset)
		}
		v, err := r.pks.version(bt.SchemaID)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := record.DecodeBody(kvstore.ChangelogArrowSchema(v.Schema), bt.Body, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kvstore.ChangesFromRecord(nil, v.Schema, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cs {
			if withVersion {
				out = append(out, fmt.Sprintf("%d v%d %v %s", bt.BaseOffset+int64(i), bt.SchemaID, c.Type, fmtRow(c.Row)))
			} else {
				out = append(out, fmt.Sprintf("%d %v %s", bt.BaseOffset+int64(i), c.Type, fmtRow(c.Row)))
			}
		}
	}
	return out
}

func write(t testing.TB, r *Replica, w *PKWrite, writer int64, seq int32) (int64, int32) {
	t.Helper()
	base, n, err := r.Write(context.Background(), w, writer, seq)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return base, n
}

func TestPKWriteMergesAndStoresTheChangelog(t *testing.T) {
	st := openKV(t, t.TempDir())
	defer st.Close()
	r := openSingle(t, t.TempDir(), func(c *Config) { c.PK = pkConfig(t, st, 1, nil) })
	defer r.Close()

	write(t, r, &PKWrite{Rows: []kvstore.Row{row(1, 10, "a"), row(2, 20, "b"), row(1, 11, "c")}}, 0, 0)
	write(t, r, &PKWrite{Rows: []kvstore.Row{row(2, 0, "")}, Delete: true}, 0, 0)
	write(t, r, &PKWrite{Rows: []kvstore.Row{row(3, 0, "")}, Delete: true}, 0, 0) // absent: no change
	// Partial update of total only: name keeps its value.
	write(t, r, &PKWrite{Rows: []kvstore.Row{{kvstore.Int(1), kvstore.Int(99), kvstore.Null()}}, TargetCols: []int{0, 1}}, 0, 0)

	want := []string{
		"0 +I 1,10,a", "1 +I 2,20,b", "2 -U 1,10,a", "3 +U 1,11,c",
		"4 -D 2,20,b",
		"5 -U 1,11,c", "6 +U 1,99,c",
	}
	if got := changelog(t, r); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changelog:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for id, want := range map[int64]string{1: "1,99,c", 2: "<nil>", 3: "<nil>"} {
		if got := lookupRow(t, r, id); got != want {
			t.Errorf("lookup %d = %s, want %s", id, got, want)
		}
	}
	if hw := r.HighWatermark(); hw != 7 {
		t.Errorf("high watermark %d, want 7", hw)
	}
	// Append of raw batches to a PK replica is refused.
	if _, _, err := r.Append(context.Background(), [][]byte{makeBatch(1, "x")}, 0, 0); !errors.Is(err, ErrNotPK) {
		t.Errorf("Append on a PK replica: %v, want ErrNotPK", err)
	}
}

// DESIGN §6 trap: a retried batch whose first attempt is applied or still in
// flight is never merged again — with a sum aggregation a second merge would
// count it twice.
func TestPKRetryIsNeverMergedTwice(t *testing.T) {
	st := openKV(t, t.TempDir())
	defer st.Close()
	props := map[string]string{"table.merge-engine": "aggregation", "fields.total.agg": "sum"}
	r := openSingle(t, t.TempDir(), func(c *Config) { c.PK = pkConfig(t, st, 1, props) })
	defer r.Close()

	w := &PKWrite{Rows: []kvstore.Row{row(7, 5, "x")}}
	write(t, r, w, 42, 0)
	// Applied retry.
	write(t, r, w, 42, 0)
	// In-flight retries: hold the proposer, queue the original and two
	// retries, release.
	release := make(chan struct{})
	r.hookBeforeDrain = func() { <-release }
	var wg sync.WaitGroup
	results := make([]int64, 3)
	for i := range 3 {
		wg.Go(func() {
			base, _, err := r.Write(context.Background(), &PKWrite{Rows: []kvstore.Row{row(7, 5, "x")}}, 42, 1)
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
			results[i] = base
		})
	}
	waitFor(t, 5*time.Second, func() error {
		if n := r.queued(); n < 3 {
			return fmt.Errorf("%d queued", n)
		}
		return nil
	})
	close(release)
	wg.Wait()
	r.hookBeforeDrain = nil
	if results[0] != results[1] || results[1] != results[2] {
		t.Errorf("retries got different offsets %v", results)
	}
	// A new sequence is merged.
	write(t, r, &PKWrite{Rows: []kvstore.Row{row(7, 1, "y")}}, 42, 2)
	if got := lookupRow(t, r, 7); got != "7,11,y" {
		t.Fatalf("after 5 + 5 (+ retries) + 1: %s, want 7,11,y", got)
	}
}

// A refused write (delete on a table with table.delete.behavior=disable)
// changes nothing, and the rows merged before it in the same request are
// not applied either.
func TestPKRejectedWriteChangesNothing(t *testing.T) {
	st := openKV(t, t.TempDir())
	defer st.Close()
	r := openSingle(t, t.TempDir(), func(c *Config) {
		c.PK = pkConfig(t, st, 1, map[string]string{"table.delete.behavior": "disable"})
	})
	defer r.Close()
	write(t, r, &PKWrite{Rows: []kvstore.Row{row(1, 1, "a")}}, 0, 0)
	_, _, err := r.Write(context.Background(), &PKWrite{Rows: []kvstore.Row{row(1, 0, "")}, Delete: true}, 9, 0)
	if !errors.Is(err, ErrRejected) || !errors.Is(err, kvstore.ErrDeleteDisabled) {
		t.Fatalf("delete with deletes disabled: %v", err)
	}
	// NOT NULL violation in the second row of a request: the first row of
	// the same request is not applied (the overlay is dropped).
	r2 := &PKWrite{Rows: []kvstore.Row{row(1, 2, "b"), {kvstore.Null(), kvstore.Int(1), kvstore.Null()}}}
	if _, _, err := r.Write(context.Background(), r2, 9, 1); !errors.Is(err, ErrRejected) {
		t.Fatalf("null key: %v", err)
	}
	// The rejected seq can be retried with good rows: it is merged afresh.
	write(t, r, &PKWrite{Rows: []kvstore.Row{row(1, 3, "c")}}, 9, 1)
	if got := lookupRow(t, r, 1); got != "1,3,c" {
		t.Fatalf("row 1 = %s, want 1,3,c", got)
	}
	if got := len(changelog(t, r)); got != 3 {
		t.Fatalf("%d changelog records, want 3 (+I, -U, +U)", got)
	}
}

// TestPKOversizedRowIsRefusedBeforeProposing: a key or a merged row that
// badger would refuse at apply is refused on the leader, before anything
// is proposed. Proposed, it would fail every replica's apply of a committed
// entry, and the FSM stops the node on that (a 100 KB string key did, and
// again on every restart, replaying it).
func TestPKOversizedRowIsRefusedBeforeProposing(t *testing.T) {
	st := openKV(t, t.TempDir())
	defer st.Close()
	s := &record.Schema{ID: 1, PrimaryKey: []string{"k"}, Columns: []record.Column{
		{Name: "k", Type: record.Type{Kind: record.KindString}},
		{Name: "v", Type: record.Type{Kind: record.KindString}, Nullable: true},
	}}
	codec, err := kvstore.NewCodec(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := kvstore.NewMerger(s, map[string]string{"table.merge-engine": "aggregation", "fields.v.agg": "listagg"})
	if err != nil {
		t.Fatal(err)
	}
	kv := st.Replica(1, codec)
	r := openSingle(t, t.TempDir(), func(c *Config) {
		c.PK = &PKConfig{KV: kv, Merger: m, Schema: s, Compression: record.CompressionZSTD, ZstdLevel: 3}
	})
	defer r.Close()
	kvRow := func(k, v string) kvstore.Row { return kvstore.Row{kvstore.Str(k), kvstore.Str(v)} }

	write(t, r, &PKWrite{Rows: []kvstore.Row{kvRow("a", "x")}}, 0, 0)
	hw := r.HighWatermark()
	for _, tc := range []struct {
		name string
		w    *PKWrite
	}{
		{"100 KB key", &PKWrite{Rows: []kvstore.Row{kvRow(strings.Repeat("k", 100_000), "v")}}},
		{"key just over the limit", &PKWrite{Rows: []kvstore.Row{kvRow(strings.Repeat("k", kvstore.MaxKeyBytes), "v")}}},
		{"delete of a 100 KB key", &PKWrite{Rows: []kvstore.Row{kvRow(strings.Repeat("k", 100_000), "")}, Delete: true}},
		{"value over the limit", &PKWrite{Rows: []kvstore.Row{kvRow("b", strings.Repeat("v", kv.MaxValueBytes()))}}},
		// listagg grows "a" past the limit in the second row of a request.
		{"merged value over the limit", &PKWrite{Rows: []kvstore.Row{kvRow("a", strings.Repeat("1", kv.MaxValueBytes()/2)), kvRow("a", strings.Repeat("2", kv.MaxValueBytes()/2))}}},
	} {
		_, _, err := r.Write(context.Background(), tc.w, 0, 0)
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, kvstore.ErrRowTooLarge) {
			t.Fatalf("%s: %v, want ErrTooLarge and kvstore.ErrRowTooLarge", tc.name, err)
		}
	}
	if got := r.HighWatermark(); got != hw {
		t.Fatalf("refused writes moved the high watermark %d -> %d", hw, got)
	}
	// The largest key and a large value that fit are stored.
	big := strings.Repeat("k", kvstore.MaxKeyBytes-16)
	write(t, r, &PKWrite{Rows: []kvstore.Row{kvRow(big, strings.Repeat("v", 1<<20))}}, 0, 0)
	key, err := codec.AppendKey(nil, kvRow(big, ""))
	if err != nil {
		t.Fatal(err)
	}
	if vals, err := r.Lookup(context.Background(), [][]byte{key}, 0); err != nil || vals[0] == nil {
		t.Fatalf("lookup of the large row: %v, %v", vals, err)
	}
}

// Restart keeps the state: raft replays the log after the last snapshot and
// kvstore skips what it applied. A replica whose KV store was lost (a new
// badger dir) rebuilds it from snapshot + log.
func TestPKRestartAndRebuildFromLog(t *testing.T) {
	kvDir, dir := t.TempDir(), t.TempDir()
	st := openKV(t, kvDir)
	r := openSingle(t, dir, func(c *Config) { c.PK = pkConfig(t, st, 1, nil) })
	for i := range 50 {
		write(t, r, &PKWrite{Rows: []kvstore.Row{row(int64(i%10), int64(i), "v")}}, 1, int32(i))
		if i == 25 {
			if err := r.raft.Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := make([]string, 10)
	for i := range want {
		want[i] = lookupRow(t, r, int64(i))
	}
	r.Close()
	r = openSingle(t, dir, func(c *Config) { c.PK = pkConfig(t, st, 1, nil) })
	for i := range want {
		if got := lookupRow(t, r, int64(i)); got != want[i] {
			t.Errorf("after restart: row %d = %s, want %s", i, got, want[i])
		}
	}
	// The idempotence window survived too: a retry of seq 49 (with other
	// rows, to tell) answers the stored result and merges nothing.
	hw := r.HighWatermark()
	if _, _, err := r.Write(context.Background(), &PKWrite{Rows: []kvstore.Row{row(0, 1000, "dup")}}, 1, 49); err != nil {
		t.Fatalf("retry of seq 49: %v", err)
	}
	if got := lookupRow(t, r, 0); got != want[0] || r.HighWatermark() != hw {
		t.Errorf("a retry of an applied sequence was merged: row 0 = %s, hw %d -> %d", got, hw, r.HighWatermark())
	}
	r.Close()
	st.Close()

	st2 := openKV(t, t.TempDir()) // the KV state is gone, the log is not
	defer st2.Close()
	r = openSingle(t, dir, func(c *Config) { c.PK = pkConfig(t, st2, 1, nil) })
	defer r.Close()
	for i := range want {
		if got := lookupRow(t, r, int64(i)); got != want[i] {
			t.Errorf("rebuilt: row %d = %s, want %s", i, got, want[i])
		}
	}
}

// pkCluster is a 3-replica PK group, each replica with its own KV store.
type pkCluster struct {
	*testCluster
	stores []*kvstore.Store
	pkMod  func(i int, pk *PKConfig) // changes replica i's PK config as it opens
}

func newPKCluster(t *testing.T) *pkCluster { return newPKClusterWrapped(t, nil, nil) }

// newPKClusterWrapped is newPKCluster with wrap around every transport and
// pkMod (when not nil) applied to every PK config.
func newPKClusterWrapped(t *testing.T, wrap func(raft.Transport) raft.Transport, pkMod func(int, *PKConfig)) *pkCluster {
	c := &pkCluster{testCluster: &testCluster{t: t, wrap: wrap}, pkMod: pkMod}
	for i := range 3 {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("r%d", i)))
		c.dirs = append(c.dirs, t.TempDir())
		c.addrs = append(c.addrs, addr)
		c.trans = append(c.trans, tr)
		c.layout = append(c.layout, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: addr, Suffrage: raft.Voter})
		c.stores = append(c.stores, openKV(t, t.TempDir()))
	}
	c.connect()
	c.reps = make([]*Replica, 3)
	for i := range 3 {
		c.openPK(i, true)
	}
	return c
}

func (c *pkCluster) openPK(i int, bootstrap bool) {
	c.t.Helper()
	cfg := c.config(i, bootstrap)
	cfg.Raft.SnapshotThreshold = 1 << 40 // snapshots only when the test asks
	cfg.Log = logstore.Options{SegmentBytes: 16 << 10}
	cfg.PK = pkConfig(c.t, c.stores[i], 5, nil)
	if c.pkMod != nil {
		c.pkMod(i, cfg.PK)
	}
	c.openWith(i, cfg)
}

// upsert writes like a client: to the leader, retrying the same (writer,
// seq) until acknowledged.
func (c *pkCluster) upsert(w *PKWrite, writer int64, seq int32) error {
	err := c.onLeader(func(ctx context.Context, r *Replica) error {
		_, _, err := r.Write(ctx, w, writer, seq)
		return err
	})
	if err != nil {
		return fmt.Errorf("writer %d seq %d: %w", writer, seq, err)
	}
	return nil
}

// kvBytes is the replica's whole KV state as its snapshot stream.
func kvBytes(t testing.TB, r *Replica) []byte {
	var b bytes.Buffer
	if err := r.cfg.PK.KV.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A follower whose disk was wiped (log, raft state and KV state) rejoins
// from the leader's snapshot — the leader no longer has the log from the
// start — then the log after it, and ends byte-identical to the others.
func TestPKWipedReplicaRejoinsFromSnapshot(t *testing.T) {
	c := newPKCluster(t)
	defer func() {
		c.closeAll()
		for _, st := range c.stores {
			st.Close()
		}
	}()
	seq := int32(0)
	writeN := func(n int) {
		for range n {
			id := int64(seq % 40)
			if err := c.upsert(&PKWrite{Rows: []kvstore.Row{row(id, int64(seq), strings.Repeat("p", 200))}}, 3, seq); err != nil {
				t.Fatal(err)
			}
			seq++
		}
	}
	writeN(300)
	lead := c.leader()
	follower := (lead + 1) % 3
	c.closeReplica(follower)
	writeN(100)
	// Snapshot every live replica and drop the log before it, so that the
	// follower can only catch up by InstallSnapshot.
	for i, r := range c.reps {
		if r == nil {
			continue
		}
		if err := r.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		if err := r.EnforceRetention(time.Nanosecond, math.MaxInt64); err != nil {
			t.Fatalf("retention on %d: %v", i, err)
		}
		if r.LogStartOffset() == 0 {
			t.Fatalf("replica %d still holds offset 0 after retention", i)
		}
	}
	// Wipe the follower's disk: its bucket dir and its KV keys.
	if err := c.stores[follower].Replica(5, c.reps[lead].cfg.PK.KV.Codec()).Drop(); err != nil {
		t.Fatal(err)
	}
	c.dirs[follower] = t.TempDir()
	_, c.trans[follower] = raft.NewInmemTransport(c.addrs[follower])
	c.connect()
	c.openPK(follower, false)
	writeN(50)
	waitFor(t, 20*time.Second, func() error {
		l := c.leader()
		if l < 0 {
			return errors.New("no leader") // for a moment, on a loaded machine
		}
		want := c.reps[l].fsm.HighWatermark()
		for i, r := range c.reps {
			if got := r.fsm.HighWatermark(); got != want {
				return fmt.Errorf("replica %d at %d, leader at %d", i, got, want)
			}
		}
		return nil
	})
	ref := kvBytes(t, c.reps[0])
	for i := 1; i < 3; i++ {
		if !bytes.Equal(kvBytes(t, c.reps[i]), ref) {
			t.Fatalf("replica %d KV state differs from replica 0", i)
		}
	}
	l, _ := c.waitLeader(t, -1)
	for id := int64(0); id < 40; id++ {
		if got := lookupRow(t, c.reps[l], id); got == "<nil>" {
			t.Fatalf("row %d missing", id)
		}
	}
}

// Retention takes a snapshot (for a PK replica: its whole KV state) only
// when a segment expired and the latest snapshot does not cover it.
func TestRetentionSnapshotsOnlyWhenSegmentsExpire(t *testing.T) {
	st := openKV(t, t.TempDir())
	defer st.Close()
	r := openSingle(t, t.TempDir(), func(c *Config) {
		c.PK = pkConfig(t, st, 1, nil)
		c.Log = logstore.Options{SegmentBytes: 4 << 10}
		c.Raft.SnapshotThreshold = 1 << 40
	})
	defer r.Close()
	for i := range 40 {
		write(t, r, &PKWrite{Rows: []kvstore.Row{row(int64(i), int64(i), strings.Repeat("x", 300))}}, 0, 0)
	}
	snaps := func() int {
		metas, err := r.snaps.List()
		if err != nil {
			t.Fatal(err)
		}
		return len(metas)
	}
	if err := r.EnforceRetention(time.Hour, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if n := snaps(); n != 0 {
		t.Fatalf("%d snapshots after a retention pass with nothing expired, want 0", n)
	}
	time.Sleep(5 * time.Millisecond)
	if err := r.EnforceRetention(time.Millisecond, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if n := snaps(); n != 1 || r.LogStartOffset() == 0 {
		t.Fatalf("after expiring segments: %d snapshots, log start %d; want 1 and > 0", n, r.LogStartOffset())
	}
	for id := int64(0); id < 40; id++ {
		if got := lookupRow(t, r, id); got == "<nil>" {
			t.Fatalf("row %d lost to retention", id)
		}
	}
}
