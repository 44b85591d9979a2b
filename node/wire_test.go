package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

func TestBucketMessagesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    bucketReq
		p    bucketResp
	}{
		{"zero", bucketReq{}, bucketResp{}},
		{"append", bucketReq{Bucket: raftmeta.BucketID{TableID: 7, PartitionID: 3, Bucket: 5}, TimeoutMs: 1500,
			WriterID: -42, Seq: 2147483647, Batches: [][]byte{{1, 2, 3}, {}, []byte("batch")}},
			bucketResp{BaseOffset: 1 << 40, Count: 12}},
		{"fetch", bucketReq{Bucket: raftmeta.BucketID{TableID: 1}, Offset: 99, MaxBytes: 16 << 20, MaxWaitMs: 30000},
			bucketResp{HighWatermark: 100, LogStartOffset: 3, Batches: [][]byte{[]byte("x"), []byte("yz")}}},
		{"offset", bucketReq{Spec: int32(rpc.OffsetTimestamp), TsMs: -1},
			bucketResp{Offset: 5}},
		{"error", bucketReq{}, bucketResp{Code: 3, Msg: "bucket not found: table 1 bucket 9", Leader: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := decodeBucketReq(appendBucketReq([]byte{}, &tc.q))
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.q.Batches) == 0 {
				tc.q.Batches = nil
			}
			if !reflect.DeepEqual(*q, tc.q) {
				t.Fatalf("request\n got %+v\nwant %+v", *q, tc.q)
			}
			p, err := decodeBucketResp(appendBucketResp(nil, &tc.p))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*p, tc.p) {
				t.Fatalf("response\n got %+v\nwant %+v", *p, tc.p)
			}
		})
	}
}

func TestBucketMessagesRejectGarbage(t *testing.T) {
	good := appendBucketReq(nil, &bucketReq{Bucket: raftmeta.BucketID{TableID: 1}, Batches: [][]byte{[]byte("abc")}})
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"huge count", []byte{2, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"bucket overflows int32", appendVarint(appendVarint(appendVarint(nil, 1), 0), 1<<40)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeBucketReq(tc.b); !errors.Is(err, ErrBadMessage) {
				t.Fatalf("decodeBucketReq: %v, want ErrBadMessage", err)
			}
		})
	}
}

func TestNodeStatsRoundTrip(t *testing.T) {
	s := &nodeStats{Replicas: 3, Leaders: 1, Buckets: []bucketLeader{
		{Bucket: raftmeta.BucketID{TableID: 1, Bucket: 2}, Leader: 3},
		{Bucket: raftmeta.BucketID{TableID: 1, PartitionID: 4, Bucket: 0}, Leader: 0},
	}}
	got, err := decodeNodeStats(appendNodeStats(nil, s))
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("got %+v %v, want %+v", got, err, s)
	}
	if _, err := decodeNodeStats([]byte{2, 2, 5}); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("short stats: %v", err)
	}

	// With the replication section (statsWithReplication).
	s.Replication = &replicationStats{UnderReplicated: 1, Offline: 2}
	s.Buckets[0].InSync = []raftmeta.NodeID{3, 1}
	b := appendNodeStats(nil, s)
	got, err = decodeNodeStats(b)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("with replication: got %+v %v, want %+v", got, err, s)
	}
	for cut := len(b) - 1; cut > len(appendNodeStats(nil, &nodeStats{Replicas: 3, Leaders: 1, Buckets: s.Buckets})); cut-- {
		if _, err := decodeNodeStats(b[:cut]); !errors.Is(err, ErrBadMessage) {
			t.Fatalf("replication section cut to %d of %d bytes: %v", cut, len(b), err)
		}
	}
}

// Errors keep their sentinel (so rpc maps them to the same Connect code)
// and their message across a hop.
func TestRemoteErrors(t *testing.T) {
	for _, sentinel := range remoteSentinels {
		err := fmt.Errorf("context: %w", sentinel)
		got := decodeError(errorCode(err), err.Error())
		if !errors.Is(got, sentinel) || got.Error() != err.Error() {
			t.Fatalf("%v came back as %v", err, got)
		}
	}
	// Every error the client API gives a code of its own crosses a hop
	// with it (a decommission refused for want of room came back as
	// internal through a node that forwarded it to the metadata leader).
	for _, e := range rpc.DomainErrors() {
		if !slices.Contains(remoteSentinels, e) {
			t.Errorf("%q (%T) does not cross a forwarding hop: add it to remoteSentinels", e, e)
		}
	}
	mapped := replicaErrorForTest()
	if got := decodeError(errorCode(mapped), mapped.Error()); !errors.Is(got, rpc.ErrNotLeader) {
		t.Fatalf("mapped not-leader came back as %v", got)
	}
	if errorCode(nil) != 0 || decodeError(0, "") != nil {
		t.Fatal("nil must encode as 0 and back")
	}
	other := errors.New("disk on fire")
	if got := decodeError(errorCode(other), other.Error()); got == nil || got.Error() != "disk on fire" || errors.Is(got, context.Canceled) {
		t.Fatalf("unknown error came back as %v", got)
	}
}

func replicaErrorForTest() error {
	return &mappedError{sentinel: rpc.ErrNotLeader, err: errors.New("bucket 1 is led by 2")}
}

func TestMetaOpJSONRoundTrip(t *testing.T) {
	op := metaOp{Op: opCreateTable, Forwarded: true, TimeoutMs: 5, IgnoreIfExists: true,
		Spec: &raftmeta.TableSpec{Database: "db", Name: "t", BucketCount: 6, Properties: map[string]string{"table.replication.factor": "3"}}}
	b, err := json.Marshal(&op)
	if err != nil {
		t.Fatal(err)
	}
	var got metaOp
	if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, op) {
		t.Fatalf("got %+v %v", got, err)
	}
	add := metaOp{Op: opAddColumns, Database: "db", Name: "t", Columns: []record.Column{
		{Name: "note", Type: record.Type{Kind: record.KindString}, Nullable: true, Comment: "free text"},
		{Name: "price", Type: record.Type{Kind: record.KindDecimal, Precision: 12, Scale: 2}, Nullable: true},
	}}
	if b, err = json.Marshal(&add); err != nil {
		t.Fatal(err)
	}
	got = metaOp{}
	if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, add) {
		t.Fatalf("got %+v %v", got, err)
	}
}

// FuzzNodeMessages feeds arbitrary bytes to every decoder of node-to-node
// messages: they must return an error or a value that re-encodes to the
// same bytes, never panic.
func FuzzNodeMessages(f *testing.F) {
	f.Add(appendBucketReq(nil, &bucketReq{Bucket: raftmeta.BucketID{TableID: 1, Bucket: 2}, Batches: [][]byte{[]byte("abc")}}))
	f.Add(appendBucketResp(nil, &bucketResp{Code: 1, Msg: "not leader", Leader: 3, Batches: [][]byte{{1}}}))
	f.Add(appendNodeStats(nil, &nodeStats{Replicas: 1, Buckets: []bucketLeader{{Leader: 1}}}))
	f.Add(appendNodeStats(nil, &nodeStats{Replicas: 1, Buckets: []bucketLeader{{Leader: 1, InSync: []raftmeta.NodeID{1, 2}}},
		Replication: &replicationStats{UnderReplicated: 1}}))
	f.Add(appendResetReq(nil, raftmeta.BucketID{TableID: 1, Bucket: 2}, 3))
	f.Add(appendSilenceReq(nil, "127.0.0.1:9124"))
	f.Add(appendSilence(nil, 1500*time.Millisecond, true))
	f.Add([]byte(`{"op":"join","node":{"ID":0,"PeerAddr":"127.0.0.1:1"}}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if q, err := decodeBucketReq(b); err == nil {
			if again := appendBucketReq(nil, q); len(again) > len(b) {
				t.Fatalf("request re-encodes longer: %d > %d", len(again), len(b))
			}
		}
		if p, err := decodeBucketResp(b); err == nil {
			if again := appendBucketResp(nil, p); len(again) > len(b) {
				t.Fatalf("response re-encodes longer: %d > %d", len(again), len(b))
			}
		}
		if s, err := decodeNodeStats(b); err == nil {
			if again := appendNodeStats(nil, s); len(again) > len(b) {
				t.Fatalf("stats re-encode longer: %d > %d", len(again), len(b))
			}
		}
		if b2, node, err := decodeResetReq(b); err == nil {
			if again := appendResetReq(nil, b2, node); len(again) > len(b) {
				t.Fatalf("reset request re-encodes longer: %d > %d", len(again), len(b))
			}
		}
		if addr, err := decodeSilenceReq(b); err == nil {
			if again, err := decodeSilenceReq(appendSilenceReq(nil, addr)); err != nil || again != addr {
				t.Fatalf("silence request %q does not round-trip: %q %v", addr, again, err)
			}
		}
		if d, watched, err := decodeSilence(b); err == nil {
			if again, w, err := decodeSilence(appendSilence(nil, d, watched)); err != nil || w != watched || watched && again != d {
				t.Fatalf("silence %v %v does not round-trip: %v %v %v", d, watched, again, w, err)
			}
		}
		var op metaOp
		_ = json.Unmarshal(b, &op)
	})
}
