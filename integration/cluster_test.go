package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/rpc/client"
)

// clusterNode is one member of a multi-process cluster with fixed addresses,
// so that it can be killed and restarted in place.
type clusterNode struct {
	dir, client, peer, gossip string
	join                      []string
	config                    string // a config file's path, or ""
	uid                       uint32 // run as this uid (0: as the test)
	p                         *proc
}

func (n *clusterNode) start(t *testing.T) {
	t.Helper()
	args := []string{"--client-addr", n.client, "--peer-addr", n.peer, "--gossip-addr", n.gossip}
	for _, j := range n.join {
		args = append(args, "--join", j)
	}
	if n.config != "" {
		args = append(args, "--config", n.config)
	}
	n.p = startNodeAs(t, n.uid, n.dir, args...)
}

// TestClusterKillNineKeepsEveryAcknowledgedRow runs three processes (one
// serve, two joins), a log table of 6 buckets replicated 3 ways, and
// idempotent writers that send through any node, while random nodes (the
// metadata leader and bucket leaders included) are kill -9'ed and
// restarted. Every acknowledged row must be in its bucket exactly once, at
// its acknowledged offset, with dense offsets.
func TestClusterKillNineKeepsEveryAcknowledgedRow(t *testing.T) {
	longMultiProcess(t)
	const (
		buckets = 6
		writers = 4
	)
	kills := killCount(t, 4)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))

	nodes := startJoinedCluster(t, "[raft]\nreplica_max_lag = \"8s\"\n") // for the catch-up check at the end
	up, anyAddr := upNodes(nodes[0].client, nodes[1].client, nodes[2].client)
	mustCall(t, nodes[0].client, "AdminService/CreateDatabase", map[string]any{"name": "ct"}, nil)
	createWriterTable(t, nodes[1].client, "ct.events", buckets, 3)
	var layout struct {
		Buckets []struct {
			Replicas []int `json:"replicas"`
		} `json:"buckets"`
	}
	waitFor(t, 30*time.Second, func() error {
		if err := call(context.Background(), nodes[2].client, "AdminService/GetTableLayout", map[string]any{"table": "ct.events"}, &layout); err != nil {
			return err
		}
		for b, l := range layout.Buckets {
			if len(l.Replicas) != 3 {
				return fmt.Errorf("bucket %d has replicas %v, want 3", b, l.Replicas)
			}
		}
		return nil
	})

	// The Go client's batching Appender too, one per node (with routing),
	// into a second table: it must not store a row twice either.
	mustCall(t, nodes[2].client, "AdminService/CreateTable", map[string]any{
		"table": "ct.batched",
		"schema": map[string]any{"columns": []map[string]any{
			{"name": "g", "type": "INT", "nullable": false},
			{"name": "i", "type": "INT", "nullable": false},
		}},
		"bucketCount": buckets,
		"properties":  map[string]string{"table.replication.factor": "3"},
	}, nil)

	// And a partitioned table, whose rows name a new partition every 100
	// rows of a writer: partitions are created (through the metadata
	// leader, which is killed too) while the nodes die and come back.
	mustCall(t, nodes[0].client, "AdminService/CreateTable", map[string]any{
		"table": "ct.parted",
		"schema": map[string]any{"columns": []map[string]any{
			{"name": "g", "type": "INT", "nullable": false},
			{"name": "i", "type": "INT", "nullable": false},
			{"name": "p", "type": "STRING", "nullable": false},
		}},
		"partitionKeys": []string{"p"},
		"bucketCount":   2,
		"properties":    map[string]string{"table.replication.factor": "3"},
	}, nil)

	var stop atomic.Bool
	wait := startAppenders(seed, "ct.events", buckets, writers, anyAddr, &stop)
	addrs := []string{nodes[0].client, nodes[1].client, nodes[2].client}
	// One Appender of ct.batched is given all three nodes: its calls move
	// to another node while the one they use is down.
	listed := append(slices.Clone(addrs), strings.Join(addrs, ","))
	waitBatched := startBatchedAppenders("ct.batched", listed, &stop, func(g, i int) []byte { return fmt.Appendf(nil, `{"g":%d,"i":%d}`, g, i) })
	waitParted := startBatchedAppenders("ct.parted", addrs, &stop, func(g, i int) []byte { return fmt.Appendf(nil, `{"g":%d,"i":%d,"p":"p%d"}`, g, i, i/100) })
	var lastStart time.Time
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(2000+rng.IntN(1500)) * time.Millisecond)
		i := rng.IntN(3)
		up[i].Store(false)
		nodes[i].p.kill()
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		nodes[i].start(t)
		lastStart = time.Now()
		up[i].Store(true)
	}
	acks := stopAndCheckAcks(t, &stop, wait, kills, "ct.events", buckets, func(b int) string { return nodes[b%3].client })
	t.Logf("%d acknowledged appends across %d buckets, %d kill -9s", len(acks), buckets, kills)
	acked, failed := waitBatched()
	stored := checkStoredOnce(t, fetchAllRaw(t, nodes[0].client, "ct.batched", buckets), acked)
	t.Logf("Appender: %d rows acknowledged, %d failed, %d stored", len(acked), failed, stored)
	listedAcks := 0
	for k := range acked {
		if k[0] >= 3*6 { // the goroutines of the fourth address, the list
			listedAcks++
		}
	}
	if listedAcks == 0 {
		t.Error("the Appender given all three nodes had no row acknowledged")
	}
	t.Logf("Appender given all three nodes: %d rows acknowledged", listedAcks)

	acked, failed = waitParted()
	var parts struct {
		Partitions []struct{ Name string } `json:"partitions"`
	}
	mustCall(t, nodes[1].client, "AdminService/ListPartitions", map[string]any{"table": "ct.parted"}, &parts)
	var all [][]json.RawMessage
	for _, p := range parts.Partitions {
		for b, rows := range fetchPartitionRaw(t, nodes[2].client, "ct.parted", p.Name, 2) {
			for _, r := range rows {
				var row struct{ P string }
				if err := json.Unmarshal(r, &row); err != nil || row.P != p.Name {
					t.Errorf("partition %s bucket %d holds row %s", p.Name, b, r)
				}
			}
			all = append(all, rows)
		}
	}
	stored = checkStoredOnce(t, all, acked)
	t.Logf("partitioned: %d rows acknowledged, %d failed, %d stored in %d partitions", len(acked), failed, stored, len(parts.Partitions))

	// Every replica catches up after the kills: all three in sync in every
	// bucket. Looked at only once every leader has led longer than
	// replica_max_lag, the time a new leader counts unheard followers in.
	// A second look past that time again covers leaders that changed
	// meanwhile (the controller spreads leaders once the cluster settles).
	allInSync := func() {
		for _, table := range []string{"ct.events", "ct.batched", "ct.parted"} {
			waitFor(t, 60*time.Second, func() error { return checkInSync(nodes[0].client, table, []int{1, 2, 3}) })
		}
	}
	time.Sleep(time.Until(lastStart.Add(9 * time.Second)))
	allInSync()
	time.Sleep(9 * time.Second)
	allInSync()
}

// upNodes marks the nodes of a cluster (their client addresses) up, and
// pick chooses one of those marked up at random: what a test's writers
// send to while it stops nodes.
func upNodes(clients ...string) (up []atomic.Bool, pick func(*rand.Rand) string) {
	up = make([]atomic.Bool, len(clients))
	for i := range up {
		up[i].Store(true)
	}
	return up, func(r *rand.Rand) string {
		for {
			if i := r.IntN(len(clients)); up[i].Load() {
				return clients[i]
			}
		}
	}
}

// createWriterTable creates, through addr, a log table of the columns
// startAppenders writes (writer, seq, i) with buckets buckets of rf
// replicas, and returns its id.
func createWriterTable(t *testing.T, addr, table string, buckets, rf int) int64 {
	t.Helper()
	var created struct {
		TableID any `json:"tableId"`
	}
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{
		"table": table,
		"schema": map[string]any{"columns": []map[string]any{
			{"name": "writer", "type": "INT", "nullable": false},
			{"name": "seq", "type": "INT", "nullable": false},
			{"name": "i", "type": "INT", "nullable": false},
		}},
		"bucketCount": buckets,
		"properties":  map[string]string{"table.replication.factor": strconv.Itoa(rf)},
	}, &created)
	return jsonInt(created.TableID)
}

// startBatchedAppenders runs 6 goroutines per address, each appending rows
// row(g, i) (i = 0, 1, ...; the row holds g and i) one at a time through
// one client.Appender per address (with routing), until stop is set. A row whose Append fails is
// not sent again (its outcome is unknown: it may be stored, once). wait
// returns the acknowledged rows and the number that failed.
func startBatchedAppenders(table string, addrs []string, stop *atomic.Bool, row func(g, i int) []byte) (wait func() (acked map[[2]int]bool, failed int)) {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		acked  = map[[2]int]bool{}
		failed int
	)
	for k, addr := range addrs {
		a := client.New("http://"+addr, client.WithRouting()).NewAppender(table, client.AppenderOptions{})
		for j := range 6 {
			g := k*6 + j
			wg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := a.Append(ctx, row(g, i))
					cancel()
					mu.Lock()
					if err == nil {
						acked[[2]int{g, i}] = true
					} else {
						failed++
					}
					mu.Unlock()
					if err != nil {
						time.Sleep(50 * time.Millisecond)
					}
				}
			})
		}
	}
	return func() (map[[2]int]bool, int) {
		wg.Wait()
		return acked, failed
	}
}

// checkStoredOnce checks that no row {g, i} is stored twice and that every
// acknowledged one is stored; it returns the rows stored.
func checkStoredOnce(t *testing.T, buckets [][]json.RawMessage, acked map[[2]int]bool) int {
	t.Helper()
	seen := map[[2]int]bool{}
	for _, rows := range rowsGI(t, buckets) {
		for _, k := range rows {
			if seen[k] {
				t.Errorf("row g%d i%d stored twice", k[0], k[1])
			}
			seen[k] = true
		}
	}
	for k := range acked {
		if !seen[k] {
			t.Errorf("acknowledged row g%d i%d is not stored", k[0], k[1])
		}
	}
	if len(acked) == 0 {
		t.Error("no row was acknowledged")
	}
	return len(seen)
}

// rowsGI decodes rows {"g":..,"i":..} per bucket.
func rowsGI(t *testing.T, buckets [][]json.RawMessage) [][][2]int {
	t.Helper()
	out := make([][][2]int, len(buckets))
	for b, rows := range buckets {
		for _, r := range rows {
			var row struct{ G, I int }
			if err := json.Unmarshal(r, &row); err != nil {
				t.Fatalf("bucket %d row %s: %v", b, r, err)
			}
			out[b] = append(out[b], [2]int{row.G, row.I})
		}
	}
	return out
}

// stopAndCheckAcks lets the appenders run 2 s more with every node up,
// stops them, and checks every bucket's acknowledgements through the node
// clientOf names (at least one acknowledged append per kill).
func stopAndCheckAcks(t *testing.T, stop *atomic.Bool, wait func() []clusterAck, kills int, table string, buckets int, clientOf func(bucket int) string) []clusterAck {
	t.Helper()
	time.Sleep(2 * time.Second)
	stop.Store(true)
	acks := wait()
	if len(acks) < kills {
		t.Fatalf("only %d appends acknowledged", len(acks))
	}
	for b := 0; b < buckets; b++ {
		checkBucketAcks(t, clientOf(b), table, b, acks)
	}
	return acks
}

// clusterAck is one acknowledged append of a test writer: rows i =
// 0..count-1 of (writer, seq) stored from offset base in bucket, after
// tries sends of the request.
type clusterAck struct {
	writer, seq, bucket int
	base                int64
	count               int
	tries               int
}

// startAppenders runs writers idempotent appenders on table (columns
// writer, seq, i): writer w sends request seq s (1 + (13w+s)%7 rows) to
// bucket (w+s)%buckets through addr, retrying it with the same writer id and
// sequence until it is acknowledged, until stop is set. wait waits for
// them and returns every acknowledgement.
func startAppenders(seed int64, table string, buckets, writers int, addr func(*rand.Rand) string, stop *atomic.Bool) (wait func() []clusterAck) {
	var (
		mu   sync.Mutex
		acks []clusterAck
		wg   sync.WaitGroup
	)
	for w := 1; w <= writers; w++ {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
			for s := 1; !stop.Load(); s++ {
				b := (w + s) % buckets
				rows := make([]map[string]any, 1+(w*13+s)%7)
				for i := range rows {
					rows[i] = map[string]any{"writer": w, "seq": s, "i": i}
				}
				req := map[string]any{"table": table, "bucket": b, "rows": rows, "writerId": w, "batchSequence": s}
				for tries := 1; !stop.Load(); tries++ {
					var resp struct {
						Results []struct {
							BaseOffset any `json:"baseOffset"`
							Count      int `json:"count"`
						} `json:"results"`
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := call(ctx, addr(r), "WriteService/Append", req, &resp)
					cancel()
					if err == nil && len(resp.Results) == 1 {
						mu.Lock()
						acks = append(acks, clusterAck{w, s, b, jsonInt(resp.Results[0].BaseOffset), resp.Results[0].Count, tries})
						mu.Unlock()
						break
					}
					time.Sleep(25 * time.Millisecond)
				}
			}
		})
	}
	return func() []clusterAck {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return acks
	}
}
