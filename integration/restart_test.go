package integration

import (
	"bytes"
	"fmt"
	"testing"
)

// clusterInfo is the part of DescribeCluster a restart must keep.
type clusterInfo struct {
	ClusterID string `json:"clusterId"`
	Nodes     []struct {
		ID int `json:"id"`
	} `json:"nodes"`
}

// TestRestartKeepsCatalogAndData stops a node cleanly (SIGTERM), restarts
// it on the same data directory, then kills it with SIGKILL and restarts it
// again: the node id, the cluster id, the catalog and every acknowledged row
// survive both, and the node accepts writes after each restart.
func TestRestartKeepsCatalogAndData(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	p := startNode(t, dir, "--node-id", "7")
	addr := p.addr
	mustCall(t, addr, "AdminService/CreateDatabase", map[string]any{"name": "keep", "comment": "survives"}, nil)
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{
		"table": "keep.t",
		"schema": map[string]any{"columns": []map[string]any{
			{"name": "id", "type": "BIGINT", "nullable": false},
			{"name": "s", "type": "STRING"},
			{"name": "d", "type": "DECIMAL(10,2)"},
			{"name": "ts", "type": "TIMESTAMP(3)"},
		}},
		"bucketCount": 2,
		"bucketKeys":  []string{"id"},
		"properties":  map[string]string{"table.log.ttl": "24h"},
	}, nil)
	next := 0
	appendRows := func(addr string, n int) {
		rows := make([]map[string]any, n)
		for i := range rows {
			next++
			rows[i] = map[string]any{"id": next, "s": fmt.Sprintf("row %d", next), "d": fmt.Sprintf("%d.25", next), "ts": 1764583200000 + next}
		}
		mustCall(t, addr, "WriteService/Append", map[string]any{"table": "keep.t", "rows": rows}, nil)
	}
	appendRows(addr, 50)
	appendRows(addr, 30)

	var info0 clusterInfo
	mustCall(t, addr, "AdminService/DescribeCluster", map[string]any{}, &info0)
	if len(info0.Nodes) != 1 || info0.Nodes[0].ID != 7 || info0.ClusterID == "" {
		t.Fatalf("DescribeCluster = %+v, want one node with id 7 and a cluster id", info0)
	}
	var table0 map[string]any
	mustCall(t, addr, "AdminService/GetTable", map[string]any{"table": "keep.t"}, &table0)
	data0 := fetchAllRaw(t, addr, "keep.t", 2)

	check := func(stage, addr string, wantRows int) [][]byte {
		t.Helper()
		var info clusterInfo
		mustCall(t, addr, "AdminService/DescribeCluster", map[string]any{}, &info)
		if len(info.Nodes) != 1 || info.Nodes[0].ID != 7 || info.ClusterID != info0.ClusterID {
			t.Errorf("%s: DescribeCluster = %+v, want node 7 in cluster %s", stage, info, info0.ClusterID)
		}
		var dbs struct {
			Databases []string `json:"databases"`
		}
		mustCall(t, addr, "AdminService/ListDatabases", map[string]any{}, &dbs)
		if fmt.Sprint(dbs.Databases) != "[keep]" {
			t.Errorf("%s: databases %v, want [keep]", stage, dbs.Databases)
		}
		var table map[string]any
		mustCall(t, addr, "AdminService/GetTable", map[string]any{"table": "keep.t"}, &table)
		if fmt.Sprint(table) != fmt.Sprint(table0) {
			t.Errorf("%s: GetTable\n%v\nwant\n%v", stage, table, table0)
		}
		data := fetchAllRaw(t, addr, "keep.t", 2)
		out := make([][]byte, 2)
		n := 0
		for b := range data {
			out[b] = joinRaw(data[b])
			n += len(data[b])
		}
		if n != wantRows {
			t.Errorf("%s: %d rows, want %d", stage, n, wantRows)
		}
		return out
	}

	// Clean stop.
	p.stop(t)
	p = startNode(t, dir) // no --node-id: the data directory keeps it
	got := check("after SIGTERM restart", p.addr, 80)
	for b := range got {
		if !bytes.Equal(got[b], joinRaw(data0[b])) {
			t.Errorf("after SIGTERM restart: bucket %d differs:\n%s\nwant\n%s", b, got[b], joinRaw(data0[b]))
		}
	}
	appendRows(p.addr, 20)
	before := check("before kill -9", p.addr, 100)

	// kill -9.
	p.kill()
	p = startNode(t, dir)
	got = check("after kill -9 restart", p.addr, 100)
	for b := range got {
		if !bytes.Equal(got[b], before[b]) {
			t.Errorf("after kill -9: bucket %d differs:\n%s\nwant\n%s", b, got[b], before[b])
		}
	}
	appendRows(p.addr, 5)
	check("after writing again", p.addr, 105)

	// A data directory belongs to its node id forever.
	p.stop(t)
	if q := tryStart(t, dir, "--node-id", "8"); q == nil {
		t.Log("restart with another --node-id was refused, as documented")
	} else {
		t.Errorf("a data directory of node 7 started as node 8; config.example.toml says a data directory belongs to one node id forever")
	}
}
