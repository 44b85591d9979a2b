package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// TestSharedClientConcurrentWrites: goroutines sharing one Client append to
// the same bucket at once, and then upsert and delete in one; every write
// is acknowledged and stored exactly once. (With one writer id for all of
// them, the server refused the batches that reached it out of sequence
// order.)
func TestSharedClientConcurrentWrites(t *testing.T) {
	addr, ctx, c := nodeWithLogTable(t, "ap.shared", 1)
	const goroutines, each = 16, 40
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if _, err := c.Append(ctx, "ap.shared", fmt.Appendf(nil, `[{"g":%d,"i":%d}]`, g, i)); err != nil {
					t.Errorf("append g%d i%d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	checkEachOnce(t, fetchAllRaw(t, addr, "ap.shared", 1), goroutines, each)

	// Upserts and deletes from the same shared client, concurrently.
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "ap.kv",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "id", Type: "INT", Nullable: proto.Bool(false)},
			{Name: "v", Type: "INT", Nullable: proto.Bool(false)},
		}, PrimaryKey: []string{"id"}},
		BucketCount: 1,
	}); err != nil {
		t.Fatal(err)
	}
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				id := g*each + i
				if _, err := c.Upsert(ctx, "ap.kv", fmt.Appendf(nil, `[{"id":%d,"v":%d}]`, id, i), nil); err != nil {
					t.Errorf("upsert %d: %v", id, err)
					return
				}
				if i%2 == 1 {
					if _, err := c.Delete(ctx, "ap.kv", fmt.Appendf(nil, `[{"id":%d}]`, id)); err != nil {
						t.Errorf("delete %d: %v", id, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	keys := []byte("[")
	for id := range goroutines * each {
		if id > 0 {
			keys = append(keys, ',')
		}
		keys = fmt.Appendf(keys, `{"id":%d}`, id)
	}
	rows, err := c.Lookup(ctx, "ap.kv", append(keys, ']'), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*struct{ ID, V int }
	if err := json.Unmarshal(rows, &got); err != nil {
		t.Fatal(err)
	}
	for id, r := range got {
		deleted := id%each%2 == 1
		switch {
		case deleted && r != nil:
			t.Errorf("key %d: deleted, but looked up %+v", id, *r)
		case !deleted && (r == nil || r.ID != id || r.V != id%each):
			t.Errorf("key %d: looked up %+v, want v=%d", id, r, id%each)
		}
	}
}

// TestAppenderAgainstServer: 64 goroutines append single rows through one
// batching Appender (so rows share requests) to a 4-bucket table; every
// acknowledged row is stored exactly once, and a row the server refuses
// fails alone while the others carry on.
func TestAppenderAgainstServer(t *testing.T) {
	addr, ctx, c := nodeWithLogTable(t, "ap.batched", 4)
	a := c.NewAppender("ap.batched", client.AppenderOptions{})
	const goroutines, each = 64, 30
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if g == 7 && i == 10 {
					err := a.Append(ctx, []byte(`{"g":"seven","i":10}`))
					if connect.CodeOf(err) != connect.CodeInvalidArgument {
						t.Errorf("row of the wrong type: %v, want invalid_argument", err)
					}
				}
				if err := a.Append(ctx, fmt.Appendf(nil, `{"g":%d,"i":%d}`, g, i)); err != nil {
					t.Errorf("append g%d i%d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	checkEachOnce(t, fetchAllRaw(t, addr, "ap.batched", 4), goroutines, each)
	n := requestsOf(t, addr, "Append")
	if n == 0 || n >= goroutines*each {
		t.Errorf("%d Append requests for %d rows: want fewer requests than rows, batched", n, goroutines*each)
	}
	t.Logf("%d rows in %d Append requests", goroutines*each, n)
}

// requestsOf reads from the node's /metrics how many requests of the
// WriteService procedure it served.
func requestsOf(t *testing.T, addr, procedure string) int {
	t.Helper()
	total := 0
	want := fmt.Sprintf(`procedure="/fluss.v1.WriteService/%s"}`, procedure)
	for line := range strings.Lines(metrics(t, addr)) {
		if strings.HasPrefix(line, "fluss_rpc_request_duration_seconds_count{") && strings.Contains(line, want) {
			n, err := strconv.Atoi(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]))
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			total += n
		}
	}
	return total
}

// nodeWithLogTable starts a node (skipped with -short) and creates the log
// table (columns g, i) with buckets buckets; it returns the node's client
// address, a context bounding the test to 60 s, and a client.
func nodeWithLogTable(t *testing.T, table string, buckets int32) (string, context.Context, *client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	addr := startNode(t, t.TempDir()).addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	c := client.New("http://" + addr)
	createLogTable(t, ctx, c, table, buckets)
	return addr, ctx, c
}

func createLogTable(t *testing.T, ctx context.Context, c *client.Client, table string, buckets int32) {
	t.Helper()
	waitFor(t, 20*time.Second, func() error { return c.CreateDatabase(ctx, "ap", true) })
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: table,
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "g", Type: "INT", Nullable: proto.Bool(false)},
			{Name: "i", Type: "INT", Nullable: proto.Bool(false)},
		}},
		BucketCount: buckets,
	}); err != nil {
		t.Fatal(err)
	}
}

// checkEachOnce checks that the buckets' rows hold each (g, i) for
// g < goroutines, i < each exactly once, and each bucket a goroutine's rows
// in the order it appended them.
func checkEachOnce(t *testing.T, buckets [][]json.RawMessage, goroutines, each int) {
	t.Helper()
	all := map[[2]int]bool{}
	for g := range goroutines {
		for i := range each {
			all[[2]int{g, i}] = true
		}
	}
	if n := checkStoredOnce(t, buckets, all); n != len(all) {
		t.Errorf("%d distinct rows stored, want %d", n, len(all))
	}
	for b, rows := range rowsGI(t, buckets) {
		last := map[int]int{}
		for _, k := range rows {
			if prev, ok := last[k[0]]; ok && k[1] < prev {
				t.Errorf("bucket %d: goroutine %d's row %d stored after its row %d", b, k[0], k[1], prev)
			}
			last[k[0]] = k[1]
		}
	}
}
