package replica

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/raftmeta"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A replica closed while raft held a committed entry for its FSM
		// leaves behind the goroutine waiting for that entry's future,
		// which hashicorp/raft never answers after shutdown
		// (hashicorp/raft#498; Replica.waitRaft, term.proposeLoop).
		goleak.IgnoreAnyFunction("github.com/fluss-node/fluss-node/node/replica.(*Replica).waitRaft.func1"),
		goleak.IgnoreAnyFunction("github.com/fluss-node/fluss-node/node/replica.(*term).complete"),
	)
}

// testTuning makes elections fast for tests of a single voter, which
// elects itself after one heartbeat timeout and has no lease to lose.
func testTuning() RaftTuning { return tuning(100 * time.Millisecond) }

// clusterTuning is the raft timing of testCluster's replicas: short enough
// for a failover in about a second, long enough that a leader under the race
// detector on two busy cores does not lose its lease or time out a
// leadership transfer by accident (100 ms did, in CI).
func clusterTuning() RaftTuning { return tuning(500 * time.Millisecond) }

// tuning sets raft's heartbeat, election and lease timeouts to timeout.
func tuning(timeout time.Duration) RaftTuning {
	return RaftTuning{
		HeartbeatTimeout:   timeout,
		ElectionTimeout:    timeout,
		LeaderLeaseTimeout: timeout,
		CommitTimeout:      5 * time.Millisecond,
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("REPLICA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return nil
}

// makeBatch builds one batch of count records with a small body.
func makeBatch(count int32, body string) []byte {
	return record.AppendBatch(nil, record.BatchHeader{RecordCount: count, SchemaID: 1}, nil, []byte(body))
}

// waitFor polls cond until it returns nil or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openSingle opens a single-voter replica in dir on a fresh in-memory
// transport and waits until it accepts appends.
func openSingle(t testing.TB, dir string, mod func(*Config)) *Replica {
	t.Helper()
	addr, tr := raft.NewInmemTransport("single")
	cfg := Config{
		ID:        raftmeta.BucketID{TableID: 1, Bucket: 0},
		Dir:       dir,
		LocalID:   "n1",
		LocalAddr: addr,
		Transport: tr,
		Bootstrap: bootWith(raft.Server{ID: "n1", Address: addr, Suffrage: raft.Voter}),
		Raft:      testTuning(),
		Logger:    testLogger(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitLeader(ctx); err != nil {
		r.Close()
		t.Fatalf("WaitLeader: %v", err)
	}
	return r
}

// fetchAll reads every batch this replica has applied, from its log start
// (leader or not: replicas are compared with it).
func fetchAll(t testing.TB, r *Replica) [][]byte {
	t.Helper()
	var out [][]byte
	off := r.LogStartOffset()
	for {
		bs, hw, _, err := r.FetchLocal(context.Background(), off, 64<<10, 0)
		if err != nil {
			t.Fatalf("Fetch(%d): %v", off, err)
		}
		for _, b := range bs {
			h, _, err := checkBatch(b)
			if err != nil {
				t.Fatalf("fetched batch does not parse: %v", err)
			}
			if h.Base+int64(h.Count) <= off {
				continue
			}
			if h.Base != off {
				t.Fatalf("fetched batch at %d, want dense offset %d", h.Base, off)
			}
			out = append(out, b)
			off = h.Base + int64(h.Count)
		}
		if off >= hw {
			return out
		}
		if len(bs) == 0 {
			t.Fatalf("Fetch(%d) returned nothing below hw %d", off, hw)
		}
	}
}

// sameBatches fails t unless every replica of reps holds exactly the
// batches want, byte for byte.
func sameBatches(t testing.TB, want [][]byte, reps []*Replica) {
	t.Helper()
	for i, r := range reps {
		got := fetchAll(t, r)
		if len(got) != len(want) {
			t.Fatalf("replica %d has %d batches, want %d", i, len(got), len(want))
		}
		for j := range want {
			if !bytes.Equal(got[j], want[j]) {
				t.Fatalf("replica %d batch %d differs", i, j)
			}
		}
	}
}

// ws is a (writer, seq) key.
type ws struct {
	w int64
	s int32
}

// index maps (writer, seq) to the base offsets stored for it, checking the
// batch headers on the way.
func index(t testing.TB, batches [][]byte) map[ws][]int64 {
	t.Helper()
	m := map[ws][]int64{}
	for _, b := range batches {
		h, _, err := checkBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.CommitTs <= 0 {
			t.Fatalf("batch at %d has no commit timestamp", h.Base)
		}
		k := ws{h.WriterID, h.Seq}
		m[k] = append(m[k], h.Base)
	}
	return m
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", err.Error())
}

// bootWith is a Config.Bootstrap of a fixed configuration.
func bootWith(servers ...raft.Server) func() ([]raft.Server, error) {
	return func() ([]raft.Server, error) { return servers, nil }
}
