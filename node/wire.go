package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
	"github.com/fluss-node/fluss-node/logstore/record/filter"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Node-to-node calls (rpc/peer handler names). The formats are below; every
// integer is a varint (signed) or uvarint (unsigned, lengths), byte strings
// are a uvarint length then the bytes. Peers of one cluster run compatible
// binaries; a reply that does not decode is an error, never a panic.
const (
	callHello       = "node.hello"    // static bootstrap: who are you, do you have state
	callMetaOp      = "meta.op"       // a catalog write or a join, run on the metadata leader
	callBucketWrite = "bucket.append" // Append forwarded to the bucket leader
	callBucketFetch = "bucket.fetch"  // Fetch forwarded to the bucket leader
	callBucketOff   = "bucket.offset" // ListOffset forwarded to the bucket leader
	callNodeStats   = "node.stats"    // leaders (and replication health) of this node's replicas, for Layout and DescribeCluster
	callNodeSilence = "node.silence"  // how long this node has not heard from another: failure detection's second opinion
	callNodeFenced  = "node.fenced"   // is this node id fenced? request: uvarint id; reply: empty, or the refusal
)

// ErrBadMessage wraps a node-to-node message that does not decode.
var ErrBadMessage = errors.New("malformed node-to-node message")

// remoteSentinels are the errors that cross a forwarding hop with their
// identity (index+1 on the wire; 0 is success, anything else unknown is an
// internal error with the remote's message). Append only: the index is the
// wire code.
var remoteSentinels = []error{
	rpc.ErrNotLeader, rpc.ErrNoBucketLeader, rpc.ErrBucketNotFound, rpc.ErrOffsetOutOfRange,
	rpc.ErrResourceExhausted, rpc.ErrSequence, rpc.ErrWrongTableKind,
	raftmeta.ErrInvalid, raftmeta.ErrDatabaseNotFound, raftmeta.ErrDatabaseExists,
	raftmeta.ErrDatabaseNotEmpty, raftmeta.ErrTableNotFound, raftmeta.ErrTableExists,
	raftmeta.ErrPartitionNotFound, raftmeta.ErrPartitionExists, raftmeta.ErrNotLeader,
	raftmeta.ErrNoLeader, raftmeta.ErrClosed, raftmeta.ErrNodeNotFound, raftmeta.ErrNoActiveNodes,
	context.DeadlineExceeded, context.Canceled, raftmeta.ErrTooManyPartitions,
	raftmeta.ErrFeatureLevel, raftmeta.ErrNodeIDInUse, rpc.ErrCatalogBehind,
	// Added after the first release of the list; an older node reads these
	// as internal errors with the remote's message.
	raftmeta.ErrNoRoom, rpc.ErrNotConfigured, rpc.ErrUnimplemented, rpc.ErrInvalidRequest, rpc.ErrBadJSON,
	record.ErrBadSchema, record.ErrBadType, record.ErrBadRow, record.ErrRecordMismatch, record.ErrBadBody,
	record.ErrBadCompression, filter.ErrSyntax, filter.ErrUnknownColumn, filter.ErrType,
	arrowipc.ErrMalformed, arrowipc.ErrUnsupported,
	kvstore.ErrBadRow, kvstore.ErrNullKey, kvstore.ErrBadProperty, kvstore.ErrOverflow,
	rpc.ErrBucketNotLost, rpc.ErrNotRestorable,
}

const codeUnknown = 255

// errorCode is the wire code of err (0 for nil).
func errorCode(err error) byte {
	if err == nil {
		return 0
	}
	for i, s := range remoteSentinels {
		if errors.Is(err, s) {
			return byte(i + 1)
		}
	}
	return codeUnknown
}

// remoteError is an error that came back over a forwarding hop: its message
// is the remote's, and it matches the remote's sentinel with errors.Is.
type remoteError struct {
	sentinel error
	msg      string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// decodeError rebuilds an error from its wire code and message.
func decodeError(code byte, msg string) error {
	if code == 0 {
		return nil
	}
	if int(code) <= len(remoteSentinels) {
		return &remoteError{sentinel: remoteSentinels[code-1], msg: msg}
	}
	return errors.New(msg)
}

// ---------------------------------------------------------------- encoder

func appendVarint(dst []byte, v int64) []byte   { return binary.AppendVarint(dst, v) }
func appendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }
func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// ---------------------------------------------------------------- decoder

// reader decodes a message; the first error sticks and later reads return
// zero values, so a decoder checks err once at the end.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: bad %s", ErrBadMessage, what)
	}
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int32(what string) int32 {
	v := r.varint(what)
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(what)
		return 0
	}
	return int32(v)
}

func (r *reader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// bytes returns a sub-slice of the message (aliasing it).
func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(what)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// count reads a list length, refusing one that cannot fit in the rest of
// the message (each element takes at least min bytes).
func (r *reader) count(what string, min int) int {
	n := r.uvarint(what)
	if r.err != nil {
		return 0
	}
	if n > uint64(len(r.b)/min) {
		r.fail(what)
		return 0
	}
	return int(n)
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrBadMessage, len(r.b))
	}
	return r.err
}

// ---------------------------------------------------------------- bucket calls

// bucketReq is a forwarded data-path request. Forwarded requests are never
// forwarded again (the hop limit is one).
//
// The fields are positional on the wire, so calls that came later reuse
// the fields of earlier ones rather than add new: a Lookup's byte budget is
// MaxBytes; a PrefixScan's prefix is Batches[0], its row limit MaxBytes
// and its byte budget Offset. A node that predates a budget ignores it.
type bucketReq struct {
	Bucket    raftmeta.BucketID
	TimeoutMs uint64 // the caller's remaining deadline

	// Append
	WriterID int64
	Seq      int32
	Batches  [][]byte

	// Fetch
	Offset    int64
	MaxBytes  int64
	MaxWaitMs int64

	// ListOffset
	Spec int32
	TsMs int64
}

func appendBucketID(dst []byte, b raftmeta.BucketID) []byte {
	dst = appendVarint(dst, b.TableID)
	dst = appendVarint(dst, b.PartitionID)
	return appendVarint(dst, int64(b.Bucket))
}

func (r *reader) bucketID() raftmeta.BucketID {
	return raftmeta.BucketID{TableID: r.varint("table id"), PartitionID: r.varint("partition id"), Bucket: r.int32("bucket")}
}

// appendBucketReq encodes q (every field; unused ones are zero).
func appendBucketReq(dst []byte, q *bucketReq) []byte {
	dst = appendBucketID(dst, q.Bucket)
	dst = appendUvarint(dst, q.TimeoutMs)
	dst = appendVarint(dst, q.WriterID)
	dst = appendVarint(dst, int64(q.Seq))
	dst = appendUvarint(dst, uint64(len(q.Batches)))
	for _, b := range q.Batches {
		dst = appendBytes(dst, b)
	}
	dst = appendVarint(dst, q.Offset)
	dst = appendVarint(dst, q.MaxBytes)
	dst = appendVarint(dst, q.MaxWaitMs)
	dst = appendVarint(dst, int64(q.Spec))
	return appendVarint(dst, q.TsMs)
}

// decodeBucketReq decodes a bucketReq; its Batches alias b.
func decodeBucketReq(b []byte) (*bucketReq, error) {
	r := &reader{b: b}
	q := &bucketReq{Bucket: r.bucketID(), TimeoutMs: r.uvarint("timeout")}
	q.WriterID = r.varint("writer id")
	q.Seq = r.int32("batch sequence")
	if n := r.count("batch count", 1); n > 0 {
		q.Batches = make([][]byte, n)
		for i := range q.Batches {
			q.Batches[i] = r.bytes("batch")
		}
	}
	q.Offset = r.varint("offset")
	q.MaxBytes = r.varint("max bytes")
	q.MaxWaitMs = r.varint("max wait")
	q.Spec = r.int32("offset spec")
	q.TsMs = r.varint("timestamp")
	return q, r.done()
}

// bucketResp is the answer to a forwarded data-path request.
type bucketResp struct {
	Code   byte   // 0: success; else an errorCode
	Msg    string // the error message
	Leader int32  // on not-leader errors: the leader the remote knows (0 if none)
	// Unsent is set on a not-leader answer given before the request was
	// proposed: sending it to the leader cannot store it twice.
	Unsent bool

	BaseOffset int64 // Append
	Count      int32
	Offset     int64 // ListOffset

	HighWatermark  int64 // Fetch
	LogStartOffset int64
	Batches        [][]byte
}

func appendBucketResp(dst []byte, p *bucketResp) []byte {
	dst = append(dst, p.Code)
	dst = appendBytes(dst, []byte(p.Msg))
	dst = appendVarint(dst, int64(p.Leader))
	unsent := byte(0)
	if p.Unsent {
		unsent = 1
	}
	dst = append(dst, unsent)
	dst = appendVarint(dst, p.BaseOffset)
	dst = appendVarint(dst, int64(p.Count))
	dst = appendVarint(dst, p.Offset)
	dst = appendVarint(dst, p.HighWatermark)
	dst = appendVarint(dst, p.LogStartOffset)
	dst = appendUvarint(dst, uint64(len(p.Batches)))
	for _, b := range p.Batches {
		dst = appendBytes(dst, b)
	}
	return dst
}

// decodeBucketResp decodes a bucketResp; its Batches alias b.
func decodeBucketResp(b []byte) (*bucketResp, error) {
	r := &reader{b: b}
	p := &bucketResp{Code: r.byte("code"), Msg: string(r.bytes("message")), Leader: r.int32("leader")}
	switch r.byte("unsent flag") {
	case 0:
	case 1:
		p.Unsent = true
	default:
		r.fail("unsent flag")
	}
	p.BaseOffset = r.varint("base offset")
	p.Count = r.int32("count")
	p.Offset = r.varint("offset")
	p.HighWatermark = r.varint("high watermark")
	p.LogStartOffset = r.varint("log start offset")
	if n := r.count("batch count", 1); n > 0 {
		p.Batches = make([][]byte, n)
		for i := range p.Batches {
			p.Batches[i] = r.bytes("batch")
		}
	}
	return p, r.done()
}

// ---------------------------------------------------------------- node stats

// nodeStats is what a node reports of its replicas: counts for
// DescribeCluster and the leader of each replica it holds for Layout.
//
// A request body of one byte statsWithReplication asks for Replication
// and the in-sync replicas too; they follow the buckets on the wire.
// Earlier binaries ignore the body and never send the section, and a
// reply without it decodes with Replication nil.
type nodeStats struct {
	Replicas, Leaders int32
	Buckets           []bucketLeader
	Replication       *replicationStats // nil unless asked for
}

// statsWithReplication is the node.stats request body that asks for the
// replication section.
const statsWithReplication = 1

// replicationStats is the replication health of a node's replicas.
type replicationStats struct {
	UnderReplicated int32 // buckets led here with fewer replicas in sync than assigned
	Offline         int32 // replicas assigned to this node that it has not open
}

type bucketLeader struct {
	Bucket raftmeta.BucketID
	Leader raftmeta.NodeID
	InSync []raftmeta.NodeID // with Replication, of a bucket led here: its in-sync replicas
}

func appendNodeStats(dst []byte, s *nodeStats) []byte {
	dst = appendVarint(dst, int64(s.Replicas))
	dst = appendVarint(dst, int64(s.Leaders))
	dst = appendUvarint(dst, uint64(len(s.Buckets)))
	for _, b := range s.Buckets {
		dst = appendBucketID(dst, b.Bucket)
		dst = appendVarint(dst, int64(b.Leader))
	}
	if rs := s.Replication; rs != nil {
		dst = appendVarint(dst, int64(rs.UnderReplicated))
		dst = appendVarint(dst, int64(rs.Offline))
		for _, b := range s.Buckets {
			dst = appendUvarint(dst, uint64(len(b.InSync)))
			for _, id := range b.InSync {
				dst = appendVarint(dst, int64(id))
			}
		}
	}
	return dst
}

func decodeNodeStats(b []byte) (*nodeStats, error) {
	r := &reader{b: b}
	s := &nodeStats{Replicas: r.int32("replicas"), Leaders: r.int32("leaders")}
	if n := r.count("bucket count", 4); n > 0 {
		s.Buckets = make([]bucketLeader, n)
		for i := range s.Buckets {
			s.Buckets[i] = bucketLeader{Bucket: r.bucketID(), Leader: raftmeta.NodeID(r.int32("leader"))}
		}
	}
	if r.err == nil && len(r.b) > 0 {
		s.Replication = &replicationStats{UnderReplicated: r.int32("under-replicated"), Offline: r.int32("offline")}
		for i := range s.Buckets {
			if n := r.count("in-sync count", 1); n > 0 {
				s.Buckets[i].InSync = make([]raftmeta.NodeID, n)
				for j := range s.Buckets[i].InSync {
					s.Buckets[i].InSync[j] = raftmeta.NodeID(r.int32("in-sync replica"))
				}
			}
		}
	}
	return s, r.done()
}

// ---------------------------------------------------------------- node silence

// The node.silence request is a peer address (bytes); the reply is a byte,
// 1 when the answering node pings that address (0: it does not, and the
// rest means nothing), then how long it has not answered, in microseconds
// (uvarint).

func appendSilenceReq(dst []byte, addr raft.ServerAddress) []byte {
	return appendBytes(dst, []byte(addr))
}

func decodeSilenceReq(b []byte) (raft.ServerAddress, error) {
	r := &reader{b: b}
	addr := raft.ServerAddress(r.bytes("address"))
	return addr, r.done()
}

func appendSilence(dst []byte, silence time.Duration, watched bool) []byte {
	if !watched {
		return append(dst, 0, 0)
	}
	return appendUvarint(append(dst, 1), uint64(max(silence, 0)/time.Microsecond))
}

func decodeSilence(b []byte) (time.Duration, bool, error) {
	r := &reader{b: b}
	watched := r.byte("watched")
	us := r.uvarint("silence")
	if r.err == nil && (watched > 1 || us > math.MaxInt64/uint64(time.Microsecond)) {
		r.fail("silence")
	}
	return time.Duration(us) * time.Microsecond, watched == 1, r.done()
}
