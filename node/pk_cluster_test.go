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
	seed := time.Now().UnixNano()
	if s := os.Getenv("FLUSS_PK_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (rerun with FLUSS_PK_SEED=%d)", seed, seed)
	rnd := rand.New(rand.NewSource(seed))

	nodes, cfgs := startThreeNodes(t, nil)
	retry := client.WithRetry(client.Retry{Attempts: 80, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond})
	clients := make([]*client.Client, 3)
	for i, n := range nodes {
		clients[i] = client.New("http://"+n.ClientAddr(), retry)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := clients[0].CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	createPKTable(t, ctx, clients[0], "cart", map[string]string{"table.replication.factor": "3"})
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
			clients[stopped] = client.New("http://"+n.ClientAddr(), retry)
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
