package rpc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/logstore/record"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Partitioned tables. A partition is a set of buckets of its own, named by
// its partition-key values (raftmeta.PartitionName). Reads name the
// partition; writes and key lookups route each row by its partition-key
// values, and writes create a partition that does not exist yet (Fluss's
// dynamic partition creation).

func partitionToProto(p *raftmeta.Partition) *flussv1.Partition {
	return &flussv1.Partition{Name: p.Name, Id: p.ID, Values: p.Values}
}

// partitionedTable resolves a table that must be partitioned, for op.
func (s *service) partitionedTable(ctx context.Context, name, op string) (*raftmeta.Table, error) {
	t, ref, err := s.table(ctx, name)
	if err != nil {
		return nil, err
	}
	if ref.Virtual != "" {
		return nil, fmt.Errorf("%w: %s on %q: name the table, %s", ErrInvalidRequest, op, name, ref.full())
	}
	if len(t.PartitionKeys) == 0 {
		return nil, fmt.Errorf("%w: %s: table %s is not partitioned", ErrInvalidRequest, op, t.FullName())
	}
	return t, nil
}

func (s *service) CreatePartition(ctx context.Context, req *connect.Request[flussv1.CreatePartitionRequest]) (*connect.Response[flussv1.CreatePartitionResponse], error) {
	m := req.Msg
	t, err := s.partitionedTable(ctx, m.GetTable(), "CreatePartition")
	if err != nil {
		return nil, err
	}
	if err := checkValueLengths(t, m.GetValues()); err != nil {
		return nil, err
	}
	p, err := s.b.CreatePartition(ctx, t.FullName(), m.GetValues(), m.GetIgnoreIfExists())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&flussv1.CreatePartitionResponse{Partitions: []*flussv1.Partition{partitionToProto(p)}}), nil
}

// checkValueLengths refuses a partition value longer than its key column
// (VARCHAR(n)) allows: no row could go to that partition. The check is
// made here, before the command is proposed, and not in
// raftmeta.PartitionName: the metadata FSM applies that, and a check
// added there would make nodes of two versions apply one command apart.
func checkValueLengths(t *raftmeta.Table, values map[string]string) error {
	sch := t.Schema()
	for k, v := range values {
		if c := sch.Index(k); c >= 0 {
			if err := sch.Columns[c].Type.CheckLength(v); err != nil {
				return fmt.Errorf("%w: table %s: partition value of key %q: %v", ErrInvalidRequest, t.FullName(), k, err)
			}
		}
	}
	return nil
}

func (s *service) DropPartition(ctx context.Context, req *connect.Request[flussv1.DropPartitionRequest]) (*connect.Response[flussv1.DropPartitionResponse], error) {
	m := req.Msg
	t, err := s.partitionedTable(ctx, m.GetTable(), "DropPartition")
	if err != nil {
		return nil, err
	}
	name, err := raftmeta.PartitionName(t, m.GetValues())
	if err != nil {
		return nil, err
	}
	p, err := s.b.Partition(ctx, t.ID, name)
	if err != nil && !(errors.Is(err, raftmeta.ErrPartitionNotFound) && m.GetIgnoreIfNotExists()) {
		return nil, err
	}
	if err := s.b.DropPartition(ctx, t.FullName(), m.GetValues(), m.GetIgnoreIfNotExists()); err != nil {
		return nil, err
	}
	out := &flussv1.DropPartitionResponse{}
	if p != nil {
		out.Partitions = []*flussv1.Partition{partitionToProto(p)}
	}
	return connect.NewResponse(out), nil
}

// ListPartitions lists a table's partitions by name; with values, only
// those whose values include them.
func (s *service) ListPartitions(ctx context.Context, req *connect.Request[flussv1.ListPartitionsRequest]) (*connect.Response[flussv1.ListPartitionsResponse], error) {
	m := req.Msg
	t, err := s.partitionedTable(ctx, m.GetTable(), "ListPartitions")
	if err != nil {
		return nil, err
	}
	for k := range m.GetValues() {
		if !slices.Contains(t.PartitionKeys, k) {
			return nil, fmt.Errorf("%w: ListPartitions: %q is not a partition key of %s (partition keys: %v)", ErrInvalidRequest, k, t.FullName(), t.PartitionKeys)
		}
	}
	ps, err := s.b.Partitions(ctx, t.ID)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", t.FullName(), err)
	}
	out := &flussv1.ListPartitionsResponse{}
next:
	for _, p := range ps {
		for k, v := range m.GetValues() {
			if p.Values[k] != v {
				continue next
			}
		}
		out.Partitions = append(out.Partitions, partitionToProto(p))
	}
	return connect.NewResponse(out), nil
}

// namedPartition resolves the partition a read or a bucket-addressed
// write names: none (nil) for an unpartitioned table, which must name
// none; the named, existing partition of a partitioned table, which must
// name one.
func (s *service) namedPartition(ctx context.Context, t *raftmeta.Table, name string) (*raftmeta.Partition, error) {
	if len(t.PartitionKeys) == 0 {
		if name != "" {
			return nil, fmt.Errorf("%w: table %s is not partitioned; leave partition empty (got %s)", ErrInvalidRequest, t.FullName(), quoteClipped(name))
		}
		return nil, nil
	}
	if name == "" {
		return nil, fmt.Errorf("%w: table %s is partitioned by %v: name a partition (ListPartitions lists them)", ErrInvalidRequest, t.FullName(), t.PartitionKeys)
	}
	p, err := s.b.Partition(ctx, t.ID, name)
	if err != nil {
		return nil, fmt.Errorf("table %s, partition %s: %w", t.FullName(), quoteClipped(name), err)
	}
	return p, nil
}

// bucketOf is the id of bucket b of t in partition p (nil: unpartitioned).
func bucketOf(t *raftmeta.Table, p *raftmeta.Partition, b int32) raftmeta.BucketID {
	id := raftmeta.BucketID{TableID: t.ID, Bucket: b}
	if p != nil {
		id.PartitionID = p.ID
	}
	return id
}

// partitionName is p's name, "" for none.
func partitionName(p *raftmeta.Partition) string {
	if p == nil {
		return ""
	}
	return p.Name
}

// where names a bucket of t (and its partition) in an error message.
func where(t *raftmeta.Table, p *raftmeta.Partition, b int32) string {
	if p == nil {
		return fmt.Sprintf("%s bucket %d", t.FullName(), b)
	}
	return fmt.Sprintf("%s partition %s bucket %d", t.FullName(), p.Name, b)
}

// partRows is the rows of a request that belong to one partition.
type partRows struct {
	part *raftmeta.Partition // nil: the partition does not exist
	name string
	rows []int // indexes into the request's record, in request order
}

// onMissing says what partitionRows does with rows of a partition that
// does not exist.
type onMissing int

const (
	createMissing onMissing = iota // writes: create it
	keepMissing                    // key lookups and deletes: nothing is stored there
)

// maxNewPartitions bounds how many partitions one write may create: each
// is bucket.num Raft groups started on the cluster's nodes.
const maxNewPartitions = 16

// partitionRows groups the rows of rec (the table's columns at their
// schema indexes) by the partition their partition-key values name, in
// order of first appearance. A null or malformed partition-key value is
// invalid_argument; the table's partition-key columns must be present.
func (s *service) partitionRows(ctx context.Context, t *raftmeta.Table, rec arrow.Record, missing onMissing) ([]partRows, error) {
	sch := t.Schema()
	cols := keyIndexes(sch, t.PartitionKeys)
	byName := map[string]int{}
	var out []partRows
	var values []map[string]string
	var key strings.Builder
	for i := range int(rec.NumRows()) {
		key.Reset()
		for j, c := range cols {
			v, err := partitionValue(rec.Column(c), i)
			if err != nil {
				return nil, fmt.Errorf("%w: row %d: partition key %q: %v", ErrInvalidRequest, i, t.PartitionKeys[j], err)
			}
			if j > 0 {
				key.WriteByte('$')
			}
			key.WriteString(v)
		}
		g, ok := byName[key.String()]
		if !ok {
			vals := map[string]string{}
			for j, c := range cols {
				vals[t.PartitionKeys[j]], _ = partitionValue(rec.Column(c), i)
			}
			name, err := raftmeta.PartitionName(t, vals)
			if err != nil {
				return nil, fmt.Errorf("%w (row %d)", err, i)
			}
			g = len(out)
			byName[key.String()] = g
			out = append(out, partRows{name: name})
			values = append(values, vals)
		}
		out[g].rows = append(out[g].rows, i)
	}
	var absent []int
	for g := range out {
		p, err := s.b.Partition(ctx, t.ID, out[g].name)
		switch {
		case err == nil:
			out[g].part = p
		case !errors.Is(err, raftmeta.ErrPartitionNotFound):
			return nil, fmt.Errorf("table %s, partition %s: %w", t.FullName(), out[g].name, err)
		default:
			absent = append(absent, g)
		}
	}
	if missing == keepMissing || len(absent) == 0 {
		return out, nil
	}
	if len(absent) > maxNewPartitions {
		return nil, fmt.Errorf("%w: the rows name %d partitions of %s that do not exist yet, more than the %d one write may create; create them with CreatePartition or write fewer at once", ErrResourceExhausted, len(absent), t.FullName(), maxNewPartitions)
	}
	for _, g := range absent {
		var err error
		if out[g].part, err = s.b.CreatePartition(ctx, t.FullName(), values[g], true); err != nil {
			return nil, fmt.Errorf("create partition %s of %s for the rows: %w", out[g].name, t.FullName(), err)
		}
	}
	return out, nil
}

// partitionValue renders a partition-key value as partition names hold it:
// STRING as it is, INT and BIGINT in decimal, DATE as YYYY-MM-DD.
func partitionValue(col arrow.Array, i int) (string, error) {
	if col.IsNull(i) {
		return "", errors.New("a partition key cannot be null")
	}
	switch a := col.(type) {
	case *array.String:
		return a.Value(i), nil
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10), nil
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10), nil
	case *array.Date32:
		return time.Unix(int64(a.Value(i))*86400, 0).UTC().Format(time.DateOnly), nil
	}
	return "", fmt.Errorf("type %s cannot be a partition key", col.DataType())
}

// takeAll returns the rows idx of rec as a record (rec itself, retained,
// when idx is all of it). The caller releases it.
func takeAll(rec arrow.Record, idx []int) (arrow.Record, error) {
	if len(idx) == int(rec.NumRows()) {
		rec.Retain()
		return rec, nil
	}
	out, err := record.TakeRows(rec, idx, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("take rows: %v", err)
	}
	return out, nil
}
