package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fluss-node/fluss-node/node/nodetest"
	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// kvOp is one operation of the linearizability history.
type kvOp struct {
	Kind  byte // 'g' lookup, 'p' upsert, 'd' delete
	Key   int
	Value int64 // upsert: the value written
}

// kvResult is a lookup's answer (writes have none).
type kvResult struct {
	Exists bool
	Value  int64
}

// kvModel is a register per key: upsert sets it, delete clears it, a
// lookup must return the current state.
var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(kvOp).Key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return kvResult{} },
	Step: func(state, input, output any) (bool, any) {
		st, in := state.(kvResult), input.(kvOp)
		switch in.Kind {
		case 'p':
			return true, kvResult{Exists: true, Value: in.Value}
		case 'd':
			return true, kvResult{}
		}
		return output.(kvResult) == st, st
	},
	DescribeOperation: func(input, output any) string {
		in := input.(kvOp)
		switch in.Kind {
		case 'p':
			return fmt.Sprintf("put(%d, %d)", in.Key, in.Value)
		case 'd':
			return fmt.Sprintf("delete(%d)", in.Key)
		}
		return fmt.Sprintf("get(%d) -> %+v", in.Key, output)
	},
}

// TestPKLinearizableUnderLeaderKills: concurrent clients upsert, delete and
// look up a small key set of a replication-factor-3 primary-key table on a
// 3-process cluster, through random nodes, while the leader of a bucket is
// kill -9'ed and restarted again and again. The history (a write whose
// outcome is unknown may take effect any time after it was sent) must be
// linearizable (porcupine); it ends with lookups of every key after the
// cluster recovered, so a lost acknowledged write would show.
func TestPKLinearizableUnderLeaderKills(t *testing.T) {
	longMultiProcess(t)
	const (
		killGap  = 2500 * time.Millisecond
		downTime = 1200 * time.Millisecond
	)
	kills := killCount(t, 4)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))

	base := t.TempDir()
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		nodes[i] = &clusterNode{dir: filepath.Join(base, fmt.Sprint(i+1)), client: nodetest.FreeAddr(), peer: nodetest.FreeAddr(), gossip: nodetest.FreeAddr()}
		if i > 0 {
			nodes[i].join = []string{nodes[0].peer}
		}
		nodes[i].start(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(kills)*(killGap+downTime+5*time.Second))
	defer cancel()
	admin := client.New("http://"+nodes[0].client, linRetry)
	createLinTable(ctx, t, admin, "lin.kv")

	var up [3]atomic.Bool
	for i := range up {
		up[i].Store(true)
	}
	w := startLinWorkload(ctx, nodes, "lin.kv", seed, 10*time.Second, func(i int) bool { return up[i].Load() })
	for k := range kills {
		time.Sleep(killGap)
		leader := bucketLeader(ctx, t, admin, "lin.kv", rng)
		if leader < 1 || leader > 3 {
			continue
		}
		victim := nodes[leader-1]
		t.Logf("kill %d: node %d (leader of a bucket)", k, leader)
		up[leader-1].Store(false)
		victim.p.kill()
		time.Sleep(downTime)
		victim.start(t)
		up[leader-1].Store(true)
		if leader == 1 {
			admin = client.New("http://"+nodes[0].client, linRetry)
		}
	}
	time.Sleep(killGap)
	w.finish(t, nodes[1].client)
}

// linRetry is the retry policy of the linearizability workload's clients.
var linRetry = client.WithRetry(client.Retry{Attempts: 30, Base: 50 * time.Millisecond, Max: 300 * time.Millisecond})

// createLinTable creates database lin (if need be) and the workload's
// primary-key table (k INT, v BIGINT) of two buckets replicated three
// ways, and waits until both buckets have a leader and three replicas.
func createLinTable(ctx context.Context, t *testing.T, admin *client.Client, table string) {
	t.Helper()
	if err := admin.CreateDatabase(ctx, "lin", true); err != nil {
		t.Fatal(err)
	}
	no := false
	if _, err := admin.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: table,
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "k", Type: "INT", Nullable: &no}, {Name: "v", Type: "BIGINT"},
		}, PrimaryKey: []string{"k"}},
		BucketCount: 2,
		Properties:  map[string]string{"table.replication.factor": "3"},
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() error {
		layout, err := admin.GetTableLayout(ctx, table)
		if err != nil {
			return err
		}
		for _, b := range layout {
			if b.GetLeader() == 0 || len(b.GetReplicas()) != 3 {
				return fmt.Errorf("bucket %d: leader %d replicas %v", b.GetBucket(), b.GetLeader(), b.GetReplicas())
			}
		}
		return nil
	})
}

// bucketLeader is the leader of a random bucket of table, 0 if the layout
// cannot be read.
func bucketLeader(ctx context.Context, t *testing.T, admin *client.Client, table string, rng *rand.Rand) int {
	layout, err := admin.GetTableLayout(ctx, table)
	if err != nil || len(layout) == 0 {
		t.Logf("no layout of %s: %v", table, err)
		return 0
	}
	return int(layout[rng.IntN(len(layout))].GetLeader())
}

// linWorkload is the linearizability workload: six clients upsert, delete
// and look up five keys of a primary-key table, each operation through a
// random node, and the history of what they saw.
type linWorkload struct {
	table     string
	seed      int64
	opTimeout time.Duration
	start     time.Time

	mu      sync.Mutex
	history []porcupine.Operation
	stop    atomic.Bool
	wg      sync.WaitGroup
	acked   atomic.Int64
	unknown atomic.Int64
}

const (
	linKeys    = 5
	linClients = 6
)

// startLinWorkload starts the clients; each operation goes to a random
// node i for which up(i) holds and gives up after opTimeout.
func startLinWorkload(ctx context.Context, nodes []*clusterNode, table string, seed int64, opTimeout time.Duration, up func(i int) bool) *linWorkload {
	w := &linWorkload{table: table, seed: seed, opTimeout: opTimeout, start: time.Now()}
	for c := range linClients {
		w.wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(c+100)))
			// One client per node, each its own idempotent writer.
			per := make([]*client.Client, len(nodes))
			for i := range per {
				per[i] = client.New("http://"+nodes[i].client, linRetry)
			}
			for i := 0; !w.stop.Load(); i++ {
				n := r.IntN(len(nodes))
				if !up(n) {
					continue
				}
				in := kvOp{Key: r.IntN(linKeys)}
				switch x := r.IntN(20); {
				case x < 9:
					in.Kind = 'g'
				case x < 17:
					in.Kind, in.Value = 'p', int64(c)*1_000_000+int64(i)
				default:
					in.Kind = 'd'
				}
				w.run(ctx, c, per[n], in)
			}
		})
	}
	return w
}

func (w *linWorkload) now() int64 { return int64(time.Since(w.start)) }

// run performs one operation through cl and records it.
func (w *linWorkload) run(ctx context.Context, id int, cl *client.Client, in kvOp) {
	call := w.now()
	octx, ocancel := context.WithTimeout(ctx, w.opTimeout)
	defer ocancel()
	var err error
	var out kvResult
	switch in.Kind {
	case 'p':
		_, err = cl.Upsert(octx, w.table, fmt.Appendf(nil, `[{"k":%d,"v":%d}]`, in.Key, in.Value), nil)
	case 'd':
		_, err = cl.Delete(octx, w.table, fmt.Appendf(nil, `[{"k":%d}]`, in.Key))
	default:
		var rows []byte
		if rows, err = cl.Lookup(octx, w.table, fmt.Appendf(nil, `[{"k":%d}]`, in.Key), nil); err == nil {
			out, err = parseLookup(rows)
		}
	}
	ret := w.now()
	switch {
	case err == nil:
		w.acked.Add(1)
	case in.Kind == 'g':
		return // a failed read tells nothing
	default:
		// The write may or may not have been stored, now or later.
		w.unknown.Add(1)
		ret = math.MaxInt64
	}
	w.mu.Lock()
	w.history = append(w.history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
	w.mu.Unlock()
}

// finish stops the clients, reads every key through the node at addr
// (after the faults, so a lost acknowledged write shows) and checks that
// the history is linearizable.
func (w *linWorkload) finish(t *testing.T, addr string) {
	t.Helper()
	w.stop.Store(true)
	w.wg.Wait()
	final := client.New("http://"+addr, linRetry)
	for k := range linKeys {
		w.run(context.Background(), linClients, final, kvOp{Kind: 'g', Key: k})
	}
	t.Logf("%d operations acknowledged, %d writes with unknown outcome", w.acked.Load(), w.unknown.Load())
	if w.acked.Load() < 200 {
		t.Fatalf("only %d operations acknowledged: the cluster did not serve through the faults", w.acked.Load())
	}
	res, info := porcupine.CheckOperationsVerbose(kvModel, w.history, time.Minute)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(t.TempDir(), "history.html")
		if err := porcupine.VisualizePath(kvModel, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatalf("history of %d operations is not linearizable (seed %d)", len(w.history), w.seed)
	default:
		t.Fatalf("linearizability check did not finish in time (%d operations)", len(w.history))
	}
}

// parseLookup reads a one-key Lookup answer: [null] or [{"k":..,"v":..}]
// (BIGINT as a JSON number or a decimal string).
func parseLookup(rows []byte) (kvResult, error) {
	dec := json.NewDecoder(bytes.NewReader(rows))
	dec.UseNumber()
	var got []map[string]any
	if err := dec.Decode(&got); err != nil || len(got) != 1 {
		return kvResult{}, fmt.Errorf("lookup answer %s: %v", rows, err)
	}
	if got[0] == nil {
		return kvResult{}, nil
	}
	var text string
	switch v := got[0]["v"].(type) {
	case nil:
		return kvResult{Exists: true}, nil
	case json.Number:
		text = v.String()
	case string:
		text = v
	default:
		return kvResult{}, fmt.Errorf("lookup value %v (%T)", v, v)
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return kvResult{}, fmt.Errorf("lookup value %q: %v", text, err)
	}
	return kvResult{Exists: true, Value: n}, nil
}

// The model must catch what the cluster test looks for: a read that misses
// an acknowledged write (lost write, stale read) is illegal; the same read
// concurrent with the write is fine; an unknown write may apply late.
func TestKVModelCatchesStaleReads(t *testing.T) {
	put := kvOp{Kind: 'p', Key: 1, Value: 5}
	get := kvOp{Kind: 'g', Key: 1}
	for _, tc := range []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"read after an acknowledged write misses it", []porcupine.Operation{
			{Input: put, Call: 0, Return: 10},
			{Input: get, Call: 20, Output: kvResult{}, Return: 30},
		}, porcupine.Illegal},
		{"read concurrent with the write", []porcupine.Operation{
			{Input: put, Call: 0, Return: 10},
			{Input: get, Call: 5, Output: kvResult{}, Return: 30},
		}, porcupine.Ok},
		{"unknown write applies after a read that missed it", []porcupine.Operation{
			{Input: put, Call: 0, Return: math.MaxInt64},
			{Input: get, Call: 20, Output: kvResult{}, Return: 30},
			{Input: get, Call: 40, Output: kvResult{Exists: true, Value: 5}, Return: 50},
		}, porcupine.Ok},
		{"deleted row comes back", []porcupine.Operation{
			{Input: put, Call: 0, Return: 10},
			{Input: kvOp{Kind: 'd', Key: 1}, Call: 20, Return: 30},
			{Input: get, Call: 40, Output: kvResult{Exists: true, Value: 5}, Return: 50},
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(kvModel, tc.h, 10*time.Second); got != tc.want {
				t.Fatalf("check = %v, want %v", got, tc.want)
			}
		})
	}
}
