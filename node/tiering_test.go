package node

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc/client"
	"github.com/fluss-node/fluss-node/tiering"
	"github.com/fluss-node/fluss-node/tiering/s3test"
)

// TestTieringMovesClosedSegmentsAndReadsThemBack runs one node with a
// remote directory and 1 MiB segments: the closed segments move to the
// remote log, the local copies go (but one), and every row still reads
// back from offset 0 — before and after a restart — with EARLIEST and
// timestamp lookups reaching into the remote log. Dropping the table
// empties its remote log.
func TestTieringMovesClosedSegmentsAndReadsThemBack(t *testing.T) {
	t.Run("directory", func(t *testing.T) {
		remote := t.TempDir()
		store, err := tiering.NewDirStore(remote)
		if err != nil {
			t.Fatal(err)
		}
		testTiering(t, TieringConfig{RemoteDir: remote}, store)
	})
	t.Run("s3", func(t *testing.T) {
		endpoint := s3test.Serve(t, "fluss")
		tc := TieringConfig{S3Endpoint: endpoint, S3Bucket: "fluss", S3Prefix: "node-test", S3Insecure: true}
		store, err := tiering.NewS3Store(tiering.S3Config{Endpoint: endpoint, Bucket: "fluss", Prefix: "node-test", Insecure: true}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		testTiering(t, tc, store)
	})
}

// testTiering is TestTieringMovesClosedSegmentsAndReadsThemBack with the
// remote storage of tc, which store reads independently.
func testTiering(t *testing.T, tc TieringConfig, store tiering.Store) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Storage.SegmentBytes = 1 << 20
	tc.Interval, tc.LocalSegments = Duration{50 * time.Millisecond}, 1
	tc.LakeFormat, tc.LakeSnapshotRetention = cfg.Tiering.LakeFormat, cfg.Tiering.LakeSnapshotRetention
	cfg.Tiering = tc
	n := startNode(t, cfg)
	defer func() { n.Close() }()
	ctx, c := withDB(t, n)
	no := false
	tableID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db.t",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "id", Type: "BIGINT", Nullable: &no},
			{Name: "s", Type: "STRING"},
		}},
		BucketCount: 1,
		Properties:  map[string]string{"table.log.arrow.compression.type": "NONE"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// ~6 MiB of rows: six segments or so.
	rng := rand.New(rand.NewPCG(1, 2))
	const batches, perBatch = 30, 100
	for b := range batches {
		var rows []string
		for i := range perBatch {
			s := make([]byte, 2000)
			for k := range s {
				s[k] = 'a' + byte(rng.IntN(26))
			}
			rows = append(rows, fmt.Sprintf(`{"id":%d,"s":%q}`, b*perBatch+i, s))
		}
		if _, err := c.Append(ctx, "db.t", []byte("["+strings.Join(rows, ",")+"]")); err != nil {
			t.Fatal(err)
		}
	}
	want := readAll(t, ctx, c, "db.t", 1)
	bucketDir := filepath.Join(dir, "buckets", "*", "*", "*")
	localSegments := func() int {
		m, _ := filepath.Glob(filepath.Join(bucketDir, "log", "*.log"))
		return len(m)
	}
	remoteSegments := func() int {
		names, err := store.List(tiering.BucketDir(tableID, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	// The closed segments (~6 MiB of 1 MiB segments) are uploaded; locally
	// the active one and one more stay.
	waitFor(t, 20*time.Second, func() bool { return remoteSegments() >= 5 && localSegments() == 2 })

	check := func(when string) {
		t.Helper()
		if got := readAll(t, ctx, c, "db.t", 1); got != want {
			t.Fatalf("%s: rows read back differ from the rows written (%d and %d bytes)", when, len(got), len(want))
		}
		offs, err := c.ListOffsets(ctx, "db.t", flussv1.ListOffsetsRequest_EARLIEST, 0)
		if err != nil || len(offs) != 1 || offs[0].Offset != 0 {
			t.Fatalf("%s: EARLIEST = %v, %v; want 0 (in the remote log)", when, offs, err)
		}
		offs, err = c.ListOffsets(ctx, "db.t", flussv1.ListOffsetsRequest_TIMESTAMP, 0)
		if err != nil || len(offs) != 1 || offs[0].Offset != 0 {
			t.Fatalf("%s: offset for timestamp 0 = %v, %v; want 0", when, offs, err)
		}
	}
	check("tiered")
	body := scrape(t, n)
	up, dropped := metricValue(t, body, "fluss_tiering_segments_uploaded_total"), metricValue(t, body, "fluss_tiering_local_segments_dropped_total")
	if int(up) != remoteSegments() || int(dropped) != remoteSegments()-1 || metricValue(t, body, "fluss_tiering_errors_total") != 0 {
		t.Fatalf("tiering metrics: %v uploaded, %v dropped (%d remote segments)\n%s", up, dropped, remoteSegments(), body)
	}

	// Restart: the remote log is found again.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, cfg)
	c = client.New("http://" + n.ClientAddr())
	check("after a restart")
	if localSegments() != 2 {
		t.Fatalf("%d local segments after a restart, want 2", localSegments())
	}

	if err := c.DropTable(ctx, "db.t", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return remoteSegments() == 0 })
}

// stopBucketLeader closes the node (of three) that leads bucket 0 of table
// and sets its entry in nodes to nil. It returns its index and the other
// two's.
func stopBucketLeader(t *testing.T, ctx context.Context, c *client.Client, nodes []*Node, table string) (victim int, alive []int) {
	t.Helper()
	layout, err := c.GetTableLayout(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	victim = int(layout[0].Leader) - 1
	if err := nodes[victim].Close(); err != nil {
		t.Fatal(err)
	}
	nodes[victim] = nil
	return victim, []int{(victim + 1) % 3, (victim + 2) % 3}
}

// createBigTable creates db.t for appendBig: one bucket, (id BIGINT NOT
// NULL, s STRING), uncompressed so that segments fill by the bytes
// appended, with the extra properties props. It returns the table id.
func createBigTable(t *testing.T, ctx context.Context, c *client.Client, props map[string]string) int64 {
	t.Helper()
	no := false
	all := map[string]string{"table.log.arrow.compression.type": "NONE"}
	maps.Copy(all, props)
	tableID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT", Nullable: &no}, {Name: "s", Type: "STRING"}}},
		BucketCount: 1,
		Properties:  all,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tableID
}

// appendBig appends batches of 100 rows of ~2 KB of random letters (ids
// from, from+1, ...) to db.t, and returns the next id.
func appendBig(t *testing.T, ctx context.Context, c *client.Client, rng *rand.Rand, from, batches int) int {
	return appendBigWith(t, ctx, c, rng, from, batches, nil)
}

// appendBigWith is appendBig with, in each row, the members extra returns
// (`,"name":value…`; nil: none).
func appendBigWith(t *testing.T, ctx context.Context, c *client.Client, rng *rand.Rand, from, batches int, extra func(*rand.Rand) string) int {
	t.Helper()
	for range batches {
		var rows []string
		for range 100 {
			s := make([]byte, 2000)
			for k := range s {
				s[k] = 'a' + byte(rng.IntN(26))
			}
			more := ""
			if extra != nil {
				more = extra(rng)
			}
			rows = append(rows, fmt.Sprintf(`{"id":%d,"s":%q%s}`, from, s, more))
			from++
		}
		if _, err := c.Append(ctx, "db.t", []byte("["+strings.Join(rows, ",")+"]")); err != nil {
			t.Fatal(err)
		}
	}
	return from
}

// outliveTheLog appends three phases of ~2 MiB to bucket 0 of db.t (with
// appendBigWith's extra members), each followed by a lake pass (lake files
// [0, 1000), [1000, 2000) and [2000, 3000)); waits until retention has
// dropped the closed segments (1 MiB each; the active one stays), and
// checks that a read from offset 0 still returns every row. It returns
// the rows as readAll does, and the next id.
func outliveTheLog(t *testing.T, ctx context.Context, c *client.Client, n *Node, tableID int64, r *replica.Replica, rng *rand.Rand, extra func(*rand.Rand) string) (string, int) {
	t.Helper()
	id := raftmeta.BucketID{TableID: tableID, PartitionID: raftmeta.NoPartition, Bucket: 0}
	tbl, err := n.meta.TableByID(tableID)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for range 3 {
		next = appendBigWith(t, ctx, c, rng, next, 10, extra)
		if _, _, err := n.tierToLake(id, tbl, r); err != nil {
			t.Fatal(err)
		}
	}
	want := readAll(t, ctx, c, "db.t", 1)
	waitFor(t, 30*time.Second, func() bool { return r.LogStartOffset() > 2000 })
	if got := readAll(t, ctx, c, "db.t", 1); got != want {
		t.Fatalf("rows read back from the lake and the log differ from the rows written (%d and %d bytes)", len(got), len(want))
	}
	return want, next
}

// TestClusterTiering: three nodes share a remote directory. The replicas
// upload what the remote log lacks and drop their tiered local segments;
// after the leader stops, tiering goes on where it left off; all rows read
// back from offset 0, and the restarted node drops its old segments too.
func TestClusterTiering(t *testing.T) {
	longCluster(t)
	remote := t.TempDir()
	nodes, cfgs := opsClusterWith(t, 3, func(c *Config) {
		c.Storage.SegmentBytes = 1 << 20
		c.Tiering.RemoteDir, c.Tiering.Interval, c.Tiering.LocalSegments = remote, Duration{100 * time.Millisecond}, 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := retryClient(nodes[0])
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	no := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT", Nullable: &no}, {Name: "s", Type: "STRING"}}},
		BucketCount: 1,
		Properties:  map[string]string{"table.log.arrow.compression.type": "NONE", "table.replication.factor": "3"},
	}); err != nil {
		t.Fatal(err)
	}
	localSegments := func(i int) int {
		m, _ := filepath.Glob(filepath.Join(cfgs[i].DataDir, "buckets", "*", "*", "*", "log", "*.log"))
		return len(m)
	}
	remoteSegments := func() int {
		m, _ := filepath.Glob(filepath.Join(remote, "t*", "p*", "b0", "*.log"))
		return len(m)
	}
	// tiered: the remote log holds at least min segments, the alive nodes
	// at most two local ones (fewer on a replica that caught up from a raft
	// snapshot), and the log reads from offset 0 (through c's node).
	tiered := func(c *client.Client, min int, alive ...int) func() bool {
		return func() bool {
			for _, i := range alive {
				if localSegments(i) > 2 {
					return false
				}
			}
			offs, err := c.ListOffsets(ctx, "db.t", flussv1.ListOffsetsRequest_EARLIEST, 0)
			return remoteSegments() >= min && err == nil && len(offs) == 1 && offs[0].Offset == 0
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	next := appendBig(t, ctx, c, rng, 0, 30)
	waitFor(t, 30*time.Second, tiered(c, 5, 0, 1, 2))
	want := readAll(t, ctx, c, "db.t", 1)

	victim, alive := stopBucketLeader(t, ctx, c, nodes, "db.t")
	c = retryClient(nodes[alive[0]])
	before := remoteSegments()
	appendBig(t, ctx, c, rng, next, 30)
	waitFor(t, 30*time.Second, tiered(c, before+4, alive...))
	all := readAll(t, ctx, c, "db.t", 1)
	if n := strings.Count(all, `"id":`); !strings.HasPrefix(all, strings.TrimSuffix(want, "]")) || n != 6000 {
		t.Fatalf("after failover: %d rows read back, want 6000 starting with the 3000 read before", n)
	}

	// The stopped node comes back with its old segments, catches up and
	// drops what is tiered.
	nodes[victim] = startCluster(t, cfgs[victim])
	cv := retryClient(nodes[victim])
	waitFor(t, 30*time.Second, tiered(cv, before+4, 0, 1, 2))
	if got := readAll(t, ctx, cv, "db.t", 1); got != all {
		t.Fatal("rows read through the restarted node differ")
	}
}

// TestTieringPrimaryKeyChangelog tiers a primary-key table's log (its
// changelog): dropping local segments takes a KV snapshot first, lookups
// keep answering from the KV state, and $changelog still reads every
// change from the start — before and after a restart.
func TestTieringPrimaryKeyChangelog(t *testing.T) {
	longCluster(t)
	dir, remote := t.TempDir(), t.TempDir()
	cfg := testConfig(dir)
	cfg.Storage.SegmentBytes = 1 << 20
	cfg.Tiering.RemoteDir, cfg.Tiering.Interval, cfg.Tiering.LocalSegments = remote, Duration{50 * time.Millisecond}, 1
	n := startNode(t, cfg)
	defer func() { n.Close() }()
	ctx, c := withDB(t, n)
	createPKTable(t, ctx, c, "pk", map[string]string{"table.log.arrow.compression.type": "NONE"})
	rng := rand.New(rand.NewPCG(7, 8))
	const rows = 6000
	for from := 0; from < rows; from += 200 {
		var batch []string
		for i := from; i < from+200; i++ {
			s := make([]byte, 2000)
			for k := range s {
				s[k] = 'a' + byte(rng.IntN(26))
			}
			batch = append(batch, fmt.Sprintf(`{"user_id":%d,"item":%d,"qty":%d,"note":%q}`, i%50, i, i, s))
		}
		if _, err := c.Upsert(ctx, "db.pk", []byte("["+strings.Join(batch, ",")+"]"), nil); err != nil {
			t.Fatal(err)
		}
	}
	dropped := func() float64 {
		body := scrape(t, n)
		return metricValue(t, body, "fluss_tiering_local_segments_dropped_total")
	}
	// ~3 MiB of changelog per bucket in 1 MiB segments: each of the 4
	// buckets drops at least one.
	waitFor(t, 30*time.Second, func() bool { return dropped() >= 4 })

	check := func(when string) {
		t.Helper()
		changes := scanAll(t, ctx, c, "db.pk$changelog")
		seen := make(map[int64]bool, rows)
		for _, ch := range changes {
			item, _ := ch["item"].(float64)
			if ch["_change_type"] != "+I" || seen[int64(item)] {
				t.Fatalf("%s: change %v (repeated, or not an insert)", when, ch["_change_type"])
			}
			seen[int64(item)] = true
		}
		if len(seen) != rows {
			t.Fatalf("%s: $changelog holds %d inserts, want %d", when, len(seen), rows)
		}
		got, err := c.Lookup(ctx, "db.pk", []byte(`[{"user_id":7,"item":5957}]`), []string{"qty"})
		if err != nil || !strings.Contains(string(got), `"qty":5957`) {
			t.Fatalf("%s: lookup = %s, %v", when, got, err)
		}
	}
	check("tiered")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, cfg)
	c = client.New("http://" + n.ClientAddr())
	check("after a restart")
}

// TestTieringExpiresRemoteSegments: table.log.ttl expires tiered segments
// in remote storage as it does local ones, and the log then starts after
// them.
func TestTieringExpiresRemoteSegments(t *testing.T) {
	longCluster(t)
	remote := t.TempDir()
	store, err := tiering.NewDirStore(remote)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir())
	cfg.Storage.SegmentBytes = 1 << 20
	cfg.Storage.RetentionCheckInterval = Duration{100 * time.Millisecond}
	cfg.Tiering.RemoteDir, cfg.Tiering.Interval, cfg.Tiering.LocalSegments = remote, Duration{50 * time.Millisecond}, 1
	n := startNode(t, cfg)
	defer n.Close()
	ctx, c := withDB(t, n)
	tableID := createBigTable(t, ctx, c, map[string]string{"table.log.ttl": "5s"})
	appendBig(t, ctx, c, rand.New(rand.NewPCG(9, 10)), 0, 30)
	remoteSegments := func() int {
		names, err := store.List(tiering.BucketDir(tableID, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	waitFor(t, 20*time.Second, func() bool { return remoteSegments() >= 5 })
	uploaded := remoteSegments()
	// Five seconds after the writes every closed segment, remote or local,
	// has expired; the active one stays.
	waitFor(t, 30*time.Second, func() bool { return remoteSegments() == 0 })
	offs, err := c.ListOffsets(ctx, "db.t", flussv1.ListOffsetsRequest_EARLIEST, 0)
	if err != nil || len(offs) != 1 || offs[0].Offset == 0 {
		t.Fatalf("EARLIEST after expiry = %v, %v; want past 0", offs, err)
	}
	if _, err := c.Fetch(ctx, &flussv1.FetchRequest{Table: "db.t", Bucket: 0, Offset: 0}); codeOf(err) != connect.CodeOutOfRange {
		t.Fatalf("fetch at an expired offset: %v, want out_of_range", err)
	}
	// The pass adds its expired segments to the counter after it deleted
	// the last of them, so the count may trail the listing a moment.
	expired := func() int { return int(metricValue(t, scrape(t, n), "fluss_tiering_remote_segments_expired_total")) }
	waitFor(t, 10*time.Second, func() bool { return expired() >= uploaded })
}

// TestTieringReadRefreshesAStaleListing: a replica's remote listing is
// refreshed once per tiering pass, so it can miss segments other replicas
// uploaded since (a replica that restarted and now leads). A read below the local log start lists the remote log again
// before it answers out_of_range.
func TestTieringReadRefreshesAStaleListing(t *testing.T) {
	remote := t.TempDir()
	cfg := testConfig(t.TempDir())
	cfg.Storage.SegmentBytes = 1 << 20
	cfg.Tiering.RemoteDir, cfg.Tiering.Interval, cfg.Tiering.LocalSegments = remote, Duration{time.Hour}, 0
	n := startNode(t, cfg)
	defer n.Close()
	ctx, c := withDB(t, n)
	no := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT", Nullable: &no}, {Name: "s", Type: "STRING"}}},
		BucketCount: 1,
		Properties:  map[string]string{"table.log.arrow.compression.type": "NONE"},
	}); err != nil {
		t.Fatal(err)
	}
	appendBig(t, ctx, c, rand.New(rand.NewPCG(13, 14)), 0, 20)
	want := readAll(t, ctx, c, "db.t", 1)
	var r *replica.Replica
	for _, x := range n.openReplicas() {
		r = x
	}
	// One pass by hand (the loop waits an hour): upload, drop local copies.
	if st, err := r.Tier(0); err != nil || st.Uploaded < 2 || st.Dropped < 2 {
		t.Fatalf("Tier = %+v, %v", st, err)
	}
	// A remote log that has not listed the store yet: its replica knows of
	// no remote segment until a read makes it look.
	r.SetRemoteLog(tiering.NewRemoteLog(n.remote, r.RemoteLog().Dir()))
	if got := readAll(t, ctx, c, "db.t", 1); got != want {
		t.Fatal("rows read with a stale remote listing differ")
	}
}
