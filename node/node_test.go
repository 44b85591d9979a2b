package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fluss-node/fluss-node/node/nodetest"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// hashicorp/raft's InmemTransport timers and the HTTP client's idle
		// connections outlive a test by design.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		// A replica closed while raft held a committed entry for its FSM
		// leaves behind the goroutine waiting for that entry's future,
		// which hashicorp/raft never answers after shutdown
		// (hashicorp/raft#498; replica.Replica.waitRaft).
		goleak.IgnoreAnyFunction("github.com/fluss-node/fluss-node/node/replica.(*Replica).waitRaft.func1"),
		goleak.IgnoreAnyFunction("github.com/fluss-node/fluss-node/node/replica.(*term).complete"),
	)
}

func testConfig(dir string) Config {
	cfg := Default()
	cfg.DataDir = dir
	// Fixed ports, not ":0": a restarted node binds its addresses again.
	cfg.ClientAddr = nodetest.FreeAddr()
	cfg.PeerAddr = nodetest.FreeAddr()
	cfg.GossipAddr = nodetest.FreeAddr()
	return cfg
}

func startNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	return startNodeWith(t, cfg, nil)
}

// startNodeWith is startNode with tune (if not nil) called before Start.
func startNodeWith(t *testing.T, cfg Config, tune func(*Node)) *Node {
	t.Helper()
	n, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	n.gossipProfile = "local" // membership.ProfileLocal
	if tune != nil {
		tune(n)
	}
	if err := n.Start(context.Background()); err != nil {
		n.Close()
		t.Fatal(err)
	}
	return n
}

// TestNodeLifecycle drives one in-process node through the Go client:
// create, append, read back, restart on the same directory, read again.
func TestNodeLifecycle(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, testConfig(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New("http://" + n.ClientAddr())
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	yes := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db.t",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "id", Type: "BIGINT", Nullable: &yes},
			{Name: "s", Type: "STRING"},
		}},
		BucketCount: 3,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "db.t", []byte(`[{"id":9223372036854775807,"s":"max"},{"id":-1,"s":null}]`)); err != nil {
		t.Fatal(err)
	}
	want := readAll(t, ctx, c, "db.t", 3)
	if !strings.Contains(want, `"id":9223372036854775807`) || !strings.Contains(want, `"s":null`) {
		t.Fatalf("rows read back: %s", want)
	}
	if err := n.Ready(); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	body := scrape(t, n)
	if !strings.Contains(string(body), "fluss_bucket_replicas 3") {
		t.Fatalf("metrics do not count 3 replicas:\n%.2000s", body)
	}
	for _, name := range []string{"fluss_peer_heartbeats_batched_total", "fluss_peer_heartbeat_batches_total",
		"fluss_peer_heartbeats_cached_total", "fluss_peer_appends_repeated_total"} {
		if !strings.Contains(string(body), "\n"+name+" ") {
			t.Fatalf("metrics lack %s", name)
		}
	}
	// The append above was made durable by the syncer (fsync "always").
	rounds, waits := metricValue(t, body, "fluss_log_sync_rounds_total"), metricValue(t, body, "fluss_log_sync_waits_total")
	if rounds < 1 || waits < rounds || metricValue(t, body, "fluss_log_sync_files_total") < rounds ||
		metricValue(t, body, "fluss_log_sync_seconds_total") <= 0 {
		t.Fatalf("sync metrics: rounds %v, waits %v:\n%.2000s", rounds, waits, body)
	}

	// A second node cannot open the same directory.
	if _, err := New(testConfig(dir), nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second New on a locked dir: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = startNode(t, testConfig(dir))
	defer n.Close()
	if n.ID() != 1 {
		t.Fatalf("node id after restart %d, want 1", n.ID())
	}
	c = client.New("http://" + n.ClientAddr())
	if got := readAll(t, ctx, c, "db.t", 3); got != want {
		t.Fatalf("after restart:\n got %s\nwant %s", got, want)
	}
	info, err := c.DescribeCluster(ctx)
	if err != nil || len(info.Nodes) != 1 || info.Nodes[0].Replicas != 3 {
		t.Fatalf("DescribeCluster: %v %v", info, err)
	}
	// Dropping the table removes its buckets' data.
	if err := c.DropTable(ctx, "db.t", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "buckets", "*", "*", "*"))
		return len(m) == 0
	})
}

// readAll fetches every bucket to its high watermark and returns the rows
// as one JSON text per bucket, joined.
func readAll(t *testing.T, ctx context.Context, c *client.Client, table string, buckets int32) string {
	t.Helper()
	var out []string
	for b := int32(0); b < buckets; b++ {
		var rows []json.RawMessage
		for off := int64(0); ; {
			resp, err := c.Fetch(ctx, &flussv1.FetchRequest{Table: table, Bucket: b, Offset: off})
			if err != nil {
				t.Fatalf("fetch bucket %d: %v", b, err)
			}
			var part []json.RawMessage
			if len(resp.Rows) > 0 { // proto: no rows is empty bytes
				if err := json.Unmarshal(resp.Rows, &part); err != nil {
					t.Fatal(err)
				}
			}
			rows = append(rows, part...)
			off = resp.NextOffset
			if off >= resp.HighWatermark {
				break
			}
		}
		b, _ := json.Marshal(rows)
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scrape returns node n's /metrics.
func scrape(t *testing.T, n *Node) []byte {
	t.Helper()
	resp, err := http.Get("http://" + n.ClientAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// metricValue returns the value of an unlabelled metric in a Prometheus
// text exposition.
func metricValue(t *testing.T, body []byte, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("metrics lack %s", name)
	return 0
}

// A node told to join where nothing listens gives up when its context
// ends, and says why.
func TestJoinUnreachableSeedSaysWhy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seed := l.Addr().String()
	l.Close()
	cfg := testConfig(t.TempDir())
	cfg.Join = []string{seed}
	n, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	n.gossipProfile = "local"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = n.Start(ctx)
	n.Close()
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), seed) {
		t.Fatalf("start: %v, want the join to fail naming the refused seed", err)
	}
}
