package replica

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
)

func lostSet(ids ...raft.ServerID) func(raft.ServerID) bool {
	return func(id raft.ServerID) bool { return slices.Contains(ids, id) }
}

// TestForceSoleVoterRecoversAGroupThatLostTwoOfThree: a bucket of three
// replicas loses two for good; the survivor, forced, leads alone with
// every entry it held, takes writes, and a second run finds nothing to do.
func TestForceSoleVoterRecoversAGroupThatLostTwoOfThree(t *testing.T) {
	c := newTestCluster(t, 3)
	defer c.closeAll()
	const acked = 20
	for s := range int32(acked) {
		if _, err := c.append([][]byte{makeBatch(2, fmt.Sprintf("row %d", s))}, 7, s); err != nil {
			t.Fatal(err)
		}
	}
	// Every replica holds every acknowledged entry before the loss, so
	// that the survivor's log is the whole of it.
	waitFor(t, 10*time.Second, func() error {
		for i, r := range c.reps {
			if got := len(fetchAll(t, r)); got != acked {
				return fmt.Errorf("replica %d has %d batches", i, got)
			}
		}
		return nil
	})
	before := fetchAll(t, c.reps[0])
	c.closeAll()

	lost := lostSet("n1", "n2")
	dry, err := ForceSoleVoter(c.dirs[0], "n0", Recovery{Lost: lost, DryRun: true, Logger: testLogger(t)})
	if err != nil || dry.Outcome != Forced || len(dry.Voters) != 3 || !slices.Equal(dry.Survivors, []raft.ServerID{"n0"}) {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	res, err := ForceSoleVoter(c.dirs[0], "n0", Recovery{Lost: lost, Logger: testLogger(t)})
	if err != nil || res.Outcome != Forced || res.Index != dry.Index || res.Term != dry.Term {
		t.Fatalf("force: %+v, %v (dry run said %+v)", res, err, dry)
	}

	c.restart(0) // n1 and n2 stay closed: lost
	waitFor(t, 30*time.Second, func() error {
		if c.leader() != 0 {
			return errors.New("replica 0 does not lead")
		}
		return nil
	})
	r := c.reps[0]
	f := r.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if s := f.Configuration().Servers; len(s) != 1 || s[0].ID != "n0" || s[0].Suffrage != raft.Voter {
		t.Fatalf("configuration after recovery: %+v", s)
	}
	if term := r.Raft().CurrentTerm(); term <= res.Term {
		t.Fatalf("leader's term %d, not above the forced entry's %d", term, res.Term)
	}
	if _, err := c.append([][]byte{makeBatch(1, "after")}, 7, acked); err != nil {
		t.Fatal(err)
	}
	got := fetchAll(t, r)
	if len(got) != acked+1 {
		t.Fatalf("%d batches after recovery and one write, want %d", len(got), acked+1)
	}
	for i, b := range before {
		if !bytes.Equal(got[i], b) {
			t.Fatalf("batch %d changed in recovery", i)
		}
	}
	if h, _, err := checkBatch(got[acked]); err != nil || h.WriterID != 7 || h.Seq != acked {
		t.Fatalf("the write after recovery: %+v, %v", h, err)
	}

	c.closeReplica(0)
	again, err := ForceSoleVoter(c.dirs[0], "n0", Recovery{Lost: lost, Logger: testLogger(t)})
	if err != nil || again.Outcome != ForceNotNeeded {
		t.Fatalf("second run: %+v, %v", again, err)
	}
}

// TestForceSoleVoterOutcomes: what each replica of a group decides, from
// its latest configuration, for the servers lost.
func TestForceSoleVoterOutcomes(t *testing.T) {
	voter := func(id raft.ServerID) raft.Server {
		return raft.Server{ID: id, Address: raft.ServerAddress(id), Suffrage: raft.Voter}
	}
	nonvoter := func(id raft.ServerID) raft.Server {
		return raft.Server{ID: id, Address: raft.ServerAddress(id), Suffrage: raft.Nonvoter}
	}
	three := []raft.Server{voter("a"), voter("b"), voter("c"), nonvoter("d")}
	five := []raft.Server{voter("a"), voter("b"), voter("c"), voter("e"), voter("f")}
	cases := []struct {
		name    string
		servers []raft.Server
		local   raft.ServerID
		lost    []raft.ServerID
		want    ForceOutcome
		pick    func([]raft.ServerID) raft.ServerID
	}{
		{"nothing lost", three, "a", nil, ForceNotNeeded, nil},
		{"one of three lost", three, "a", []raft.ServerID{"b"}, ForceNotNeeded, nil},
		{"two of three lost, the survivor", three, "a", []raft.ServerID{"b", "c"}, Forced, nil},
		{"two of three lost, a non-voter beside the survivor", three, "d", []raft.ServerID{"b", "c"}, SetAside, nil},
		{"every voter lost, a non-voter", three, "d", []raft.ServerID{"a", "b", "c"}, Forced, nil},
		{"three of five lost, two survive", five, "a", []raft.ServerID{"c", "e", "f"}, ForceAmbiguous, nil},
		{"two of five lost", five, "a", []raft.ServerID{"e", "f"}, ForceNotNeeded, nil},
		{"a copy the group does not list, its voters lost", three, "x", []raft.ServerID{"a", "b", "c"}, ForceNotMember, nil},
		{"a copy the group does not list, one voter survives", three, "x", []raft.ServerID{"b", "c"}, ForceNotMember, nil},
		{"three of five lost, two survive, this one picked", five, "a", []raft.ServerID{"c", "e", "f"}, Forced, func([]raft.ServerID) raft.ServerID { return "a" }},
		{"three of five lost, two survive, the other picked", five, "a", []raft.ServerID{"c", "e", "f"}, ForceNotChosen, func([]raft.ServerID) raft.ServerID { return "b" }},
		{"three of five lost, no pick for it", five, "a", []raft.ServerID{"c", "e", "f"}, ForceAmbiguous, func([]raft.ServerID) raft.ServerID { return "" }},
		{"three of five lost, a non-voter beside the picked one", append(slices.Clone(five), nonvoter("d")), "d", []raft.ServerID{"c", "e", "f"}, SetAside, func([]raft.ServerID) raft.ServerID { return "a" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lg, err := openLog(filepath.Join(dir, "log"), logstore.Options{}, nil, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			conf := raft.Configuration{Servers: tc.servers}
			if err := lg.StoreLog(&raft.Log{Index: 1, Term: 3, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(conf)}); err != nil {
				t.Fatal(err)
			}
			if err := lg.StoreLog(&raft.Log{Index: 2, Term: 4, Type: raft.LogNoop}); err != nil {
				t.Fatal(err)
			}
			if err := lg.SetUint64(keyCurrentTerm, 6); err != nil {
				t.Fatal(err)
			}
			lg.Close()

			res, err := ForceSoleVoter(dir, tc.local, Recovery{Lost: lostSet(tc.lost...), Pick: tc.pick, Logger: testLogger(t)})
			if err != nil || res.Outcome != tc.want {
				t.Fatalf("got %v (%+v), %v; want %v", res.Outcome, res, err, tc.want)
			}

			lg, err = openLog(filepath.Join(dir, "log"), logstore.Options{}, nil, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer lg.Close()
			last, _ := lg.LastIndex()
			term, _ := lg.GetUint64(keyCurrentTerm)
			if tc.want != Forced {
				if last != 2 || term != 6 {
					t.Fatalf("%v changed the log: last index %d, term %d", tc.want, last, term)
				}
				return
			}
			var e raft.Log
			if err := lg.GetLog(3, &e); err != nil {
				t.Fatal(err)
			}
			got := raft.DecodeConfiguration(e.Data)
			if last != 3 || e.Term != 7 || term != 7 || e.Type != raft.LogConfiguration ||
				len(got.Servers) != 1 || got.Servers[0].ID != tc.local || got.Servers[0].Suffrage != raft.Voter {
				t.Fatalf("after forcing: last %d, entry %+v, configuration %+v, current term %d", last, e, got, term)
			}
		})
	}
}

// TestForceSoleVoterWithoutState: a directory without raft state is left
// alone.
func TestForceSoleVoterWithoutState(t *testing.T) {
	res, err := ForceSoleVoter(t.TempDir(), "a", Recovery{Lost: lostSet("b"), Logger: testLogger(t)})
	if err != nil || res.Outcome != ForceNoState {
		t.Fatalf("got %+v, %v", res, err)
	}
}

// TestForceSoleVoterPicksTheMostUpToDateSurvivor: a bucket of five
// replicas loses three; of the two survivors one fell behind before the
// loss. Picked by position, the one ahead is forced and keeps every entry;
// the other, left as it was, catches up as its follower.
func TestForceSoleVoterPicksTheMostUpToDateSurvivor(t *testing.T) {
	c := newTestCluster(t, 5)
	defer c.closeAll()
	seq := int32(0)
	write := func(n int) {
		for range n {
			if _, err := c.append([][]byte{makeBatch(1, fmt.Sprintf("row %d", seq))}, 3, seq); err != nil {
				t.Fatal(err)
			}
			seq++
		}
	}
	write(10)
	waitFor(t, 10*time.Second, func() error {
		if got := len(fetchAll(t, c.reps[1])); got != 10 {
			return fmt.Errorf("replica 1 has %d batches", got)
		}
		return nil
	})
	c.closeReplica(1) // falls behind
	write(5)
	waitFor(t, 10*time.Second, func() error {
		if got := len(fetchAll(t, c.reps[0])); got != 15 {
			return fmt.Errorf("replica 0 has %d batches", got)
		}
		return nil
	})
	ahead := fetchAll(t, c.reps[0])
	c.closeAll()

	lost := lostSet("n2", "n3", "n4")
	pos := map[raft.ServerID]ForceResult{}
	for i, id := range []raft.ServerID{"n0", "n1"} {
		res, err := ForceSoleVoter(c.dirs[i], id, Recovery{Lost: lost, DryRun: true, Logger: testLogger(t)})
		if err != nil || res.Outcome != ForceAmbiguous {
			t.Fatalf("%s without a pick: %+v, %v", id, res, err)
		}
		pos[id] = res
	}
	pick := func(survivors []raft.ServerID) raft.ServerID {
		best := survivors[0]
		for _, s := range survivors[1:] {
			a, b := pos[s], pos[best]
			if a.LastTerm > b.LastTerm || a.LastTerm == b.LastTerm && a.LastIndex > b.LastIndex {
				best = s
			}
		}
		return best
	}
	if w := pick([]raft.ServerID{"n1", "n0"}); w != "n0" {
		t.Fatalf("picked %s, positions %+v", w, pos)
	}
	if res, err := ForceSoleVoter(c.dirs[1], "n1", Recovery{Lost: lost, Pick: pick, Logger: testLogger(t)}); err != nil || res.Outcome != ForceNotChosen {
		t.Fatalf("n1: %+v, %v", res, err)
	}
	if res, err := ForceSoleVoter(c.dirs[0], "n0", Recovery{Lost: lost, Pick: pick, Logger: testLogger(t)}); err != nil || res.Outcome != Forced {
		t.Fatalf("n0: %+v, %v", res, err)
	}

	c.restart(0)
	c.restart(1)
	waitFor(t, 30*time.Second, func() error {
		if c.leader() != 0 {
			return errors.New("replica 0 does not lead")
		}
		return nil
	})
	if err := c.reps[0].Raft().AddNonvoter("n1", c.addrs[1], 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	write(1)
	waitFor(t, 30*time.Second, func() error {
		if got := len(fetchAll(t, c.reps[1])); got != 16 {
			return fmt.Errorf("replica 1 has %d batches", got)
		}
		return nil
	})
	got0, got1 := fetchAll(t, c.reps[0]), fetchAll(t, c.reps[1])
	for i := range got0 {
		if i < len(ahead) && !bytes.Equal(got0[i], ahead[i]) || !bytes.Equal(got0[i], got1[i]) {
			t.Fatalf("batch %d differs between the forced replica, the one it caught up and the log before", i)
		}
	}
}
