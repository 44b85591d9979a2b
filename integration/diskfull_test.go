package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/node/nodetest"
	"golang.org/x/sys/unix"
)

// smallFS mounts a tmpfs of size bytes at a fresh directory and returns it;
// the test is skipped where mounting is not allowed (not root). It is
// unmounted when the test ends, after the nodes started later are killed.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("needs a small filesystem of its own: mounting a tmpfs failed (%v); run as root", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill takes all but leave bytes of dir's filesystem with one file and
// returns its path (remove it to give the space back).
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	size := int64(st.Bavail)*st.Bsize - leave
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if size > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
			t.Fatalf("fallocate %d bytes: %v", size, err)
		}
	}
	return path
}

// diskRows returns n JSON rows of ~1 KiB of incompressible text each,
// numbered from first.
func diskRows(first, n int) []map[string]any {
	rows := make([]map[string]any, n)
	for i := range rows {
		id := first + i
		var sb strings.Builder
		for j := 0; sb.Len() < 1000; j++ {
			fmt.Fprintf(&sb, "%x", uint64(id+1)*0x9E3779B97F4A7C15*uint64(j+1))
		}
		rows[i] = map[string]any{"id": id, "s": sb.String()}
	}
	return rows
}

// appendRows appends n rows numbered from *next to a bucket of table; once
// acknowledged, their ids join *acked and *next moves past them.
func appendRows(addr, table string, bucket, n int, next *int, acked *[]int) error {
	rows := diskRows(*next, n)
	if err := callOnce(addr, "WriteService/Append", map[string]any{"table": table, "bucket": bucket, "rows": rows}, nil); err != nil {
		return err
	}
	for i := range rows {
		*acked = append(*acked, *next+i)
	}
	*next += n
	return nil
}

// appendUntilRefused appends 64 rows at a time to table until a write is
// refused, and returns the refusal.
func appendUntilRefused(t *testing.T, addr, table string, next *int, acked *[]int) error {
	t.Helper()
	for range 2000 {
		if err := appendRows(addr, table, 0, 64, next, acked); err != nil {
			return err
		}
		// At most ~3 MiB between two of the guard's looks at the disk.
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: 2000 appends and none refused", table)
	return nil
}

// checkIDs fails t unless bucket 0 of table holds exactly the ids want, in order.
func checkIDs(t *testing.T, addr, table string, want []int) {
	t.Helper()
	got := fetchAllRaw(t, addr, table, 1)[0]
	if len(got) != len(want) {
		t.Fatalf("%s holds %d rows, want the %d acknowledged", table, len(got), len(want))
	}
	for i, raw := range got {
		var r struct{ ID int }
		if err := json.Unmarshal(raw, &r); err != nil || r.ID != want[i] {
			t.Fatalf("%s row %d: %s, want id %d", table, i, raw, want[i])
		}
	}
}

// metrics returns the node's /metrics page.
func metrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metric returns the value of the unlabelled metric name on the node.
func metric(t *testing.T, addr, name string) string {
	t.Helper()
	for _, line := range strings.Split(metrics(t, addr), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return ""
}

func createDiskTables(t *testing.T, addr string) {
	t.Helper()
	mustCall(t, addr, "AdminService/CreateDatabase", map[string]any{"name": "d"}, nil)
	cols := []map[string]any{{"name": "id", "type": "BIGINT", "nullable": false}, {"name": "s", "type": "STRING"}}
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{"table": "d.log", "schema": map[string]any{"columns": cols}, "bucketCount": 1}, nil)
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{"table": "d.pk", "schema": map[string]any{"columns": cols, "primaryKey": []string{"id"}}, "bucketCount": 1}, nil)
}

// A node whose data directory runs low on space refuses writes with
// resource_exhausted before the disk is full, keeps serving reads and
// stored data, and takes writes again once space is freed.
func TestNearlyFullDiskRefusesWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const reserve = 16 << 20
	dir := smallFS(t, 96<<20)
	p := startNodeWithConfig(t, filepath.Join(dir, "data"), fmt.Sprintf("[storage]\nsegment_bytes = %d\nmin_free_bytes = %d\n", 1<<20, reserve))
	createDiskTables(t, p.addr)
	next := 0
	var acked []int
	for range 4 {
		waitFor(t, 20*time.Second, func() error { return appendRows(p.addr, "d.log", 0, 64, &next, &acked) })
	}
	mustCall(t, p.addr, "WriteService/Upsert", map[string]any{"table": "d.pk", "rows": diskRows(0, 8)}, nil)

	filler := fill(t, dir, reserve+(2<<20)) // 2 MiB to go before the guard refuses
	err := appendUntilRefused(t, p.addr, "d.log", &next, &acked)
	wantCode(t, "append to a nearly full disk", err, "resource_exhausted", "storage.min_free_bytes", "writes are refused until space is freed")
	err = callOnce(p.addr, "WriteService/Upsert", map[string]any{"table": "d.pk", "rows": diskRows(100, 8)}, nil)
	wantCode(t, "upsert to a nearly full disk", err, "resource_exhausted", "storage.min_free_bytes")
	if v := metric(t, p.addr, "fluss_storage_writes_refused"); v != "1" {
		t.Errorf("fluss_storage_writes_refused = %s while refusing, want 1", v)
	}
	checkIDs(t, p.addr, "d.log", acked) // reads go on
	var look struct{ Rows []json.RawMessage }
	mustCall(t, p.addr, "ReadService/Lookup", map[string]any{"table": "d.pk", "keys": []map[string]any{{"id": 3}}}, &look)
	if len(look.Rows) != 1 || !strings.Contains(string(look.Rows[0]), `"id":3`) {
		t.Errorf("lookup while refusing writes: %s", look.Rows)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The guard asks statfs again within 250 ms.
	waitFor(t, 10*time.Second, func() error { return appendRows(p.addr, "d.log", 0, 8, &next, &acked) })
	mustCall(t, p.addr, "WriteService/Upsert", map[string]any{"table": "d.pk", "rows": diskRows(100, 8)}, nil)
	if v := metric(t, p.addr, "fluss_storage_writes_refused"); v != "0" {
		t.Errorf("fluss_storage_writes_refused = %s after space was freed, want 0", v)
	}
	checkIDs(t, p.addr, "d.log", acked)
}

// With the guard off a log write runs into the full disk itself: the
// writer gets resource_exhausted naming it, nothing acknowledged is lost
// or doubled, and the bucket takes writes again once space is freed,
// also after a kill -9 and restart.
func TestFullDiskLosesNothing(t *testing.T) {
	longMultiProcess(t)
	dir := smallFS(t, 64<<20)
	data := filepath.Join(dir, "data")
	config := fmt.Sprintf("[storage]\nsegment_bytes = %d\nmin_free_bytes = 0\n", 1<<20)
	p := startNodeWithConfig(t, data, config)
	createDiskTables(t, p.addr)
	next := 0
	filler := fill(t, dir, 4<<20)
	var acked []int
	err := appendUntilRefused(t, p.addr, "d.log", &next, &acked)
	wantCode(t, "append to a full disk", err, "resource_exhausted", "no space left on device")
	if len(acked) == 0 {
		t.Fatal("no append acknowledged before the disk was full")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The bucket elects itself again.
	waitFor(t, 20*time.Second, func() error { return appendRows(p.addr, "d.log", 0, 8, &next, &acked) })
	checkIDs(t, p.addr, "d.log", acked)

	p.kill()
	p = startNodeWithConfig(t, data, config)
	waitFor(t, 20*time.Second, func() error {
		return callOnce(p.addr, "AdminService/ListOffsets", map[string]any{"table": "d.log", "buckets": []int{0}, "spec": "LATEST"}, nil)
	})
	checkIDs(t, p.addr, "d.log", acked)
}

// A follower whose disk is nearly full refuses new entries instead of
// filling it: the bucket goes on with the other two replicas, the
// follower stays up, and it catches up once space is freed.
func TestFollowerWithNearlyFullDiskFallsBehind(t *testing.T) {
	longMultiProcess(t)
	const reserve = 16 << 20
	small := smallFS(t, 96<<20)
	base := t.TempDir()
	config := filepath.Join(base, "fluss.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("[storage]\nsegment_bytes = %d\nmin_free_bytes = %d\n[raft]\nreplica_max_lag = \"8s\"\n", 1<<20, reserve)), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		dir := filepath.Join(base, fmt.Sprint(i+1))
		if i == 2 {
			dir = filepath.Join(small, "data")
		}
		nodes[i] = &clusterNode{dir: dir, client: nodetest.FreeAddr(), peer: nodetest.FreeAddr(), gossip: nodetest.FreeAddr(), config: config}
		if i > 0 {
			nodes[i].join = []string{nodes[0].peer}
		}
		nodes[i].start(t)
	}
	addr := nodes[0].client
	mustCall(t, addr, "AdminService/CreateDatabase", map[string]any{"name": "d"}, nil)
	cols := []map[string]any{{"name": "id", "type": "BIGINT", "nullable": false}, {"name": "s", "type": "STRING"}}
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{"table": "d.log", "schema": map[string]any{"columns": cols},
		"bucketCount": 3, "properties": map[string]string{"table.replication.factor": "3"}}, nil)
	var layout struct {
		Buckets []struct {
			Leader   int   `json:"leader"`
			Replicas []int `json:"replicas"`
		} `json:"buckets"`
	}
	bucket := -1
	waitFor(t, 30*time.Second, func() error {
		if err := callOnce(addr, "AdminService/GetTableLayout", map[string]any{"table": "d.log"}, &layout); err != nil {
			return err
		}
		for b, l := range layout.Buckets {
			if len(l.Replicas) != 3 || l.Leader == 0 {
				return fmt.Errorf("bucket %d: replicas %v, leader %d", b, l.Replicas, l.Leader)
			}
			if l.Leader != 3 {
				bucket = b
			}
		}
		if bucket < 0 {
			return errors.New("node 3 leads every bucket")
		}
		return nil
	})
	logSize := func(n int) string { return metric(t, nodes[n].client, "fluss_log_size_bytes") }

	filler := fill(t, small, reserve-(4<<20))
	var acked []int
	next := 0
	for range 20 {
		waitFor(t, 20*time.Second, func() error { return appendRows(addr, "d.log", bucket, 64, &next, &acked) })
	}
	if v := metric(t, nodes[2].client, "fluss_storage_writes_refused"); v != "1" {
		t.Errorf("fluss_storage_writes_refused on the full follower = %s, want 1", v)
	}
	if full, other := logSize(2), logSize(1); full == other {
		t.Fatalf("the follower with a nearly full disk stored as much as the others (%s bytes)", full)
	}
	// It answers its leader (heartbeats) but does not keep up: out of sync.
	inSync := func(want ...int) func() error {
		return func() error {
			var lay inSyncLayout
			if err := callOnce(addr, "AdminService/GetTableLayout", map[string]any{"table": "d.log", "inSync": true}, &lay); err != nil {
				return err
			}
			if got := lay.Buckets[bucket].InSync; !slices.Equal(got, want) {
				return fmt.Errorf("bucket %d in sync %v, want %v", bucket, got, want)
			}
			return nil
		}
	}
	waitFor(t, 40*time.Second, inSync(1, 2))

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() error {
		if full, other := logSize(2), logSize(1); full != other {
			return fmt.Errorf("follower holds %s bytes of log, the others %s", full, other)
		}
		return nil
	})
	waitFor(t, 40*time.Second, inSync(1, 2, 3))
	got := fetchAllRaw(t, addr, "d.log", 3)[bucket]
	if len(got) != len(acked) {
		t.Fatalf("bucket %d holds %d rows, want the %d acknowledged", bucket, len(got), len(acked))
	}
}
