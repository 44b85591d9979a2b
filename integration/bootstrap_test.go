package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/node/nodetest"
)

// bootNode is a clusterNode started from a static config file (node_id,
// bootstrap_expect and a join list) instead of `serve` + `join` flags.
type bootNode struct {
	clusterNode
	config string // path of its TOML file
}

// startErr starts the node with --config; the fixed addresses are in the
// file and repeated as flags (startNodeErr passes port-0 flags first).
func (n *bootNode) startErr(t *testing.T) error {
	t.Helper()
	p, err := startNodeErr(t, 0, n.dir, "--config", n.config,
		"--client-addr", n.client, "--peer-addr", n.peer, "--gossip-addr", n.gossip)
	if err != nil {
		return err
	}
	n.p = p
	return nil
}

// newBootCluster writes three config files with bootstrap_expect = 3 and a
// join list of the other two nodes' addresses (peer addresses, or gossip
// addresses when viaGossip), and starts the three processes at once: each
// waits in awaitBootstrap until it has seen the other two.
func newBootCluster(t *testing.T, viaGossip bool) []*bootNode {
	t.Helper()
	base := t.TempDir()
	nodes := make([]*bootNode, 3)
	for i := range nodes {
		nodes[i] = &bootNode{clusterNode: clusterNode{dir: filepath.Join(base, fmt.Sprint(i+1)),
			client: nodetest.FreeAddr(), peer: nodetest.FreeAddr(), gossip: nodetest.FreeAddr()}}
	}
	for i, n := range nodes {
		var join []string
		for j, o := range nodes {
			if j == i {
				continue
			}
			if viaGossip {
				join = append(join, fmt.Sprintf("%q", o.gossip))
			} else {
				join = append(join, fmt.Sprintf("%q", o.peer))
			}
		}
		n.config = filepath.Join(base, fmt.Sprintf("node%d.toml", i+1))
		cfg := fmt.Sprintf(`node_id = %d
data_dir = %q
client_addr = %q
peer_addr = %q
gossip_addr = %q
bootstrap_expect = 3
join = [%s]
`, i+1, n.dir, n.client, n.peer, n.gossip, strings.Join(join, ", "))
		if err := os.WriteFile(n.config, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.startErr(t) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return nodes
}

// TestBootstrapExpectClusterKillNineKeepsEveryAcknowledgedRow is
// TestClusterKillNineKeepsEveryAcknowledgedRow on a cluster formed by static
// config (bootstrap_expect = 3 and a join list on every node, as a systemd
// deployment would) instead of `join`: exactly one cluster forms, a 6-bucket
// RF3 log table takes concurrent idempotent appenders while random nodes are
// kill -9'ed and restarted, and then every acknowledged row is in its bucket
// exactly once, at its acknowledged offset, with dense offsets and each
// writer's requests in order, and the three replicas of every bucket hold
// byte-identical raft entries.
func TestBootstrapExpectClusterKillNineKeepsEveryAcknowledgedRow(t *testing.T) {
	longMultiProcess(t)
	const (
		buckets = 6
		writers = 4
	)
	kills := killCount(t, 4)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	nodes := newBootCluster(t, false)

	// One cluster, not three: every node sees the same cluster id and all
	// three nodes.
	var clusterID string
	for i, n := range nodes {
		waitFor(t, 30*time.Second, func() error {
			var dc struct {
				ClusterID string `json:"clusterId"`
				Nodes     []struct {
					State string `json:"state"`
				} `json:"nodes"`
			}
			if err := callOnce(n.client, "AdminService/DescribeCluster", map[string]any{}, &dc); err != nil {
				return err
			}
			active := 0
			for _, ni := range dc.Nodes {
				if ni.State == "active" {
					active++
				}
			}
			if active != 3 {
				return fmt.Errorf("node %d sees %d active nodes", i+1, active)
			}
			if clusterID == "" {
				clusterID = dc.ClusterID
			}
			if dc.ClusterID != clusterID {
				return fmt.Errorf("node %d is in cluster %q, node 1 in %q: bootstrapped twice", i+1, dc.ClusterID, clusterID)
			}
			return nil
		})
	}

	up, anyAddr := upNodes(nodes[0].client, nodes[1].client, nodes[2].client)
	mustCall(t, nodes[0].client, "AdminService/CreateDatabase", map[string]any{"name": "bt"}, nil)
	tableID := createWriterTable(t, nodes[1].client, "bt.events", buckets, 3)
	waitFor(t, 30*time.Second, func() error {
		var layout struct {
			Buckets []struct {
				Leader   int   `json:"leader"`
				Replicas []int `json:"replicas"`
			} `json:"buckets"`
		}
		if err := callOnce(nodes[2].client, "AdminService/GetTableLayout", map[string]any{"table": "bt.events"}, &layout); err != nil {
			return err
		}
		if len(layout.Buckets) != buckets {
			return fmt.Errorf("%d buckets in the layout", len(layout.Buckets))
		}
		for b, l := range layout.Buckets {
			if len(l.Replicas) != 3 || l.Leader == 0 {
				return fmt.Errorf("bucket %d: replicas %v, leader %d", b, l.Replicas, l.Leader)
			}
		}
		return nil
	})

	var stop atomic.Bool
	wait := startAppenders(seed, "bt.events", buckets, writers, anyAddr, &stop)
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(2000+rng.IntN(1500)) * time.Millisecond)
		i := rng.IntN(3)
		up[i].Store(false)
		nodes[i].p.kill()
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		// A restarted node has metadata state: it neither bootstraps nor
		// joins again, whatever bootstrap_expect says.
		if err := nodes[i].startErr(t); err != nil {
			stop.Store(true)
			wait()
			t.Fatalf("restart node %d: %v", i+1, err)
		}
		up[i].Store(true)
	}
	acks := stopAndCheckAcks(t, &stop, wait, kills, "bt.events", buckets, func(b int) string { return nodes[b%3].client })

	// Replicas: once every node's log bytes agree (the restarted ones have
	// caught up), stop all three at once and compare every bucket's raft
	// entries on disk, replica against replica.
	waitFor(t, 60*time.Second, func() error {
		var sizes []int64
		for _, n := range nodes {
			sizes = append(sizes, metricValue(t, n.client, "fluss_log_size_bytes"))
		}
		if sizes[0] <= 0 || sizes[0] != sizes[1] || sizes[1] != sizes[2] {
			return fmt.Errorf("log bytes per node differ: %v", sizes)
		}
		return nil
	})
	for _, n := range nodes {
		n.p.kill()
	}
	for b := 0; b < buckets; b++ {
		compareReplicaLogs(t, tableID, b, []string{nodes[0].dir, nodes[1].dir, nodes[2].dir})
	}
	t.Logf("cluster %s: %d acknowledged appends across %d buckets, %d kill -9s", clusterID, len(acks), buckets, kills)
}

// TestBootstrapExpectViaGossipAddresses: the join list may name the other
// nodes' gossip addresses instead of their peer addresses; the three still
// form exactly one cluster.
func TestBootstrapExpectViaGossipAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	nodes := newBootCluster(t, true)
	ids := map[string]bool{}
	for i, n := range nodes {
		waitFor(t, 30*time.Second, func() error {
			var dc struct {
				ClusterID  string `json:"clusterId"`
				MetaLeader int    `json:"metaLeader"`
				Nodes      []struct {
					State string `json:"state"`
				} `json:"nodes"`
			}
			if err := callOnce(n.client, "AdminService/DescribeCluster", map[string]any{}, &dc); err != nil {
				return err
			}
			if len(dc.Nodes) != 3 || dc.MetaLeader == 0 {
				return fmt.Errorf("node %d sees %d nodes, meta leader %d", i+1, len(dc.Nodes), dc.MetaLeader)
			}
			ids[dc.ClusterID] = true
			return nil
		})
	}
	if len(ids) != 1 {
		t.Fatalf("cluster ids seen by the three nodes: %v, want one", ids)
	}
}

// checkBucketAcks reads bucket b of table through addr and checks: dense
// offsets (as many rows as the high watermark), no row twice, every
// acknowledged row at its acknowledged offset, and each writer's requests in
// sequence order.
func checkBucketAcks(t *testing.T, addr, table string, b int, acks []clusterAck) {
	t.Helper()
	type row struct{ Writer, Seq, I int }
	var rows []row
	var hw, offset int64
	waitFor(t, 60*time.Second, func() error {
		for {
			var resp struct {
				Rows          []row `json:"rows"`
				NextOffset    any   `json:"nextOffset"`
				HighWatermark any   `json:"highWatermark"`
			}
			if err := call(context.Background(), addr, "ReadService/Fetch",
				map[string]any{"table": table, "bucket": b, "offset": offset, "maxBytes": 1 << 20}, &resp); err != nil {
				return err
			}
			rows = append(rows, resp.Rows...)
			offset, hw = jsonInt(resp.NextOffset), jsonInt(resp.HighWatermark)
			if offset >= hw {
				return nil
			}
		}
	})
	if int64(len(rows)) != hw {
		t.Fatalf("bucket %d: %d rows, high watermark %d", b, len(rows), hw)
	}
	seen := map[row]bool{}
	lastSeq := map[int]int{}
	for off, r := range rows {
		if seen[r] {
			t.Fatalf("bucket %d: row %+v twice (again at offset %d)", b, r, off)
		}
		seen[r] = true
		if r.Seq < lastSeq[r.Writer] {
			t.Fatalf("bucket %d offset %d: writer %d seq %d after seq %d", b, off, r.Writer, r.Seq, lastSeq[r.Writer])
		}
		lastSeq[r.Writer] = r.Seq
	}
	for _, a := range acks {
		if a.bucket != b {
			continue
		}
		for i := 0; i < a.count; i++ {
			off := a.base + int64(i)
			if off >= int64(len(rows)) || rows[off] != (row{a.writer, a.seq, i}) {
				t.Fatalf("bucket %d offset %d: acknowledged %+v row %d, log holds %d rows", b, off, a, i, len(rows))
			}
		}
	}
}

// metricValue reads one unlabelled gauge from a node's /metrics (-1 if the
// node does not answer or lacks it).
func metricValue(t *testing.T, addr, name string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return -1
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return int64(f)
			}
		}
	}
	return -1
}

// compareReplicaLogs opens bucket b's log in each (stopped) node's data
// directory and checks that all replicas hold the same raft entries: same
// index range, and per index the same term, type and bytes.
func compareReplicaLogs(t *testing.T, tableID int64, b int, dataDirs []string) {
	t.Helper()
	type replicaLog struct {
		dir         string
		first, last uint64
		entries     []raft.Log
	}
	var logs []replicaLog
	for _, d := range dataDirs {
		m, _ := filepath.Glob(filepath.Join(d, "buckets", fmt.Sprint(tableID), "*", fmt.Sprint(b), "log"))
		if len(m) != 1 {
			t.Fatalf("bucket %d: %d log directories under %s, want 1", b, len(m), d)
		}
		l, err := logstore.Open(logstore.Options{Dir: m[0]})
		if err != nil {
			t.Fatalf("open %s: %v", m[0], err)
		}
		rl := replicaLog{dir: m[0]}
		rl.first, _ = l.FirstIndex()
		rl.last, _ = l.LastIndex()
		for idx := rl.first; idx <= rl.last && rl.last > 0; idx++ {
			var e raft.Log
			if err := l.GetLog(idx, &e); err != nil {
				l.Close()
				t.Fatalf("%s entry %d: %v", m[0], idx, err)
			}
			rl.entries = append(rl.entries, e)
		}
		l.Close()
		logs = append(logs, rl)
	}
	ref := logs[0]
	data := 0
	for _, e := range ref.entries {
		if e.Type == raft.LogCommand {
			data++
		}
	}
	if data == 0 {
		t.Fatalf("bucket %d: replica %s holds no data entries", b, ref.dir)
	}
	for _, o := range logs[1:] {
		if o.first != ref.first || o.last != ref.last {
			t.Fatalf("bucket %d: replica %s holds entries %d..%d, replica %s %d..%d", b, o.dir, o.first, o.last, ref.dir, ref.first, ref.last)
		}
		for i := range ref.entries {
			x, y := ref.entries[i], o.entries[i]
			if x.Index != y.Index || x.Term != y.Term || x.Type != y.Type || !bytes.Equal(x.Data, y.Data) {
				t.Fatalf("bucket %d index %d: replica %s has term %d type %v (%d bytes), replica %s term %d type %v (%d bytes)",
					b, x.Index, ref.dir, x.Term, x.Type, len(x.Data), o.dir, y.Term, y.Type, len(y.Data))
			}
		}
	}
}
