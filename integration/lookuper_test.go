package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// TestLookuperAgainstServer: 16 goroutines share one batching Lookuper
// (one request slot, so lookups pile up into shared requests) against a
// real node; every lookup gets exactly its own key's row or none, and a
// key the server refuses fails alone while the others carry on.
func TestLookuperAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const keys = 200
	addr := startNode(t, t.TempDir()).addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New("http://" + addr)
	waitFor(t, 20*time.Second, func() error { return c.CreateDatabase(ctx, "lk", true) })
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "lk.t",
		Schema: &flussv1.Schema{
			Columns: []*flussv1.Column{
				{Name: "id", Type: "BIGINT", Nullable: proto.Bool(false)},
				{Name: "v", Type: "STRING", Nullable: proto.Bool(true)},
			},
			PrimaryKey: []string{"id"},
		},
		BucketCount: 4,
	}); err != nil {
		t.Fatal(err)
	}
	rows := []byte("[")
	for id := range keys {
		if id > 0 {
			rows = append(rows, ',')
		}
		rows = fmt.Appendf(rows, `{"id":%d,"v":"v%d"}`, id, id)
	}
	if _, err := c.Upsert(ctx, "lk.t", append(rows, ']'), nil); err != nil {
		t.Fatal(err)
	}

	l := c.NewLookuper("lk.t", client.LookuperOptions{MaxInflight: 1})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 100 {
				if g == 3 && i == 50 {
					_, err := l.Lookup(ctx, []byte(`{"nope":1}`))
					if connect.CodeOf(err) != connect.CodeInvalidArgument {
						t.Errorf("lookup without the key column: %v, want invalid_argument", err)
					}
					continue
				}
				id := (g*37 + i*11) % (keys + 20) // 1 in 11 misses
				row, err := l.Lookup(ctx, fmt.Appendf(nil, `{"id":%d}`, id))
				var got struct {
					ID int64  `json:"id"`
					V  string `json:"v"`
				}
				switch {
				case err != nil:
					t.Errorf("lookup %d: %v", id, err)
					return
				case id >= keys && row != nil:
					t.Errorf("lookup %d: row %s of a key never written", id, row)
				case id < keys && (json.Unmarshal(row, &got) != nil || got.ID != int64(id) || got.V != fmt.Sprintf("v%d", id)):
					t.Errorf("lookup %d: row %s", id, row)
				}
			}
		})
	}
	wg.Wait()
}
