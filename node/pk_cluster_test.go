package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// TestPKClusterReplayFailover runs a random workload of upserts, partial
// updates and deletes (seed printed; FLUSS_PK_SEED reruns one) against a
// replication-factor-3 PK table on 3 in-process nodes, sending each request
// through a random node (forwarding) and stopping and restarting the node
// that leads the most buckets midway. Afterwards: the table equals a model
// of every acknowledged write; replaying $changelog from offset 0 into an
// empty map reproduces the table; and the three replicas of every bucket
// hold byte-identical KV state.
func TestPKClusterReplayFailover(t *testing.T) {
	longCluster(t)
	seed := time.Now().UnixNano()
	if s := os.Getenv("FLUSS_PK_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (rerun with FLUSS_PK_SEED=%d)", seed, seed)
	rnd := rand.New(rand.NewSource(seed))

	nodes, cfgs, clients, ctx := startCartCluster(t)
	tbl, err := nodes[0].Table(ctx, "db.cart")
	if err != nil {
		t.Fatal(err)
	}

	model := map[string]string{} // "user/item" → "qty|note"
	stopped := -1
	for op := range 240 {
		if op == 120 {
			stopped = mostLeaders(nodes, tbl.ID)
			t.Logf("stopping node %d (index %d)", nodes[stopped].ID(), stopped)
			nodes[stopped].Close()
			nodes[stopped] = nil
		}
		if op == 180 {
			n, err := newStarted(cfgs[stopped])
			if err != nil {
				t.Fatalf("restart: %v", err)
			}
			nodes[stopped] = n
			clients[stopped] = pkClient(n)
			stopped = -1
		}
		ci := rnd.Intn(3)
		for ci == stopped {
			ci = rnd.Intn(3)
		}
		c := clients[ci]
		user, item := rnd.Intn(6), rnd.Intn(5)
		key := fmt.Sprintf("%d/%d", user, item)
		switch k := rnd.Intn(10); {
		case k < 6:
			qty, note := rnd.Intn(100), fmt.Sprintf("n%d", op)
			if _, err := c.Upsert(ctx, "db.cart", fmt.Appendf(nil, `[{"user_id":%d,"item":%d,"qty":%d,"note":%q}]`, user, item, qty, note), nil); err != nil {
				t.Fatalf("op %d upsert: %v", op, err)
			}
			model[key] = fmt.Sprintf("%d|%s", qty, note)
		case k < 8:
			qty := rnd.Intn(100)
			if _, err := c.Upsert(ctx, "db.cart", fmt.Appendf(nil, `[{"user_id":%d,"item":%d,"qty":%d}]`, user, item, qty), []string{"user_id", "item", "qty"}); err != nil {
				t.Fatalf("op %d partial update: %v", op, err)
			}
			note := "<nil>"
			if old, ok := model[key]; ok {
				_, note, _ = cutLast(old)
			}
			model[key] = fmt.Sprintf("%d|%s", qty, note)
		default:
			if _, err := c.Delete(ctx, "db.cart", fmt.Appendf(nil, `[{"user_id":%d,"item":%d}]`, user, item)); err != nil {
				t.Fatalf("op %d delete: %v", op, err)
			}
			delete(model, key)
		}
	}
	var want []string
	for k, v := range model {
		want = append(want, k+"="+v)
	}
	wantS := joinSorted(want)
	if got := limitScanKeys(t, ctx, clients[1], "db.cart"); got != wantS {
		t.Fatalf("table after the workload:\n got %s\nwant %s", got, wantS)
	}
	if got := replayChangelog(t, scanAll(t, ctx, clients[2], "db.cart$changelog")); got != wantS {
		t.Fatalf("$changelog replay:\n got %s\nwant %s", got, wantS)
	}
	// One Lookup of every key through each node: the buckets are led by
	// different nodes, so each request is served partly here, partly
	// forwarded, and answers in key order.
	keys := []byte("[")
	var order []string
	for user := range 6 {
		for item := range 5 {
			if len(order) > 0 {
				keys = append(keys, ',')
			}
			keys = fmt.Appendf(keys, `{"user_id":%d,"item":%d}`, user, item)
			order = append(order, fmt.Sprintf("%d/%d", user, item))
		}
	}
	keys = append(keys, ']')
	for ci, c := range clients {
		out, err := c.Lookup(ctx, "db.cart", keys, []string{"qty", "note"})
		if err != nil {
			t.Fatalf("lookup of every key via node %d: %v", ci, err)
		}
		var rows []map[string]any
		if err := json.Unmarshal(out, &rows); err != nil || len(rows) != len(order) {
			t.Fatalf("lookup via node %d: %d rows (%v) for %d keys", ci, len(rows), err, len(order))
		}
		for i, k := range order {
			want, ok := model[k]
			got := "<none>"
			if rows[i] != nil {
				got = fmt.Sprintf("%v|%v", rows[i]["qty"], rows[i]["note"])
			}
			if !ok {
				want = "<none>"
			}
			if got != want {
				t.Fatalf("lookup via node %d, key %s: %s, want %s", ci, k, got, want)
			}
		}
	}
	// Every replica ends with the same KV bytes.
	for b := int32(0); b < tbl.BucketCount; b++ {
		id := raftmeta.BucketID{TableID: tbl.ID, Bucket: b}
		waitFor(t, 20*time.Second, func() bool {
			var ref []byte
			for i, n := range nodes {
				got := kvState(t, n, id)
				if i == 0 {
					ref = got
				} else if !bytes.Equal(got, ref) {
					return false
				}
			}
			return true
		})
	}
}

// startCartCluster starts three in-process nodes, a retrying client of
// each, and creates db.cart (createPKTable) with replication factor 3.
func startCartCluster(t *testing.T) ([]*Node, []Config, []*client.Client, context.Context) {
	t.Helper()
	nodes, cfgs := startThreeNodes(t, nil)
	clients := make([]*client.Client, 3)
	for i, n := range nodes {
		clients[i] = pkClient(n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	if err := clients[0].CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	createPKTable(t, ctx, clients[0], "cart", map[string]string{"table.replication.factor": "3"})
	return nodes, cfgs, clients, ctx
}

// pkClient is a client of node n that retries through failovers.
func pkClient(n *Node) *client.Client {
	return client.New("http://"+n.ClientAddr(), client.WithRetry(client.Retry{Attempts: 80, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}))
}

func cutLast(v string) (string, string, bool) {
	for i := len(v) - 1; i >= 0; i-- {
		if v[i] == '|' {
			return v[:i], v[i+1:], true
		}
	}
	return v, "", false
}

func joinSorted(s []string) string {
	out := sortedCopy(s)
	b := bytes.Buffer{}
	for i, v := range out {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(v)
	}
	return b.String()
}

// mostLeaders is the index of the node leading the most buckets of table.
func mostLeaders(nodes []*Node, table int64) int {
	best, bestN := 0, -1
	for i, n := range nodes {
		k := 0
		n.mu.Lock()
		for id, r := range n.replicas {
			if id.TableID == table && r.IsLeader() {
				k++
			}
		}
		n.mu.Unlock()
		if k > bestN {
			best, bestN = i, k
		}
	}
	return best
}

// kvState is a replica's KV state as its snapshot stream (nil if the node
// has no open store).
func kvState(t *testing.T, n *Node, id raftmeta.BucketID) []byte {
	t.Helper()
	n.kvMu.Lock()
	st := n.kv
	n.kvMu.Unlock()
	if st == nil {
		return nil
	}
	p, err := kvPrefix(id)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := st.Replica(p, nil).Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPKAddColumns: a column added to a replicated primary-key table.
// Rows written before read the new column as null, whole-row and partial
// writes of it merge with them, and every read path (Lookup through each
// node, LimitScan, $changelog, $binlog) sees the same rows; the replicas
// keep byte-identical KV state, and a restarted node serves the new
// version.
func TestPKAddColumns(t *testing.T) {
	nodes, cfgs, clients, ctx := startCartCluster(t)
	for u := range 4 {
		if _, err := clients[u%3].Upsert(ctx, "db.cart", fmt.Appendf(nil, `[{"user_id":%d,"item":0,"qty":%d,"note":"v1"}]`, u, u), nil); err != nil {
			t.Fatal(err)
		}
	}
	if sid, err := clients[1].AddColumns(ctx, "db.cart", &flussv1.Column{Name: "price", Type: "DOUBLE"}); err != nil || sid != 2 {
		t.Fatalf("AddColumns on a primary-key table = %d, %v", sid, err)
	}
	waitFor(t, 10*time.Second, func() bool {
		for _, n := range nodes {
			if tb, err := n.meta.TableByName("db", "cart"); err != nil || tb.Schema().ID != 2 {
				return false
			}
		}
		return true
	})
	writes := []struct {
		rows   string
		target []string
	}{
		{`[{"user_id":0,"item":0,"qty":10,"note":"v2","price":1.5}]`, nil},             // whole row
		{`[{"user_id":1,"item":0,"price":2.5}]`, []string{"user_id", "item", "price"}}, // the new column only
		{`[{"user_id":9,"item":9,"qty":9,"note":"new","price":3}]`, nil},               // a new key
		{`[{"user_id":3,"item":0,"qty":30,"note":"no price"}]`, nil},                   // without it: null
		{`[{"user_id":0,"item":0,"qty":11}]`, []string{"user_id", "item", "qty"}},      // keeps the price
	}
	for i, w := range writes {
		if _, err := clients[(i+2)%3].Upsert(ctx, "db.cart", []byte(w.rows), w.target); err != nil {
			t.Fatalf("write %d (%s): %v", i, w.rows, err)
		}
	}
	want := map[string]string{
		"0/0": "11|v2|1.5", "1/0": "1|v1|2.5", "2/0": "2|v1|<nil>", "3/0": "30|no price|<nil>", "9/9": "9|new|3",
	}
	keys := []byte(`[{"user_id":0,"item":0},{"user_id":1,"item":0},{"user_id":2,"item":0},{"user_id":3,"item":0},{"user_id":9,"item":9}]`)
	order := []string{"0/0", "1/0", "2/0", "3/0", "9/9"}
	lookupAll := func(ci int, c *client.Client) {
		t.Helper()
		out, err := c.Lookup(ctx, "db.cart", keys, []string{"qty", "note", "price"})
		if err != nil {
			t.Fatalf("lookup via node %d: %v", ci, err)
		}
		var rows []map[string]any
		if err := json.Unmarshal(out, &rows); err != nil || len(rows) != len(order) {
			t.Fatalf("lookup via node %d: %s (%v)", ci, out, err)
		}
		for i, k := range order {
			got := fmt.Sprintf("%v|%v|%v", rows[i]["qty"], rows[i]["note"], rows[i]["price"])
			if got != want[k] {
				t.Fatalf("lookup via node %d, key %s: %s, want %s", ci, k, got, want[k])
			}
		}
	}
	for ci, c := range clients {
		lookupAll(ci, c)
	}
	b, err := clients[0].LimitScan(ctx, "db.cart", nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != len(want) {
		t.Fatalf("LimitScan: %s (%v)", b, err)
	}
	for _, r := range rows {
		k := fmt.Sprintf("%v/%v", r["user_id"], r["item"])
		if got := fmt.Sprintf("%v|%v|%v", r["qty"], r["note"], r["price"]); got != want[k] {
			t.Fatalf("LimitScan row %s: %s, want %s", k, got, want[k])
		}
	}
	// The changelog replays to the table, the new column included; the
	// records written before the change read it as null.
	state := map[string]string{}
	for _, r := range scanAll(t, ctx, clients[2], "db.cart$changelog") {
		k := fmt.Sprintf("%v/%v", r["user_id"], r["item"])
		if _, ok := r["price"]; !ok {
			t.Fatalf("$changelog row without the new column: %v", r)
		}
		switch r["_change_type"] {
		case "+I", "+U":
			state[k] = fmt.Sprintf("%v|%v|%v", r["qty"], r["note"], r["price"])
		case "-D":
			delete(state, k)
		}
	}
	if fmt.Sprint(state) != fmt.Sprint(want) {
		t.Fatalf("$changelog replays to\n%v\nwant\n%v", state, want)
	}
	binlog := scanAll(t, ctx, clients[1], "db.cart$binlog")
	if n := len(binlog); n != 4+len(writes) {
		t.Fatalf("$binlog has %d rows, want %d", n, 4+len(writes))
	}
	// The last write to 0/0 changed qty only: both images carry the price.
	var last map[string]any
	for _, r := range binlog {
		if after, _ := r["after"].(map[string]any); after != nil && fmt.Sprint(after["user_id"], after["item"]) == "0 0" {
			last = r
		}
	}
	before, _ := last["before"].(map[string]any)
	after, _ := last["after"].(map[string]any)
	if last["_change_type"] != "update" || fmt.Sprint(before["qty"], before["price"], after["qty"], after["price"]) != "10 1.5 11 1.5" {
		t.Fatalf("last $binlog row of 0/0: %v, want an update of qty 10 → 11 with price 1.5", last)
	}
	tbl, err := nodes[0].meta.TableByName("db", "cart")
	if err != nil {
		t.Fatal(err)
	}
	checkKVIdentical := func() {
		t.Helper()
		for b := int32(0); b < tbl.BucketCount; b++ {
			id := raftmeta.BucketID{TableID: tbl.ID, Bucket: b}
			waitFor(t, 20*time.Second, func() bool {
				ref := kvState(t, nodes[0], id)
				return bytes.Equal(kvState(t, nodes[1], id), ref) && bytes.Equal(kvState(t, nodes[2], id), ref)
			})
		}
	}
	checkKVIdentical()
	// A restarted node opens its replicas with the table's latest version.
	nodes[2].Close()
	n, err := newStarted(cfgs[2])
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	nodes[2] = n
	clients[2] = pkClient(n)
	if _, err := clients[2].Upsert(ctx, "db.cart", []byte(`[{"user_id":2,"item":0,"price":4}]`), []string{"user_id", "item", "price"}); err != nil {
		t.Fatal(err)
	}
	want["2/0"] = "2|v1|4"
	for ci, c := range clients {
		lookupAll(ci, c)
	}
	checkKVIdentical()
}
