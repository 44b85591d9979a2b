package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// On a 3-node cluster whose nodes share [auth] users, a writer's appends
// reach bucket leaders on other nodes both ways: forwarded by the node it
// called (which authorized them) and routed by the client itself (whose
// GetTableLayout and DescribeCluster its grant allows). What the writer
// may not do is refused on every node.
func TestClusterAuth(t *testing.T) {
	hash := func(tok string) string { h := rpc.HashToken(tok); return hex.EncodeToString(h[:]) }
	nodes, _ := startThreeNodes(t, func(c *Config) {
		c.Auth.Users = []AuthUser{
			{Name: "admin", TokenSHA256: hash("admin-token"), Grants: []string{"all:*"}},
			{Name: "writer", TokenSHA256: hash("writer-token"), Grants: []string{"write:db"}},
		}
	})
	retry := client.WithRetry(client.Retry{Attempts: 50, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := client.New("http://"+nodes[1].ClientAddr(), retry, client.WithToken("admin-token"))
	if err := admin.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	const buckets = 6
	if _, err := admin.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		BucketCount: buckets,
		Properties:  map[string]string{"table.replication.factor": "3"},
	}); err != nil {
		t.Fatal(err)
	}

	forwarded := client.New("http://"+nodes[0].ClientAddr(), retry, client.WithToken("writer-token"))
	routed := client.New("http://"+nodes[0].ClientAddr(), retry, client.WithToken("writer-token"), client.WithRouting())
	want := map[int32]int{}
	for i := range 2 * buckets {
		c := forwarded
		if i%2 == 1 {
			c = routed
		}
		rows := fmt.Appendf(nil, `[{"id":%d}]`, i)
		if _, err := c.AppendRequest(ctx, &flussv1.AppendRequest{Table: "db.t", Bucket: new(int32(i % buckets)), Rows: rows}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		want[int32(i%buckets)]++
	}
	for b, n := range want {
		res, err := admin.Fetch(ctx, &flussv1.FetchRequest{Table: "db.t", Bucket: b, Offset: 0})
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		if err := json.Unmarshal(res.GetRows(), &rows); err != nil || len(rows) != n {
			t.Fatalf("bucket %d: %s (%v), want %d rows", b, res.GetRows(), err, n)
		}
	}
	for i, n := range nodes {
		w := client.New("http://"+n.ClientAddr(), client.WithToken("writer-token"))
		_, err := w.Fetch(ctx, &flussv1.FetchRequest{Table: "db.t", Bucket: 0})
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("node %d: the writer's fetch: %v, want permission_denied", i+1, err)
		}
		if _, err := client.New("http://" + n.ClientAddr()).ListDatabases(ctx); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("node %d: a call without a token: %v, want unauthenticated", i+1, err)
		}
	}
}
