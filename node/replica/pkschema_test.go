package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
)

// pkSchemaV2 is pkSchema with a nullable column added (schema id 2).
func pkSchemaV2() *record.Schema {
	s := pkSchema()
	s.ID = 2
	s.Columns = append(s.Columns, record.Column{Name: "note", Type: record.Type{Kind: record.KindString}, Nullable: true})
	return s
}

// testVersions is a catalog that knows schema versions up to known.
func testVersions(t testing.TB, known *atomic.Int32) func(int32) (*PKVersion, error) {
	return func(id int32) (*PKVersion, error) {
		if id > known.Load() || id < 1 || id > 2 {
			return nil, fmt.Errorf("%w: schema %d", ErrSchemaUnknown, id)
		}
		s := pkSchema()
		if id == 2 {
			s = pkSchemaV2()
		}
		codec, err := kvstore.NewCodec(s, nil)
		if err != nil {
			t.Error(err)
			return nil, err
		}
		m, err := kvstore.NewMerger(s, nil)
		if err != nil {
			t.Error(err)
			return nil, err
		}
		return &PKVersion{Schema: s, Codec: codec, Merger: m}, nil
	}
}

// lookupV2 looks one key up and renders the row with the v2 codec.
func lookupV2(t testing.TB, r *Replica, id int64) string {
	t.Helper()
	c, err := kvstore.NewCodec(pkSchemaV2(), nil)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := c.AppendKey(nil, row(id, 0, ""))
	vals, err := r.Lookup(context.Background(), [][]byte{key}, 0)
	if err != nil {
		t.Fatalf("Lookup(%d): %v", id, err)
	}
	if vals[0] == nil {
		return "<nil>"
	}
	rw, err := c.DecodeRow(nil, vals[0])
	if err != nil {
		t.Fatal(err)
	}
	return fmtRow(rw)
}

// TestPKSchemaVersions: a column added to a PK table while a follower's
// catalog lags. Writes of the new version merge with the rows of the old
// one; the lagging follower applies nothing of the new version until its
// catalog has it (and closes while it waits), then catches up; every
// replica ends with the same KV state and the same changelog, each batch
// tagged with the version it was merged with.
func TestPKSchemaVersions(t *testing.T) {
	known := make([]*atomic.Int32, 3)
	for i := range known {
		known[i] = &atomic.Int32{}
		known[i].Store(1)
	}
	c := newPKClusterWrapped(t, nil, func(i int, pk *PKConfig) { pk.Versions = testVersions(t, known[i]) })
	defer func() {
		c.closeAll()
		for _, st := range c.stores {
			st.Close()
		}
	}()
	if err := c.upsert(&PKWrite{Rows: []kvstore.Row{row(1, 10, "a"), row(2, 20, "b")}, SchemaID: 1}, 1, 0); err != nil {
		t.Fatal(err)
	}
	lead, _ := c.waitLeader(t, -1)
	lag := (lead + 1) % 3
	for i := range 3 {
		if i != lag {
			known[i].Store(2)
		}
	}
	v2 := func(id, total int64, name, note string) kvstore.Row {
		r := append(row(id, total, name), kvstore.Str(note))
		if note == "" {
			r[3] = kvstore.Null()
		}
		return r
	}
	// A whole row of v2, a partial update of the new column only, and a
	// v1 row (a node whose catalog is behind): NULL in the new column.
	if err := c.upsert(&PKWrite{Rows: []kvstore.Row{v2(3, 30, "c", "n3")}, SchemaID: 2}, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.upsert(&PKWrite{Rows: []kvstore.Row{v2(1, 0, "", "n1")}, TargetCols: []int{0, 3}, SchemaID: 2}, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.upsert(&PKWrite{Rows: []kvstore.Row{row(3, 31, "c")}, SchemaID: 1}, 1, 3); err != nil {
		t.Fatal(err)
	}
	lead, _ = c.waitLeader(t, -1)
	for id, want := range map[int64]string{1: "1,10,a,n1", 2: "2,20,b,null", 3: "3,31,c,null"} {
		if got := lookupV2(t, c.reps[lead], id); got != want {
			t.Errorf("lookup %d on the leader = %s, want %s", id, got, want)
		}
	}
	// The lagging follower stopped at the first v2 entry.
	time.Sleep(300 * time.Millisecond)
	if hw, lhw := c.reps[lag].HighWatermark(), c.reps[lead].HighWatermark(); hw != 2 || lhw <= hw {
		t.Fatalf("lagging follower at %d (leader %d), want 2: it applied a changelog of a version its catalog lacks", hw, lhw)
	}
	if id := c.reps[lag].SchemaID(); id != 1 {
		t.Fatalf("lagging follower merges with schema %d", id)
	}
	// It closes while it waits (raft's shutdown waits for the FSM).
	closed := make(chan struct{})
	go func() { c.closeReplica(lag); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close hangs while the FSM waits for a schema version")
	}
	// Reopened, still without the version: it waits again; then the
	// catalog learns it and the replica catches up.
	_, c.trans[lag] = raft.NewInmemTransport(c.addrs[lag])
	c.connect()
	c.openPK(lag, false)
	time.Sleep(300 * time.Millisecond)
	known[lag].Store(2)
	want := changelogLines(t, c.reps[lead], true)
	waitFor(t, 20*time.Second, func() error {
		if hw, lhw := c.reps[lag].HighWatermark(), c.reps[lead].HighWatermark(); hw != lhw {
			return fmt.Errorf("lagging follower at %d, leader at %d", hw, lhw)
		}
		return nil
	})
	wantLog := []string{
		"0 v1 +I 1,10,a", "1 v1 +I 2,20,b",
		"2 v2 +I 3,30,c,n3",
		"3 v2 -U 1,10,a,null", "4 v2 +U 1,10,a,n1",
		"5 v2 -U 3,30,c,n3", "6 v2 +U 3,31,c,null",
	}
	if strings.Join(want, "\n") != strings.Join(wantLog, "\n") {
		t.Fatalf("leader's changelog:\n%s\nwant:\n%s", strings.Join(want, "\n"), strings.Join(wantLog, "\n"))
	}
	ref := kvBytes(t, c.reps[lead])
	for i := range 3 {
		if got := changelogLines(t, c.reps[i], true); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("replica %d changelog:\n%s", i, strings.Join(got, "\n"))
		}
		if !bytes.Equal(kvBytes(t, c.reps[i]), ref) {
			t.Errorf("replica %d KV state differs from the leader's", i)
		}
		if id := c.reps[i].SchemaID(); id != 2 {
			t.Errorf("replica %d merges with schema %d after applying v2 changelogs", i, id)
		}
	}
	// A write of a version no catalog knows is refused, nothing stored.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err := c.reps[lead].Write(ctx, &PKWrite{Rows: []kvstore.Row{append(v2(4, 1, "d", "x"), kvstore.Null())}, SchemaID: 3}, 1, 4)
	if !errors.Is(err, ErrSchemaUnknown) {
		t.Fatalf("write of schema 3: %v, want ErrSchemaUnknown", err)
	}
	if got := lookupV2(t, c.reps[lead], 4); got != "<nil>" {
		t.Fatalf("refused write stored row 4: %s", got)
	}
}
