package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/node/nodetest"
)

// TestRecoverAfterLosingTwoOfThreeNodes: a cluster of three nodes, every
// bucket (and the metadata group) on all three, loses two nodes for good:
// their processes die and their disks are gone. Nothing can elect a leader.
// `fluss-node recover --lost` on the survivor, stopped, gives it back the
// metadata group and every bucket: it starts alone, serves every row the
// cluster acknowledged (all three were in sync before the loss) and the
// primary-key table's rows, takes writes, and two new nodes that join get
// the lost replicas back, in sync.
func TestRecoverAfterLosingTwoOfThreeNodes(t *testing.T) {
	longMultiProcess(t)
	const buckets = 4
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	nodes := startJoinedCluster(t, "[cluster]\ndead_node_grace = \"2s\"\n[raft]\nreplica_max_lag = \"8s\"\n")
	survivor := nodes[0]
	mustCall(t, survivor.client, "AdminService/CreateDatabase", map[string]any{"name": "rc"}, nil)
	createWriterTable(t, survivor.client, "rc.events", buckets, 3)
	cols := []map[string]any{{"name": "id", "type": "BIGINT", "nullable": false}, {"name": "s", "type": "STRING"}}
	mustCall(t, survivor.client, "AdminService/CreateTable", map[string]any{"table": "rc.pk", "schema": map[string]any{"columns": cols, "primaryKey": []string{"id"}},
		"bucketCount": 2, "properties": map[string]string{"table.replication.factor": "3"}}, nil)
	rows := func(from, n int) []map[string]any {
		var out []map[string]any
		for i := from; i < from+n; i++ {
			out = append(out, map[string]any{"id": i, "s": fmt.Sprintf("v%d", i)})
		}
		return out
	}
	waitFor(t, 30*time.Second, func() error {
		return callOnce(survivor.client, "WriteService/Upsert", map[string]any{"table": "rc.pk", "rows": rows(0, 50)}, nil)
	})

	_, anyAddr := upNodes(nodes[0].client, nodes[1].client, nodes[2].client)
	var stop atomic.Bool
	wait := startAppenders(seed, "rc.events", buckets, 4, anyAddr, &stop)
	acks := stopAndCheckAcks(t, &stop, wait, 1, "rc.events", buckets, func(int) string { return survivor.client })
	t.Logf("%d appends acknowledged before the loss", len(acks))
	// All three hold everything: what the survivor serves after recovery
	// is then all that was acknowledged.
	for _, table := range []string{"rc.events", "rc.pk"} {
		waitFor(t, 60*time.Second, func() error { return checkInSync(survivor.client, table, []int{1, 2, 3}) })
	}

	for _, n := range nodes[1:] {
		n.p.kill()
		if err := os.RemoveAll(n.dir); err != nil {
			t.Fatal(err)
		}
	}
	// The survivor alone: no bucket can elect, and cluster status says so.
	waitFor(t, 60*time.Second, func() error {
		r := runCLI(t, survivor.client, "", "cluster", "status")
		if want := fmt.Sprintf("%d bucket(s) without a leader", buckets+2); !strings.Contains(r.stdout, want) {
			return fmt.Errorf("cluster status does not say %q:\n%s%s", want, r.stdout, r.stderr)
		}
		return nil
	})
	survivor.p.stop(t)

	recoverCmd := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, append([]string{"recover", "--data-dir", survivor.dir}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	if out, err := recoverCmd(); err == nil || !strings.Contains(out, "--lost names the nodes lost for good") {
		t.Fatalf("recover without --lost: %v\n%s", err, out)
	}
	if out, err := recoverCmd("--lost", "1,3"); err == nil || !strings.Contains(out, "node 1 is this node") {
		t.Fatalf("recover naming the node itself lost: %v\n%s", err, out)
	}
	dry, err := recoverCmd("--lost", "2,3", "--dry-run")
	if err != nil || !strings.Contains(dry, "dry run") || !strings.Contains(dry, "metadata group: recovered") ||
		!strings.Contains(dry, fmt.Sprintf("buckets: %d forced, 0 set aside, 0 not recoverable here", buckets+2)) {
		t.Fatalf("recover --dry-run: %v\n%s", err, dry)
	}
	out, err := recoverCmd("--lost", "2,3")
	if err != nil || strings.Contains(out, "dry run") || !strings.Contains(out, "metadata group: recovered") || !strings.Contains(out, "(voters [1 2 3]; now [1])") ||
		!strings.Contains(out, fmt.Sprintf("buckets: %d forced", buckets+2)) {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	t.Logf("recover printed:\n%s", out)

	survivor.start(t)
	if out, err := recoverCmd("--lost", "2,3"); err == nil || !strings.Contains(out, "stop the node first") {
		t.Fatalf("recover while the node runs: %v\n%s", err, out)
	}
	waitFor(t, 60*time.Second, func() error {
		if code, body, err := readyz(survivor.client); err != nil || code != 200 {
			return fmt.Errorf("/readyz: %d %s %v", code, body, err)
		}
		return nil
	})
	for b := 0; b < buckets; b++ {
		checkBucketAcks(t, survivor.client, "rc.events", b, acks)
	}
	if st := mustCLI(t, survivor.client, "", "cluster", "status").stdout; !strings.Contains(st, " 0 bucket(s) without a leader") {
		t.Fatalf("cluster status after recovery:\n%s", st)
	}
	var lookup struct {
		Rows []json.RawMessage `json:"rows"`
	}
	mustCall(t, survivor.client, "ReadService/Lookup", map[string]any{"table": "rc.pk", "keys": []map[string]any{{"id": 7}, {"id": 49}}}, &lookup)
	if len(lookup.Rows) != 2 || !strings.Contains(string(lookup.Rows[0]), `"v7"`) || !strings.Contains(string(lookup.Rows[1]), `"v49"`) {
		t.Fatalf("lookup after recovery: %s", lookup.Rows)
	}
	// Writes go on, alone, and then with two new nodes (a writer id of its
	// own: the writers above used theirs).
	write := func(seqs ...int) {
		acks = append(acks, appendAsWriter100(t, survivor.client, "rc.events", buckets, seqs...)...)
	}
	write(1, 2, 3, 4, 5, 6, 7, 8)
	joined, ids := joinNew(t, survivor, 2)
	for _, table := range []string{"rc.events", "rc.pk"} {
		waitFor(t, 90*time.Second, func() error { return checkInSync(survivor.client, table, ids) })
	}
	write(9, 10, 11, 12)
	for b := 0; b < buckets; b++ {
		checkBucketAcks(t, joined[b%2].client, "rc.events", b, acks)
	}
	t.Logf("%d appends acknowledged in all; buckets in sync on nodes %v", len(acks), ids)
	mustCall(t, joined[1].client, "ReadService/Lookup", map[string]any{"table": "rc.pk", "keys": []map[string]any{{"id": 7}}}, &lookup)
	if len(lookup.Rows) != 1 || !strings.Contains(string(lookup.Rows[0]), `"v7"`) {
		t.Fatalf("lookup through a new node: %s", lookup.Rows)
	}
}

// TestLostNodesStartedAgainAreFenced: two of three nodes are lost (kill -9)
// and the survivor recovered without them, but their machines come back on
// their old data directories, as systemd would start them on boot. Together
// they are a majority of the old configurations and could elect each other
// there. Each asks the survivor whether it is fenced before it serves a
// client (node.fenced), so both stop before serving (exit status not 0,
// FENCED written, the reason in their log) and never start on those
// directories again; the survivor keeps every row acknowledged before the
// loss and after the recovery, and takes writes, and shows them fenced.
// (The survivor's refusal of their raft requests, the backstop when that
// question goes unanswered, is rpc/peer's TestFencedServerIsRefused.)
func TestLostNodesStartedAgainAreFenced(t *testing.T) {
	longMultiProcess(t)
	const buckets = 2
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	nodes := startJoinedCluster(t, "")
	survivor := nodes[0]
	mustCall(t, survivor.client, "AdminService/CreateDatabase", map[string]any{"name": "fe"}, nil)
	createWriterTable(t, survivor.client, "fe.events", buckets, 3)
	_, anyAddr := upNodes(nodes[0].client, nodes[1].client, nodes[2].client)
	var stop atomic.Bool
	wait := startAppenders(seed, "fe.events", buckets, 4, anyAddr, &stop)
	acks := stopAndCheckAcks(t, &stop, wait, 1, "fe.events", buckets, func(int) string { return survivor.client })
	waitFor(t, 60*time.Second, func() error { return checkInSync(survivor.client, "fe.events", []int{1, 2, 3}) })
	for _, n := range nodes[1:] {
		n.p.kill()
	}
	survivor.p.stop(t)
	out, err := exec.Command(binary, "recover", "--data-dir", survivor.dir, "--lost", "2,3").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fenced nodes: [2 3]") {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	t.Logf("recover printed:\n%s", out)
	survivor.start(t)
	write := func(seqs ...int) {
		acks = append(acks, appendAsWriter100(t, survivor.client, "fe.events", buckets, seqs...)...)
	}
	write(1, 2, 3, 4)
	waitFor(t, 30*time.Second, func() error {
		if !strings.Contains(survivor.p.logText(), "fenced nodes recorded in the catalog") {
			return fmt.Errorf("the survivor has not recorded the fence in the catalog")
		}
		return nil
	})

	// The lost machines come back with their old data. Each asks the
	// survivor before it serves a client, and stops.
	lost := nodes[1:]
	for i, n := range lost {
		args := []string{"--client-addr", n.client, "--peer-addr", n.peer, "--gossip-addr", n.gossip, "--config", n.config}
		p, err := startNodeErr(t, 0, n.dir, args...)
		if err == nil {
			p.kill()
			t.Fatalf("lost node %d served clients from its old data:\n%s", i+2, p.logTail(8<<10))
		}
		if !strings.Contains(err.Error(), "exited before serving") || !strings.Contains(err.Error(), fmt.Sprintf("node %d was given up for lost", i+2)) {
			t.Fatalf("lost node %d: %v", i+2, err)
		}
	}
	for i, n := range lost {
		b, err := os.ReadFile(filepath.Join(n.dir, "FENCED"))
		if err != nil || !strings.Contains(string(b), fmt.Sprintf("node %d was given up for lost", i+2)) {
			t.Fatalf("lost node %d: FENCED: %q, %v", i+2, b, err)
		}
		if _, err := startNodeErr(t, 0, n.dir, "--config", n.config); err == nil || !strings.Contains(err.Error(), "this node was fenced") {
			t.Fatalf("lost node %d started again on its fenced directory: %v", i+2, err)
		}
	}

	write(5, 6, 7, 8)
	for b := range buckets {
		checkBucketAcks(t, survivor.client, "fe.events", b, acks)
	}
	// Given up for good, they need not wait out dead_node_grace (5 min
	// here): two new nodes get their replicas at once.
	_, ids := joinNew(t, survivor, 2)
	waitFor(t, 90*time.Second, func() error { return checkInSync(survivor.client, "fe.events", ids) })
	write(9, 10)
	for b := range buckets {
		checkBucketAcks(t, survivor.client, "fe.events", b, acks)
	}
	st := mustCLI(t, survivor.client, "", "cluster", "status").stdout
	if strings.Count(st, "fenced") < 2 {
		t.Fatalf("cluster status does not show the lost nodes fenced:\n%s", st)
	}
	// The counter exists (they stopped before their groups elected, so it
	// may well be 0).
	if m := metricValue(t, survivor.client, "fluss_peer_fenced_requests_total"); m < 0 {
		t.Fatal("the survivor has no fluss_peer_fenced_requests_total")
	}
	if st := mustCLI(t, survivor.client, "", "cluster", "status").stdout; !strings.Contains(st, " 0 bucket(s) without a leader") {
		t.Fatalf("cluster status after the lost nodes came and went:\n%s", st)
	}
	t.Logf("%d appends acknowledged, all on the survivor", len(acks))
}

// appendAsWriter100 appends one row per sequence s as writer 100 through
// addr, to bucket s % buckets (the columns of createWriterTable), retrying
// each until it is acknowledged, and returns the acknowledgements.
func appendAsWriter100(t *testing.T, addr, table string, buckets int, seqs ...int) []clusterAck {
	t.Helper()
	var acks []clusterAck
	for _, s := range seqs {
		b := s % buckets
		req := map[string]any{"table": table, "bucket": b, "rows": []map[string]any{{"writer": 100, "seq": s, "i": 0}}, "writerId": 100, "batchSequence": s}
		var resp struct {
			Results []struct {
				BaseOffset any `json:"baseOffset"`
				Count      int `json:"count"`
			} `json:"results"`
		}
		waitFor(t, 30*time.Second, func() error { return callOnce(addr, "WriteService/Append", req, &resp) })
		acks = append(acks, clusterAck{100, s, b, jsonInt(resp.Results[0].BaseOffset), resp.Results[0].Count, 1})
	}
	return acks
}

// joinNew starts count new nodes that join the cluster through seed (with
// its config file) and returns them, with the ids of seed and of them as
// DescribeCluster gives them, sorted.
func joinNew(t *testing.T, seed *clusterNode, count int) ([]*clusterNode, []int) {
	t.Helper()
	var joined []*clusterNode
	for range count {
		n := &clusterNode{dir: t.TempDir(), client: nodetest.FreeAddr(), peer: nodetest.FreeAddr(), gossip: nodetest.FreeAddr(),
			join: []string{seed.peer}, config: seed.config}
		n.start(t)
		joined = append(joined, n)
	}
	var ids []int
	waitFor(t, 30*time.Second, func() error {
		var desc struct {
			Nodes []struct {
				ID         int    `json:"id"`
				ClientAddr string `json:"clientAddr"`
			} `json:"nodes"`
		}
		if err := callOnce(seed.client, "AdminService/DescribeCluster", map[string]any{}, &desc); err != nil {
			return err
		}
		ids = ids[:0]
		for _, n := range desc.Nodes {
			if n.ClientAddr == seed.client {
				ids = append(ids, n.ID)
			}
			for _, j := range joined {
				if n.ClientAddr == j.client {
					ids = append(ids, n.ID)
				}
			}
		}
		if len(ids) != count+1 {
			return fmt.Errorf("the seed and the new nodes are not all in DescribeCluster: %+v", desc.Nodes)
		}
		return nil
	})
	slices.Sort(ids)
	return joined, ids
}
