package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// TestTieringMovesClosedSegmentsAndReadsThemBack runs one node with a
// remote directory and 1 MiB segments: the closed segments move to the
// remote log, the local copies go (but one), and every row still reads
// back from offset 0 — before and after a restart — with EARLIEST and
// timestamp lookups reaching into the remote log. Dropping the table
// empties its remote log.
func TestTieringMovesClosedSegmentsAndReadsThemBack(t *testing.T) {
	dir, remote := t.TempDir(), t.TempDir()
	cfg := testConfig(dir)
	cfg.Storage.SegmentBytes = 1 << 20
	cfg.Tiering = TieringConfig{RemoteDir: remote, Interval: Duration{50 * time.Millisecond}, LocalSegments: 1}
	n := startNode(t, cfg)
	defer func() { n.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New("http://" + n.ClientAddr())
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	no := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db.t",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "id", Type: "BIGINT", Nullable: &no},
			{Name: "s", Type: "STRING"},
		}},
		BucketCount: 1,
		Properties:  map[string]string{"table.log.arrow.compression.type": "NONE"},
	}); err != nil {
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
		m, _ := filepath.Glob(filepath.Join(remote, "t*", "p*", "b0", "*.log"))
		return len(m)
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
