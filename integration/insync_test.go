package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// inSyncLayout is GetTableLayout with in-sync replicas.
type inSyncLayout struct {
	Buckets []struct {
		Bucket   int   `json:"bucket"`
		Leader   int   `json:"leader"`
		Replicas []int `json:"replicas"`
		InSync   []int `json:"inSyncReplicas"`
	} `json:"buckets"`
}

// checkInSync returns nil when every bucket of table has a leader and
// exactly want in sync (sorted).
func checkInSync(addr, table string, want []int) error {
	var lay inSyncLayout
	if err := callOnce(addr, "AdminService/GetTableLayout", map[string]any{"table": table, "inSync": true}, &lay); err != nil {
		return err
	}
	for _, b := range lay.Buckets {
		if b.Leader == 0 || !slices.Equal(b.InSync, want) {
			return fmt.Errorf("bucket %d: leader %d, in sync %v, want %v", b.Bucket, b.Leader, b.InSync, want)
		}
	}
	return nil
}

// nodeLine reports whether `cluster status` output has node id's line with
// the UNDER-REPLICATED and OFFLINE columns under and offline.
func nodeLine(status, id, under, offline string) bool {
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) >= 7 && f[0] == id {
			return f[5] == under && f[6] == offline
		}
	}
	return false
}

// clusterHealth is DescribeCluster's replication counts per node; a node
// that did not report them is missing.
func clusterHealth(addr string) (underReplicated, offline map[int]int, err error) {
	var desc struct {
		Nodes []struct {
			ID              int  `json:"id"`
			UnderReplicated *int `json:"underReplicated"`
			OfflineReplicas *int `json:"offlineReplicas"`
		} `json:"nodes"`
	}
	if err := callOnce(addr, "AdminService/DescribeCluster", map[string]any{}, &desc); err != nil {
		return nil, nil, err
	}
	underReplicated, offline = map[int]int{}, map[int]int{}
	for _, n := range desc.Nodes {
		if n.UnderReplicated != nil {
			underReplicated[n.ID] = *n.UnderReplicated
		}
		if n.OfflineReplicas != nil {
			offline[n.ID] = *n.OfflineReplicas
		}
	}
	return underReplicated, offline, nil
}

// TestUnderReplicatedBuckets: three processes, a table of three buckets
// replicated three ways. All replicas are in sync; after kill -9 of one
// node every bucket (re-elected where it led) has the other two in sync
// within raft.replica_max_lag, the leaders count the buckets
// under-replicated (DescribeCluster, /metrics, `cluster status`, `table
// describe`), and the dead node reports nothing; restarted, it catches up
// and every bucket is fully in sync again.
func TestUnderReplicatedBuckets(t *testing.T) {
	longMultiProcess(t)
	nodes := startJoinedCluster(t, "[raft]\nreplica_max_lag = \"8s\"\n") // the least allowed at heartbeat_timeout 1s
	addr := nodes[0].client
	mustCall(t, addr, "AdminService/CreateDatabase", map[string]any{"name": "d"}, nil)
	cols := []map[string]any{{"name": "id", "type": "BIGINT", "nullable": false}, {"name": "s", "type": "STRING"}}
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{"table": "d.log", "schema": map[string]any{"columns": cols},
		"bucketCount": 3, "properties": map[string]string{"table.replication.factor": "3"}}, nil)
	var acked []int
	next := 0
	write := func() {
		t.Helper()
		for b := range 3 {
			waitFor(t, 30*time.Second, func() error { return appendRows(addr, "d.log", b, 10, &next, &acked) })
		}
	}
	write()
	healthy := func() error {
		if err := checkInSync(addr, "d.log", []int{1, 2, 3}); err != nil {
			return err
		}
		under, offline, err := clusterHealth(addr)
		if err != nil {
			return err
		}
		for id := 1; id <= 3; id++ {
			if u, ok := under[id]; !ok || u != 0 || offline[id] != 0 {
				return fmt.Errorf("node %d: under-replicated %v (reported %v), offline %d", id, u, ok, offline[id])
			}
		}
		return nil
	}
	waitFor(t, 30*time.Second, healthy)

	nodes[2].p.kill()
	write() // the surviving majority still takes writes
	waitFor(t, 30*time.Second, func() error {
		if err := checkInSync(addr, "d.log", []int{1, 2}); err != nil {
			return err
		}
		under, _, err := clusterHealth(addr)
		if err != nil {
			return err
		}
		if _, ok := under[3]; ok {
			return fmt.Errorf("the dead node 3 reported %d under-replicated buckets", under[3])
		}
		if n := under[1] + under[2]; n != 3 {
			return fmt.Errorf("nodes 1 and 2 count %d under-replicated buckets (%v), want 3", n, under)
		}
		m := 0
		for _, n := range nodes[:2] {
			var v int
			fmt.Sscan(metric(t, n.client, "fluss_bucket_under_replicated"), &v)
			m += v
		}
		if m != 3 {
			return fmt.Errorf("fluss_bucket_under_replicated on nodes 1 and 2 add up to %d, want 3", m)
		}
		return nil
	})
	status := mustCLI(t, addr, "", "cluster", "status").stdout
	if !strings.Contains(status, "UNDER-REPLICATED") || !nodeLine(status, "3", "?", "?") ||
		!strings.Contains(status, "replication: 3 under-replicated bucket(s), 0 offline replica(s), 0 bucket(s) without a leader; not reported by node(s) [3]") {
		t.Errorf("cluster status with node 3 dead: want its counts unknown (?):\n%s", status)
	}
	if d := mustCLI(t, addr, "", "table", "describe", "d.log").stdout; strings.Count(d, "under-replicated") != 3 {
		t.Errorf("table describe with node 3 dead: want 3 buckets under-replicated:\n%s", d)
	}

	nodes[2].start(t)
	waitFor(t, 60*time.Second, healthy)
	write()
	waitFor(t, 30*time.Second, healthy)
	got := fetchAllRaw(t, addr, "d.log", 3)
	total := 0
	for _, rows := range got {
		total += len(rows)
	}
	if total != len(acked) {
		t.Fatalf("the table holds %d rows, want the %d acknowledged", total, len(acked))
	}
}
