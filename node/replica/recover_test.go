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
	dry, err := ForceSoleVoter(c.dirs[0], "n0", lost, true, testLogger(t))
	if err != nil || dry.Outcome != Forced || len(dry.Voters) != 3 || !slices.Equal(dry.Survivors, []raft.ServerID{"n0"}) {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	res, err := ForceSoleVoter(c.dirs[0], "n0", lost, false, testLogger(t))
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
	again, err := ForceSoleVoter(c.dirs[0], "n0", lost, false, testLogger(t))
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
	}{
		{"nothing lost", three, "a", nil, ForceNotNeeded},
		{"one of three lost", three, "a", []raft.ServerID{"b"}, ForceNotNeeded},
		{"two of three lost, the survivor", three, "a", []raft.ServerID{"b", "c"}, Forced},
		{"two of three lost, a non-voter beside the survivor", three, "d", []raft.ServerID{"b", "c"}, SetAside},
		{"every voter lost, a non-voter", three, "d", []raft.ServerID{"a", "b", "c"}, Forced},
		{"three of five lost, two survive", five, "a", []raft.ServerID{"c", "e", "f"}, ForceAmbiguous},
		{"two of five lost", five, "a", []raft.ServerID{"e", "f"}, ForceNotNeeded},
		{"a copy the group does not list, its voters lost", three, "x", []raft.ServerID{"a", "b", "c"}, ForceNotMember},
		{"a copy the group does not list, one voter survives", three, "x", []raft.ServerID{"b", "c"}, ForceNotMember},
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

			res, err := ForceSoleVoter(dir, tc.local, lostSet(tc.lost...), false, testLogger(t))
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
	res, err := ForceSoleVoter(t.TempDir(), "a", lostSet("b"), false, testLogger(t))
	if err != nil || res.Outcome != ForceNoState {
		t.Fatalf("got %+v, %v", res, err)
	}
}
