package raftmeta

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fluss-node/fluss-node/proto/metapb"
)

// TestAssignmentEpoch: a bucket is created at epoch 0 (whatever the command
// says), a SetAssignments that changes its set of replicas bumps the epoch,
// a reorder of the same replicas keeps it, and snapshots carry it.
func TestAssignmentEpoch(t *testing.T) {
	a := newApplier(t)
	a.apply(cCreateDB("db", false))
	cmd := cCreateTable(t, TableSpec{Database: "db", Name: "t", BucketCount: 2, Columns: testSpec("db", "t").Columns}, false)
	cmd.GetCreateTable().Assignments[0].Epoch = 9 // ignored
	if r := a.apply(cmd); r.Err != nil {
		t.Fatal(r.Err)
	}
	b0 := BucketID{TableID: r0(t, a.f), Bucket: 0}
	epochOf := func(b BucketID) (int64, []NodeID) {
		t.Helper()
		for _, x := range a.f.Assignments() {
			if x.BucketID == b {
				return x.Epoch, x.Replicas
			}
		}
		t.Fatalf("no assignment for %v", b)
		return 0, nil
	}
	if e, _ := epochOf(b0); e != 0 {
		t.Fatalf("created bucket epoch %d, want 0", e)
	}
	steps := []struct {
		name string
		reps []NodeID
		want int64
	}{
		{"replace a replica", []NodeID{1, 4}, 1},
		{"same set", []NodeID{1, 4}, 1},
		{"reorder", []NodeID{4, 1}, 1},
		{"grow", []NodeID{4, 1, 2}, 2},
		{"shrink", []NodeID{4, 2}, 3},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			set := cSetAssign(Assignment{BucketID: b0, Replicas: s.reps, Epoch: 77})
			if r := a.apply(set); r.Err != nil {
				t.Fatal(r.Err)
			}
			e, reps := epochOf(b0)
			if e != s.want || !slices.Equal(reps, s.reps) {
				t.Fatalf("epoch %d replicas %v, want %d %v", e, reps, s.want, s.reps)
			}
		})
	}
	if e, _ := epochOf(BucketID{TableID: b0.TableID, Bucket: 1}); e != 0 {
		t.Fatalf("untouched bucket epoch %d, want 0", e)
	}
	// A failed command changes no epoch.
	before, _ := epochOf(b0)
	if r := a.apply(cSetAssign(Assignment{BucketID: b0, Replicas: []NodeID{5}}, Assignment{BucketID: BucketID{TableID: b0.TableID, Bucket: 9}, Replicas: []NodeID{5}})); r.Err == nil {
		t.Fatal("out-of-range bucket accepted")
	}
	if e, _ := epochOf(b0); e != before {
		t.Fatalf("failed command moved epoch %d -> %d", before, e)
	}
	for _, x := range throughSnapshot(t, a.f).Assignments() {
		if x.BucketID == b0 && x.Epoch != before {
			t.Fatalf("restored epoch %d, want %d", x.Epoch, before)
		}
	}
}

// throughSnapshot is a new FSM restored from a snapshot of f.
func throughSnapshot(t *testing.T, f *FSM) *FSM {
	t.Helper()
	snap, err := f.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	g := NewFSM()
	if err := g.Restore(nopCloser{bytes.NewReader(snap)}); err != nil {
		t.Fatal(err)
	}
	return g
}

func r0(t *testing.T, f *FSM) int64 {
	t.Helper()
	tb, err := f.TableByName("db", "t")
	if err != nil {
		t.Fatal(err)
	}
	return tb.ID
}

// bucketsOf returns assignments of buckets 0, 1, ... of table with the given
// replica sets, bucket i at epoch i.
func bucketsOf(table int64, sets ...[]NodeID) []Assignment {
	out := make([]Assignment, len(sets))
	for i, s := range sets {
		out[i] = Assignment{BucketID: BucketID{TableID: table, Bucket: int32(i)}, Replicas: s, Epoch: int64(i)}
	}
	return out
}

// downOf reports the nodes ids as down.
func downOf(ids ...NodeID) func(NodeID) bool {
	return func(id NodeID) bool { return slices.Contains(ids, id) }
}

func TestReplaceDown(t *testing.T) {
	as := func(sets ...[]NodeID) []Assignment { return bucketsOf(1, sets...) }
	cases := []struct {
		name    string
		in      []Assignment
		down    func(NodeID) bool
		targets []NodeID
		want    string
	}{
		{"nothing down", as([]NodeID{1, 2, 3}), downOf(), []NodeID{1, 2, 3, 4}, "[]"},
		{"one dead, one spare", as([]NodeID{1, 2, 3}, []NodeID{3, 1, 2}, []NodeID{2, 1}), downOf(3), []NodeID{1, 2, 4},
			"[{0 [1 2 4] 0} {1 [4 1 2] 1}]"},
		{"spread over two spares", as([]NodeID{1, 2, 3}, []NodeID{3, 1, 2}, []NodeID{2, 3, 1}, []NodeID{3, 2, 1}), downOf(3), []NodeID{5, 4, 1, 2},
			"[{0 [1 2 4] 0} {1 [5 1 2] 1} {2 [2 4 1] 2} {3 [5 2 1] 3}]"},
		{"no spare: stays", as([]NodeID{1, 2, 3}), downOf(3), []NodeID{1, 2}, "[]"},
		{"majority down: stays", as([]NodeID{1, 2, 3}, []NodeID{2, 3}), downOf(2, 3), []NodeID{1, 4, 5}, "[]"},
		{"single replica down: stays", as([]NodeID{3}), downOf(3), []NodeID{1, 4}, "[]"},
		{"down target never chosen", as([]NodeID{1, 2, 3}), downOf(3, 4), []NodeID{4, 5}, "[{0 [1 2 5] 0}]"},
		{"two down of five", as([]NodeID{1, 2, 3, 4, 5}), downOf(4, 5), []NodeID{6, 7}, "[{0 [1 2 3 6 7] 0}]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in [][]NodeID
			for _, a := range c.in {
				in = append(in, slices.Clone(a.Replicas))
			}
			got := ReplaceDown(c.in, c.down, func(Assignment) bool { return false }, c.targets)
			if s := changesString(t, got); s != c.want {
				t.Fatalf("got %s, want %s", s, c.want)
			}
			for i := range in {
				if !slices.Equal(in[i], c.in[i].Replicas) {
					t.Fatal("input modified")
				}
			}
		})
	}
}

// TestReplaceDownRecoveredGroup: a bucket whose replicas are mostly down
// is changed only when its group has a leader anyway (recovery made the
// survivor its only voter), and led is asked only for such buckets.
func TestReplaceDownRecoveredGroup(t *testing.T) {
	in := bucketsOf(1, []NodeID{2, 1, 3}, []NodeID{2, 3, 1}, []NodeID{1, 2, 4}, []NodeID{2, 3})
	var asked []int32
	led := func(a Assignment) bool {
		asked = append(asked, a.Bucket)
		return a.Bucket != 0
	}
	got := ReplaceDown(in, downOf(2, 3), led, []NodeID{1, 4, 5})
	// Bucket 0: no leader, stays. Bucket 1: led, both down replicas
	// replaced. Bucket 2: a majority is up, replaced without asking.
	// Bucket 3: every replica down, stays without asking.
	if s := changesString(t, got); s != "[{1 [5 4 1] 1} {2 [1 5 4] 2}]" {
		t.Fatalf("got %s", s)
	}
	if !slices.Equal(asked, []int32{0, 1}) {
		t.Fatalf("led asked for buckets %v, want [0 1]", asked)
	}
}

// changesString formats changed assignments as "[{bucket replicas epoch}
// ...]", failing t if one holds a node twice.
func changesString(t *testing.T, got []Assignment) string {
	t.Helper()
	var parts []string
	for _, a := range got {
		parts = append(parts, fmt.Sprintf("{%d %v %d}", a.Bucket, a.Replicas, a.Epoch))
		for i, r := range a.Replicas {
			if slices.Contains(a.Replicas[:i], r) {
				t.Fatalf("bucket %d has node %d twice: %v", a.Bucket, r, a.Replicas)
			}
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestMoveOff(t *testing.T) {
	as := func(sets ...[]NodeID) []Assignment { return bucketsOf(1, sets...) }
	cases := []struct {
		name          string
		in            []Assignment
		leaving, down func(NodeID) bool
		targets       []NodeID
		want, stuck   string
	}{
		{"nothing leaving", as([]NodeID{1, 2, 3}), downOf(), downOf(), []NodeID{1, 2, 3, 4}, "[]", "[]"},
		{"in place, to the least loaded", as([]NodeID{1, 2, 3}, []NodeID{3, 1, 2}, []NodeID{1, 2}), downOf(3), downOf(), []NodeID{1, 2, 4, 5},
			"[{0 [1 2 4] 0} {1 [5 1 2] 1}]", "[]"},
		{"a single replica moves too", as([]NodeID{3}), downOf(3), downOf(), []NodeID{1}, "[{0 [1] 0}]", "[]"},
		{"one replica per bucket and call", as([]NodeID{2, 3, 1}), downOf(2, 3), downOf(), []NodeID{1, 4, 5}, "[{0 [4 3 1] 0}]", "[]"},
		{"no free target", as([]NodeID{1, 2, 3}, []NodeID{3, 4}), downOf(3), downOf(), []NodeID{1, 2}, "[{1 [1 4] 1}]", "[0]"},
		{"down target never chosen", as([]NodeID{1, 3}), downOf(3), downOf(2), []NodeID{2, 4}, "[{0 [1 4] 0}]", "[]"},
		{"majority down: stays", as([]NodeID{1, 2, 3}), downOf(3), downOf(1, 2), []NodeID{4}, "[]", "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, stuck := MoveOff(c.in, c.leaving, c.down, c.targets)
			if s := changesString(t, got); s != c.want {
				t.Fatalf("got %s, want %s", s, c.want)
			}
			var ids []int32
			for _, b := range stuck {
				ids = append(ids, b.Bucket)
			}
			if s := fmt.Sprint(ids); s != c.stuck {
				t.Fatalf("stuck %s, want %s", s, c.stuck)
			}
		})
	}
}

// checkChanges runs change, which must leave in as it was, and compares
// what it returns ({table bucket replicas epoch} each) with want.
func checkChanges(t *testing.T, in []Assignment, change func() []Assignment, want string) {
	t.Helper()
	var before [][]NodeID
	for _, a := range in {
		before = append(before, slices.Clone(a.Replicas))
	}
	var parts []string
	for _, a := range change() {
		parts = append(parts, fmt.Sprintf("{%d %d %v %d}", a.TableID, a.Bucket, a.Replicas, a.Epoch))
	}
	if s := "[" + strings.Join(parts, " ") + "]"; s != want {
		t.Fatalf("got %s, want %s", s, want)
	}
	for i := range before {
		if !slices.Equal(before[i], in[i].Replicas) {
			t.Fatal("input modified")
		}
	}
}

func TestShrink(t *testing.T) {
	// Table 1 wants 1 replica, table 2 wants 2, table 3 has no explicit factor.
	want := func(table int64) int { return map[int64]int{1: 1, 2: 2}[table] }
	mk := bucketsOf
	cases := []struct {
		name string
		in   []Assignment
		down func(NodeID) bool
		want string
	}{
		{"at the factor", mk(2, []NodeID{1, 2}), downOf(), "[]"},
		{"below the factor", mk(2, []NodeID{1}), downOf(), "[]"},
		{"no explicit factor", mk(3, []NodeID{1, 2, 3}), downOf(), "[]"},
		{"the last goes, the leader stays", mk(1, []NodeID{1, 2, 3}), downOf(), "[{1 0 [1] 0}]"},
		{"a down replica first", mk(2, []NodeID{1, 2, 3}), downOf(2), "[{2 0 [1 3] 0}]"},
		{"the leader too when it is down", mk(1, []NodeID{1, 2}), downOf(1), "[{1 0 [2] 0}]"},
		{"the most loaded node first", append(mk(2, []NodeID{1, 2, 3}), mk(3, []NodeID{2})...), downOf(), "[{2 0 [1 3] 0}]"},
		{"load counts the changes made", mk(2, []NodeID{1, 2, 3}, []NodeID{4, 2, 3}), downOf(), "[{2 0 [1 2] 0} {2 1 [4 3] 1}]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkChanges(t, c.in, func() []Assignment { return Shrink(c.in, want, c.down) }, c.want)
		})
	}
}

func TestGrow(t *testing.T) {
	// Table 1 wants 3 replicas, table 2 wants 1.
	want := func(table int64) int { return map[int64]int{1: 3, 2: 1}[table] }
	mk := bucketsOf
	cases := []struct {
		name    string
		in      []Assignment
		down    func(NodeID) bool
		targets []NodeID
		want    string
	}{
		{"at the factor", mk(1, []NodeID{1, 2, 3}), downOf(), []NodeID{1, 2, 3, 4}, "[]"},
		{"placed on one node, two joined", mk(1, []NodeID{1}, []NodeID{1}, []NodeID{1}), downOf(), []NodeID{3, 2, 1},
			"[{1 0 [1 2 3] 0} {1 1 [1 2 3] 1} {1 2 [1 2 3] 2}]"},
		{"least loaded first, leader kept", mk(1, []NodeID{2}, []NodeID{1, 2}), downOf(), []NodeID{1, 2, 3, 4},
			"[{1 0 [2 3 4] 0} {1 1 [1 2 3] 1}]"},
		{"only as many as there are targets", mk(1, []NodeID{1}), downOf(), []NodeID{1, 2}, "[{1 0 [1 2] 0}]"},
		{"no free target", mk(1, []NodeID{1, 2}), downOf(), []NodeID{1, 2}, "[]"},
		{"a replica down: left to ReplaceDown", mk(1, []NodeID{1, 2}), downOf(2), []NodeID{1, 2, 3}, "[]"},
		{"down target never chosen", mk(1, []NodeID{1}), downOf(2), []NodeID{2, 3}, "[{1 0 [1 3] 0}]"},
		{"factor 1 never grows", mk(2, []NodeID{1}), downOf(), []NodeID{1, 2, 3}, "[]"},
		{"unknown table (factor 0)", mk(9, []NodeID{1}), downOf(), []NodeID{1, 2, 3}, "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkChanges(t, c.in, func() []Assignment { return Grow(c.in, want, c.down, c.targets) }, c.want)
		})
	}
}

func TestRebalance(t *testing.T) {
	mk := func(sets ...[]NodeID) []Assignment {
		out := make([]Assignment, len(sets))
		for i, s := range sets {
			out[i] = Assignment{BucketID: BucketID{TableID: 1, Bucket: int32(i)}, Replicas: s}
		}
		return out
	}
	// apply merges the changes into as.
	apply := func(as, ch []Assignment) []Assignment {
		out := slices.Clone(as)
		for _, c := range ch {
			for i := range out {
				if out[i].BucketID == c.BucketID {
					out[i] = c
				}
			}
		}
		return out
	}
	spread := func(as []Assignment, nodes []NodeID) (reps, leads map[NodeID]int) {
		reps, leads = map[NodeID]int{}, map[NodeID]int{}
		for _, n := range nodes {
			reps[n], leads[n] = 0, 0
		}
		for _, a := range as {
			leads[a.Replicas[0]]++
			for _, r := range a.Replicas {
				reps[r]++
			}
		}
		return reps, leads
	}
	even := func(m map[NodeID]int) bool {
		lo, hi := 1<<30, -1
		for _, v := range m {
			lo, hi = min(lo, v), max(hi, v)
		}
		return hi-lo <= 1
	}
	threeNodes, err := Placement([]Node{{ID: 1, State: NodeActive}, {ID: 2, State: NodeActive}, {ID: 3, State: NodeActive}}, 12, 3)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		in    []Assignment
		nodes []NodeID
		runs  int  // Rebalance runs until stable (each moves one replica per bucket at most)
		moves bool // whether anything moves
		even  bool // replicas and leaders even among nodes in the end
	}{
		{"balanced stays", mk(threeNodes...), []NodeID{1, 2, 3}, 1, false, true},
		{"a fourth node joins", mk(threeNodes...), []NodeID{1, 2, 3, 4}, 3, true, true},
		{"two new nodes", mk(threeNodes...), []NodeID{4, 5, 1, 2, 3}, 4, true, true},
		{"rf 2 moves", mk([]NodeID{1, 2}, []NodeID{2, 1}, []NodeID{1, 2}), []NodeID{1, 2, 3}, 2, true, true},
		{"rf 1 moves", mk([]NodeID{1}, []NodeID{1}, []NodeID{1}, []NodeID{1}), []NodeID{1, 2}, 1, true, true},
		{"single node", mk([]NodeID{1}), []NodeID{1}, 1, false, true},
		{"leaders only", mk([]NodeID{1, 2, 3}, []NodeID{1, 3, 2}, []NodeID{1, 2, 3}), []NodeID{1, 2, 3}, 1, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			as := c.in
			moved := false
			for run := range c.runs + 2 {
				ch := Rebalance(as, c.nodes)
				if run == 0 {
					moved = len(ch) > 0
				}
				for _, a := range ch {
					var old Assignment
					for _, o := range as {
						if o.BucketID == a.BucketID {
							old = o
						}
					}
					gone := 0
					for _, r := range old.Replicas {
						if !slices.Contains(a.Replicas, r) {
							gone++
						}
					}
					if gone > 1 {
						t.Fatalf("bucket %d: %v -> %v moves %d replicas", a.Bucket, old.Replicas, a.Replicas, gone)
					}
					for i, r := range a.Replicas {
						if slices.Contains(a.Replicas[:i], r) {
							t.Fatalf("bucket %d has node %d twice: %v", a.Bucket, r, a.Replicas)
						}
					}
				}
				as = apply(as, ch)
			}
			if moved != c.moves {
				t.Fatalf("moved = %v, want %v", moved, c.moves)
			}
			if again := Rebalance(as, c.nodes); len(again) != 0 {
				t.Fatalf("not stable after %d runs: %+v", c.runs+2, again)
			}
			reps, leads := spread(as, c.nodes)
			if c.even && (!even(reps) || !even(leads)) {
				t.Fatalf("replicas %v leaders %v are not even", reps, leads)
			}
		})
	}
}

func TestSpreadLeaders(t *testing.T) {
	mk := bucketsOf
	cases := []struct {
		name  string
		in    []Assignment
		nodes []NodeID
		want  string
	}{
		{"grown on one node: leaders spread, replicas kept", mk(1, []NodeID{1, 2, 3}, []NodeID{1, 2, 3}, []NodeID{1, 3, 2}), []NodeID{3, 2, 1},
			"[{1 0 [2 1 3] 0} {1 1 [3 2 1] 1}]"},
		{"already spread", mk(1, []NodeID{1, 2, 3}, []NodeID{2, 3, 1}, []NodeID{3, 1, 2}), []NodeID{1, 2, 3}, "[]"},
		{"one apart is even", mk(1, []NodeID{1, 2}, []NodeID{1, 2}, []NodeID{2, 1}), []NodeID{1, 2}, "[]"},
		{"factor 1 cannot move", mk(1, []NodeID{1}, []NodeID{1}, []NodeID{1}), []NodeID{1, 2, 3}, "[]"},
		{"one node", mk(1, []NodeID{1, 2}, []NodeID{1, 2}), []NodeID{1}, "[]"},
		{"nodes outside the set are not chosen", mk(1, []NodeID{1, 4}, []NodeID{1, 4}, []NodeID{1, 4}, []NodeID{1, 2}), []NodeID{1, 2},
			"[{1 3 [2 1] 3}]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in [][]NodeID
			for _, a := range c.in {
				in = append(in, slices.Clone(a.Replicas))
			}
			got := SpreadLeaders(c.in, c.nodes)
			var parts []string
			for _, a := range got {
				parts = append(parts, fmt.Sprintf("{%d %d %v %d}", a.TableID, a.Bucket, a.Replicas, a.Epoch))
				if !sameSet(a.Replicas, c.in[a.Bucket].Replicas) {
					t.Fatalf("bucket %d replicas %v changed from %v", a.Bucket, a.Replicas, c.in[a.Bucket].Replicas)
				}
			}
			if s := "[" + strings.Join(parts, " ") + "]"; s != c.want {
				t.Fatalf("got %s, want %s", s, c.want)
			}
			for i := range in {
				if !slices.Equal(in[i], c.in[i].Replicas) {
					t.Fatal("input modified")
				}
			}
		})
	}
}

func sameSet(a, b []NodeID) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestRestoreBucket: RestoreBucket gives a log-table bucket a new replica
// set at the next generation, epoch 0 and the given start offset; a later
// SetAssignments keeps generation and start offset; snapshots carry them;
// bad commands change nothing.
func TestRestoreBucket(t *testing.T) {
	a := newApplier(t)
	a.apply(cCreateDB("db", false))
	if r := a.apply(cCreateTable(t, TableSpec{Database: "db", Name: "t", BucketCount: 2, Columns: testSpec("db", "t").Columns}, false)); r.Err != nil {
		t.Fatal(r.Err)
	}
	tid := r0(t, a.f)
	b0 := BucketID{TableID: tid, Bucket: 0}
	of := func(b BucketID) Assignment {
		t.Helper()
		for _, x := range a.f.Assignments() {
			if x.BucketID == b {
				return x
			}
		}
		t.Fatalf("no assignment for %v", b)
		return Assignment{}
	}
	restore := func(b BucketID, reps []NodeID, start int64) *metapb.Command {
		rs := make([]int32, len(reps))
		for i, r := range reps {
			rs[i] = int32(r)
		}
		return &metapb.Command{Cmd: &metapb.Command_RestoreBucket{RestoreBucket: &metapb.RestoreBucket{
			TableId: b.TableID, PartitionId: b.PartitionID, Bucket: b.Bucket, Replicas: rs, StartOffset: start}}}
	}
	if r := a.apply(cSetAssign(Assignment{BucketID: b0, Replicas: []NodeID{1, 4}})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := of(b0); got.Epoch != 1 || got.Generation != 0 {
		t.Fatalf("before: epoch %d generation %d, want 1 0", got.Epoch, got.Generation)
	}
	if r := a.apply(restore(b0, []NodeID{5, 6}, 1234)); r.Err != nil {
		t.Fatal(r.Err)
	}
	got := of(b0)
	if got.Epoch != 0 || got.Generation != 1 || got.StartOffset != 1234 || !slices.Equal(got.Replicas, []NodeID{5, 6}) {
		t.Fatalf("restored: %+v, want replicas [5 6] epoch 0 generation 1 start 1234", got)
	}
	if other := of(BucketID{TableID: tid, Bucket: 1}); other.Generation != 0 || other.StartOffset != 0 {
		t.Fatalf("untouched bucket: %+v", other)
	}
	// A move afterwards is a change of the new group's set.
	if r := a.apply(cSetAssign(Assignment{BucketID: b0, Replicas: []NodeID{5, 7}, Generation: 9, StartOffset: 9})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := of(b0); got.Epoch != 1 || got.Generation != 1 || got.StartOffset != 1234 {
		t.Fatalf("moved after restore: %+v, want epoch 1 generation 1 start 1234", got)
	}
	for _, bad := range []struct {
		name string
		cmd  *metapb.Command
		want error
	}{
		{"negative start", restore(b0, []NodeID{5}, -1), ErrInvalid},
		{"no replicas", restore(b0, nil, 0), ErrInvalid},
		{"replica twice", restore(b0, []NodeID{5, 5}, 0), ErrInvalid},
		{"no such bucket", restore(BucketID{TableID: tid, Bucket: 2}, []NodeID{5}, 0), ErrInvalid},
		{"no such table", restore(BucketID{TableID: tid + 100, Bucket: 0}, []NodeID{5}, 0), ErrTableNotFound},
		{"no such partition", restore(BucketID{TableID: tid, PartitionID: 77, Bucket: 0}, []NodeID{5}, 0), ErrPartitionNotFound},
	} {
		before := of(b0)
		if r := a.apply(bad.cmd); !errors.Is(r.Err, bad.want) {
			t.Fatalf("%s: err %v, want %v", bad.name, r.Err, bad.want)
		}
		if after := of(b0); !reflect.DeepEqual(before, after) {
			t.Fatalf("%s changed the assignment: %+v -> %+v", bad.name, before, after)
		}
	}
	for _, x := range throughSnapshot(t, a.f).Assignments() {
		if x.BucketID == b0 && (x.Generation != 1 || x.StartOffset != 1234) {
			t.Fatalf("from a snapshot: %+v, want generation 1 start 1234", x)
		}
	}
}

// TestFenceNodes: fenced ids accumulate sorted and unique, a repeat is no
// change (the watch does not fire), bad ids change nothing, and the list
// survives a snapshot.
func TestFenceNodes(t *testing.T) {
	a := newApplier(t)
	fence := func(ids ...int32) *ApplyResult {
		return a.apply(&metapb.Command{Cmd: &metapb.Command_FenceNodes{FenceNodes: &metapb.FenceNodes{Ids: ids}}})
	}
	if got := a.f.FencedNodes(); got != nil {
		t.Fatalf("a new catalog fences %v", got)
	}
	if r := fence(3, 2); r.Err != nil {
		t.Fatal(r.Err)
	}
	w := a.f.Watch()
	if r := fence(2); r.Err != nil {
		t.Fatal(r.Err)
	}
	select {
	case <-w:
		t.Fatal("fencing a fenced node again changed the catalog")
	default:
	}
	for _, bad := range [][]int32{nil, {0}, {5, -1}} {
		if r := fence(bad...); !errors.Is(r.Err, ErrInvalid) {
			t.Fatalf("fence %v: %v, want ErrInvalid", bad, r.Err)
		}
	}
	if r := fence(7, 3); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, f := range []*FSM{a.f, throughSnapshot(t, a.f)} {
		if got := fmt.Sprint(f.FencedNodes()); got != "[2 3 7]" {
			t.Fatalf("fenced %s, want [2 3 7]", got)
		}
	}
}
