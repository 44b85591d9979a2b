package node

import (
	"context"
	"testing"
	"time"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc/client"
)

func BenchmarkBucketReqCodec(b *testing.B) {
	q := &bucketReq{Bucket: raftmeta.BucketID{TableID: 1, Bucket: 3}, WriterID: 77, Seq: 9,
		Batches: [][]byte{make([]byte, 64<<10)}}
	buf := appendBucketReq(nil, q)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = appendBucketReq(buf[:0], q)
		if _, err := decodeBucketReq(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClusterAppend appends one small row per op through node 1 of a
// 3-node in-process cluster to a single-replica bucket that node 1 leads
// (local) or that node 2 leads (forwarded: one peer call more).
func BenchmarkClusterAppend(b *testing.B) {
	nodes := make([]*Node, 3)
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	}()
	for i := range 3 {
		cfg := clusterConfig(b.TempDir())
		if i > 0 {
			cfg.Join = []string{nodes[0].peers.Addr()}
		}
		n, err := newStarted(cfg)
		if err != nil {
			b.Fatal(err)
		}
		nodes[i] = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New("http://"+nodes[0].ClientAddr(), client.WithRetry(client.Retry{Attempts: 50, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}))
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		b.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		BucketCount: 3, Properties: map[string]string{"table.replication.factor": "1"}}); err != nil {
		b.Fatal(err)
	}
	layout, err := c.GetTableLayout(ctx, "db.t")
	if err != nil {
		b.Fatal(err)
	}
	bucketOf := map[int32]int32{} // leader node -> bucket
	for _, l := range layout {
		bucketOf[l.Leader] = l.Bucket
	}
	for _, bc := range []struct {
		name   string
		leader int32
	}{{"local", 1}, {"forwarded", 2}} {
		b.Run(bc.name, func(b *testing.B) {
			bucket, ok := bucketOf[bc.leader]
			if !ok {
				b.Fatalf("no bucket led by node %d: %v", bc.leader, layout)
			}
			req := &flussv1.AppendRequest{Table: "db.t", Bucket: &bucket, Rows: []byte(`[{"id":1}]`)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.AppendRequest(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
