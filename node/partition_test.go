package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc/client"
)

func listPartitions(t *testing.T, ctx context.Context, c *client.Client, table string) []string {
	t.Helper()
	ps, err := c.ListPartitions(ctx, table, nil)
	if err != nil {
		t.Fatalf("list partitions of %s: %v", table, err)
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.GetName())
	}
	return names
}

// TestPartitionedPKTable drives a primary-key table partitioned by day
// through one node: upserts create the partitions their rows name, lookups
// and deletes find rows by their partition and touch no other (nor create
// one), the changelog of every partition replays to the table, a dropped
// partition's replicas and rows are gone, and everything survives a
// restart.
func TestPartitionedPKTable(t *testing.T) {
	longCluster(t)
	dir := t.TempDir()
	cfg := testConfig(dir)
	n := startNode(t, cfg)
	defer func() { n.Close() }()
	ctx, c := withDB(t, n)
	no := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db.cart",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "day", Type: "STRING", Nullable: &no},
			{Name: "user_id", Type: "BIGINT", Nullable: &no},
			{Name: "item", Type: "INT", Nullable: &no},
			{Name: "qty", Type: "BIGINT"},
		}, PrimaryKey: []string{"day", "user_id", "item"}},
		PartitionKeys: []string{"day"},
		BucketKeys:    []string{"user_id"},
		BucketCount:   2,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "db.cart", []byte(`[
		{"day":"d1","user_id":1,"item":10,"qty":1},
		{"day":"d1","user_id":1,"item":11,"qty":2},
		{"day":"d2","user_id":1,"item":10,"qty":3},
		{"day":"d2","user_id":2,"item":10,"qty":4}]`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "db.cart", []byte(`[{"day":"d2","user_id":1,"item":10,"qty":30}]`), nil); err != nil {
		t.Fatal(err)
	}
	if got := listPartitions(t, ctx, c, "db.cart"); !slices.Equal(got, []string{"d1", "d2"}) {
		t.Fatalf("partitions %v, want [d1 d2]", got)
	}
	lookup := func(keys string) string {
		t.Helper()
		got, err := c.Lookup(ctx, "db.cart", []byte(keys), []string{"day", "item", "qty"})
		if err != nil {
			t.Fatalf("lookup %s: %v", keys, err)
		}
		return string(got)
	}
	// The same (user_id, item) in two partitions are two rows; a key of a
	// partition that does not exist has no row.
	if got, want := lookup(`[{"day":"d1","user_id":1,"item":10},{"day":"d2","user_id":1,"item":10},{"day":"d9","user_id":1,"item":10}]`),
		`[{"day":"d1","item":10,"qty":1},{"day":"d2","item":10,"qty":30},null]`; got != want {
		t.Fatalf("lookup = %s, want %s", got, want)
	}
	res, err := c.PrefixLookup(ctx, "db.cart", []byte(`[{"user_id":1,"day":"d1"},{"user_id":1,"day":"d9"}]`), []string{"item"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s %s", res[0].GetRows(), res[1].GetRows()); got != `[{"item":10},{"item":11}] []` {
		t.Fatalf("prefix lookup = %s", got)
	}
	// Deleting in a partition that does not exist deletes nothing and
	// creates nothing.
	if _, err := c.Delete(ctx, "db.cart", []byte(`[{"day":"d1","user_id":1,"item":11},{"day":"d9","user_id":1,"item":11}]`)); err != nil {
		t.Fatal(err)
	}
	if got := listPartitions(t, ctx, c, "db.cart"); !slices.Equal(got, []string{"d1", "d2"}) {
		t.Fatalf("partitions after delete %v, want [d1 d2]", got)
	}
	// The changelog of all partitions replays to the table.
	log := scanAll(t, ctx, c, "db.cart$changelog")
	state := map[string]string{}
	for _, r := range log {
		k := fmt.Sprintf("%v/%v/%v", r["day"], r["user_id"], r["item"])
		switch r["_change_type"] {
		case "+I", "+U":
			state[k] = fmt.Sprint(r["qty"])
		case "-D":
			delete(state, k)
		}
	}
	if got, want := fmt.Sprint(state), "map[d1/1/10:1 d2/1/10:30 d2/2/10:4]"; got != want {
		t.Fatalf("changelog replays to %s, want %s", got, want)
	}

	// Drop d1: its replicas close and its rows are gone, also for a new
	// partition of the same name.
	tbl, err := n.meta.TableByName("db", "cart")
	if err != nil {
		t.Fatal(err)
	}
	var d1 []raftmeta.BucketID
	for _, a := range n.meta.AssignmentsForTable(tbl.ID) {
		if p, _ := n.meta.FSM().PartitionByName(tbl.ID, "d1"); p != nil && a.PartitionID == p.ID {
			d1 = append(d1, a.BucketID)
		}
	}
	if len(d1) != 2 {
		t.Fatalf("partition d1 has buckets %v, want 2", d1)
	}
	if err := c.DropPartition(ctx, "db.cart", map[string]string{"day": "d1"}, false); err != nil {
		t.Fatal(err)
	}
	// Its replicas close and nothing of it is left on disk: no bucket,
	// nor partition directory.
	waitFor(t, 10*time.Second, func() bool {
		for _, b := range d1 {
			if n.replica(b) != nil {
				return false
			}
		}
		_, err := os.Stat(filepath.Dir(n.bucketDir(d1[0])))
		return os.IsNotExist(err)
	})
	if _, err := c.LimitScanRequest(ctx, &flussv1.LimitScanRequest{Table: "db.cart", Partition: "d1", Limit: 10}); codeOf(err) != connect.CodeNotFound {
		t.Fatalf("limit scan of a dropped partition: %v, want not_found", err)
	}
	if p, err := c.CreatePartition(ctx, "db.cart", map[string]string{"day": "d1"}, false); err != nil || p.GetName() != "d1" {
		t.Fatalf("re-create partition d1: %v, %v", p, err)
	}
	if got, want := lookup(`[{"day":"d1","user_id":1,"item":10}]`), `[null]`; got != want {
		t.Fatalf("lookup in the re-created partition = %s, want %s", got, want)
	}

	// Restart: the partitions and their rows are back.
	n.Close()
	n = startNode(t, cfg)
	c = client.New("http://" + n.ClientAddr())
	if got := listPartitions(t, ctx, c, "db.cart"); !slices.Equal(got, []string{"d1", "d2"}) {
		t.Fatalf("partitions after restart %v, want [d1 d2]", got)
	}
	if got, want := lookup(`[{"day":"d2","user_id":1,"item":10},{"day":"d2","user_id":2,"item":10}]`), `[{"day":"d2","item":10,"qty":30},{"day":"d2","item":10,"qty":4}]`; got != want {
		t.Fatalf("lookup after restart = %s, want %s", got, want)
	}
}

// TestAutoPartition: the controller creates an auto-partitioned table's
// partitions ahead and drops the ones past retention, never one whose
// value is not a time of the table's unit; a partition already past
// retention is refused rather than created and dropped with its rows. The
// controller's clock runs ten days ahead of the catalog's.
func TestAutoPartition(t *testing.T) {
	ahead := time.Now().UTC().AddDate(0, 0, 10)
	n, err := New(testConfig(t.TempDir()), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	n.gossipProfile = "local"
	n.autoPartitionNow = func() time.Time { return ahead }
	if err := n.Start(context.Background()); err != nil {
		n.Close()
		t.Fatal(err)
	}
	defer n.Close()
	ctx, c := withDB(t, n)
	no := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db.ev",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "id", Type: "BIGINT"}, {Name: "dt", Type: "STRING", Nullable: &no},
		}},
		PartitionKeys: []string{"dt"},
		BucketCount:   1,
		Properties: map[string]string{
			"table.auto-partition.enabled":       "true",
			"table.auto-partition.time-unit":     "DAY",
			"table.auto-partition.num-precreate": "3",
			"table.auto-partition.num-retention": "1",
		},
	}); err != nil {
		t.Fatal(err)
	}
	create := func(v string) error {
		_, err := c.Admin().CreatePartition(ctx, connect.NewRequest(&flussv1.CreatePartitionRequest{Table: "db.ev", Values: map[string]string{"dt": v}}))
		return err
	}
	day := func(t time.Time, d int) string { return t.AddDate(0, 0, d).Format("20060102") }
	now := time.Now().UTC()
	if err := create("20000101"); codeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("create a partition past retention: %v, want invalid_argument about retention", err)
	}
	// Today's partition is within retention for the catalog's clock, and
	// past it for the controller's: the controller drops it.
	for _, v := range []string{day(now, 0), "manual"} {
		if err := create(v); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{day(ahead, 0), day(ahead, 1), day(ahead, 2), "manual"}
	var got []string
	waitFor(t, 20*time.Second, func() bool {
		got = listPartitions(t, ctx, c, "db.ev")
		return slices.Equal(got, want)
	})
	// The precreated partitions take writes at once.
	row, _ := json.Marshal([]map[string]any{{"id": 1, "dt": want[1]}})
	res, err := c.Append(ctx, "db.ev", row)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].GetPartition() != want[1] || res[0].GetCount() != 1 {
		t.Fatalf("append to %s: %v", want[1], res)
	}
}

// TestKVPrefix: every bucket gets its own 8-byte badger prefix; buckets of
// unpartitioned tables keep the prefixes earlier builds wrote.
func TestKVPrefix(t *testing.T) {
	for _, tc := range []struct {
		b    raftmeta.BucketID
		want uint64
		ok   bool
	}{
		{raftmeta.BucketID{TableID: 1, Bucket: 0}, 1 << 32, true},
		{raftmeta.BucketID{TableID: 3, Bucket: 7}, 3<<32 | 7, true},
		{raftmeta.BucketID{TableID: 3, PartitionID: 1, Bucket: 7}, 1<<63 | 3<<40 | 1<<12 | 7, true},
		{raftmeta.BucketID{TableID: 1<<23 - 1, PartitionID: 1<<28 - 1, Bucket: 4095}, 1<<63 | (1<<23-1)<<40 | (1<<28-1)<<12 | 4095, true},
		{raftmeta.BucketID{TableID: 1 << 23, PartitionID: 1, Bucket: 0}, 0, false},
		{raftmeta.BucketID{TableID: 1, PartitionID: 1 << 28, Bucket: 0}, 0, false},
		{raftmeta.BucketID{TableID: 1, PartitionID: 1, Bucket: 4096}, 0, false},
		{raftmeta.BucketID{TableID: 1 << 31, Bucket: 0}, 0, false},
		{raftmeta.BucketID{TableID: 1, Bucket: -1}, 0, false},
	} {
		got, err := kvPrefix(tc.b)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("kvPrefix(%+v) = %#x, %v; want %#x, ok %v", tc.b, got, err, tc.want, tc.ok)
		}
	}
}

// TestPartitionsNeedTheFeatureLevel: while an alive node runs a binary
// without partitioned tables (it gossips feature level 0), no partition is
// created, by CreatePartition or by a write (failed_precondition, nothing
// stored); once that node is gone (upgraded), partitions are created. The
// same for dictionary-encoded columns (a later level), by CreateTable and
// AlterTable, for changing table properties, and for decommissioning a
// node.
func TestPartitionsNeedTheFeatureLevel(t *testing.T) {
	nodes, _ := opsCluster(t, 2) // the metadata quorum outlives the old node
	first := nodes[0]
	cfg := clusterConfig(t.TempDir())
	cfg.Join = []string{first.peers.Addr()}
	old, err := New(cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	old.gossipProfile = membership.ProfileLocal
	old.featureLevel = 0 // a binary from before partitioned tables
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	waitFor(t, 20*time.Second, func() bool { return len(first.members()) == 3 && first.clusterFeatureLevel() == 0 })

	c := retryClient(first)
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	no := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:         "db.ev",
		Schema:        &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}, {Name: "dt", Type: "STRING", Nullable: &no}}},
		PartitionKeys: []string{"dt"},
	}); err != nil {
		t.Fatal(err)
	}
	create := func() error {
		_, err := c.Admin().CreatePartition(ctx, connect.NewRequest(&flussv1.CreatePartitionRequest{Table: "db.ev", Values: map[string]string{"dt": "a"}}))
		return err
	}
	if err := create(); codeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "feature level") {
		t.Fatalf("create a partition next to an old node: %v, want failed_precondition", err)
	}
	if _, err := c.Append(ctx, "db.ev", []byte(`[{"id":1,"dt":"a"}]`)); codeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("append creating a partition next to an old node: %v, want failed_precondition", err)
	}
	if got := listPartitions(t, ctx, c, "db.ev"); len(got) != 0 {
		t.Fatalf("partitions %v after refused creates", got)
	}
	dictTable := func() error {
		_, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
			Table:  "db.dict",
			Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}, {Name: "kind", Type: "STRING", Dictionary: true}}},
		})
		return err
	}
	addDict := func() error {
		_, err := c.Admin().AlterTable(ctx, connect.NewRequest(&flussv1.AlterTableRequest{Table: "db.ev",
			AddColumns: []*flussv1.Column{{Name: "kind", Type: "STRING", Dictionary: true}}}))
		return err
	}
	setTTL := func() error { return c.SetTableProperties(ctx, "db.ev", map[string]string{"table.log.ttl": "1d"}) }
	createPKTable(t, ctx, c, "cart", nil)
	addPKColumn := func() error {
		_, err := c.AddColumns(ctx, "db.cart", &flussv1.Column{Name: "price", Type: "DOUBLE"})
		return err
	}
	calls := map[string]func() error{"create a dictionary table": dictTable, "add a dictionary column": addDict, "change a property": setTTL,
		"add a column to a primary-key table": addPKColumn}
	for what, call := range calls {
		if err := call(); codeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "feature level") {
			t.Fatalf("%s next to an old node: %v, want failed_precondition", what, err)
		}
	}
	// And no node is decommissioned: the old node could not apply the state.
	_, err = c.Admin().DecommissionNode(ctx, connect.NewRequest(&flussv1.DecommissionNodeRequest{NodeId: 2}))
	if codeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "feature level") {
		t.Fatalf("decommission next to an old node: %v, want failed_precondition", err)
	}
	if st := nodeState(first, 2); st != raftmeta.NodeActive {
		t.Fatalf("node 2 is %q after a refused decommission", st)
	}
	// The old node leaves (to be upgraded): the alive nodes all support it.
	old.Close()
	waitFor(t, 20*time.Second, func() bool { return first.clusterFeatureLevel() == featureLevel })
	if err := create(); err != nil {
		t.Fatalf("create a partition once every alive node supports it: %v", err)
	}
	for what, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s once every alive node supports it: %v", what, err)
		}
	}
	// Retention reads the changed property on its next pass.
	tb, err := first.meta.TableByName("db", "ev")
	if err != nil {
		t.Fatal(err)
	}
	if got := first.tableTTL(tb.ID); got != 24*time.Hour {
		t.Fatalf("table.log.ttl after AlterTable: retention uses %v, want 24h", got)
	}
}
