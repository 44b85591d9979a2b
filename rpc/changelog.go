package rpc

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// view is what a Fetch or Scan reads a bucket log as.
type view uint8

const (
	// viewLog: the rows of a log table.
	viewLog view = iota
	// viewChangelog: a primary-key table's changelog, `db.t$changelog` (and
	// plain `db.t`): _change_type (+I -U +U -D), _log_offset,
	// _commit_timestamp, then the table's columns.
	viewChangelog
	// viewBinlog: `db.t$binlog`: one row per change with before and after
	// images (-U/+U pairs joined), JSON only.
	viewBinlog
)

// Metadata columns of the changelog views (Fluss's names).
const (
	colChangeType = "_change_type"
	colLogOffset  = "_log_offset"
	colCommitTs   = "_commit_timestamp"
)

// readTable resolves the table of a Fetch or Scan and how its log is read.
func (s *service) readTable(ctx context.Context, name string) (*raftmeta.Table, view, error) {
	t, ref, err := s.table(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case !t.HasPrimaryKey():
		return t, viewLog, nil
	case ref.Virtual == "binlog":
		return t, viewBinlog, nil
	default:
		return t, viewChangelog, nil
	}
}

// changelogSchemas caches changelogSchema per table schema.
var changelogSchemas sync.Map // *record.Schema → *record.Schema

// changelogSchema is the schema of the $changelog view of a PK table with
// schema s: the three metadata columns, then s's columns.
func changelogSchema(s *record.Schema) *record.Schema {
	if v, ok := changelogSchemas.Load(s); ok {
		return v.(*record.Schema)
	}
	cols := make([]record.Column, 0, 3+len(s.Columns))
	cols = append(cols,
		record.Column{Name: colChangeType, Type: record.Type{Kind: record.KindString}},
		record.Column{Name: colLogOffset, Type: record.Type{Kind: record.KindBigInt}},
		record.Column{Name: colCommitTs, Type: record.Type{Kind: record.KindTimestampLTZ, Precision: 3}},
	)
	cols = append(cols, s.Columns...)
	v, _ := changelogSchemas.LoadOrStore(s, &record.Schema{ID: s.ID, Columns: cols})
	return v.(*record.Schema)
}

// decode returns the record of a stored batch with the plan's p.need
// columns: projected and decoded for log tables, the changelog view's
// columns for the views.
func (p *readPlan) decode(b *record.Batch) (arrow.Record, error) {
	if p.view != viewLog {
		return p.decodeView(b)
	}
	body := b.Body
	if !p.allColumns(p.need) {
		var err error
		if body, err = arrowipc.Project(nil, b.Body, p.need, p.layout); err != nil {
			return nil, fmt.Errorf("project stored batch at offset %d: %v", b.BaseOffset, err)
		}
	}
	rec, err := record.DecodeBody(p.needSch, body, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("decode stored batch at offset %d: %v", b.BaseOffset, err)
	}
	return rec, nil
}

// changeTypeNames are the _change_type strings by kvstore.ChangeType.
var changeTypeNames = [...]string{kvstore.Insert: "+I", kvstore.UpdateBefore: "-U", kvstore.UpdateAfter: "+U", kvstore.Delete: "-D"}

// decodeView decodes a stored changelog batch into the view's columns.
func (p *readPlan) decodeView(b *record.Batch) (arrow.Record, error) {
	base := p.t.Schema()
	rec, err := record.DecodeBody(kvstore.ChangelogArrowSchema(base), b.Body, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("decode stored changelog batch at offset %d: %v", b.BaseOffset, err)
	}
	defer rec.Release()
	n := int(rec.NumRows())
	ct, ok := rec.Column(len(base.Columns)).(*array.Int8)
	if !ok {
		return nil, fmt.Errorf("stored changelog batch at offset %d has no change-type column", b.BaseOffset)
	}
	mem := memory.DefaultAllocator
	sch := p.sch.ArrowSchema()
	cb := array.NewStringBuilder(mem)
	defer cb.Release()
	ob := array.NewInt64Builder(mem)
	defer ob.Release()
	tb := array.NewTimestampBuilder(mem, sch.Field(2).Type.(*arrow.TimestampType))
	defer tb.Release()
	cb.Reserve(n)
	ob.Reserve(n)
	tb.Reserve(n)
	for i := range n {
		v := ct.Value(i)
		if v < 0 || int(v) >= len(changeTypeNames) {
			return nil, fmt.Errorf("stored changelog batch at offset %d: change type %d", b.BaseOffset, v)
		}
		cb.Append(changeTypeNames[v])
		ob.Append(b.BaseOffset + int64(i))
		tb.Append(arrow.Timestamp(b.CommitTimestamp))
	}
	cols := make([]arrow.Array, 0, len(p.sch.Columns))
	cols = append(cols, cb.NewArray(), ob.NewArray(), tb.NewArray())
	for i := range base.Columns {
		c := rec.Column(i)
		c.Retain()
		cols = append(cols, c)
	}
	out := array.NewRecord(sch, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

// binlogChange is the _change_type of a $binlog row.
var binlogChange = map[string]string{"+I": "insert", "+U": "update", "-D": "delete"}

// appendBinlog appends the $binlog rows of the selected changelog rows of
// rec (the view's columns) as members of an open JSON array, and returns
// how many it wrote. A -U row is the before image of the +U after it
// (the leader always emits them adjacent in one batch) and writes nothing
// itself; the +U row carries both. outCols are the selected columns
// (record indexes); metadata columns among them are written once, at the
// top level.
func (p *readPlan) appendBinlog(dst []byte, rec arrow.Record, outCols []int, sel []int32, first bool) ([]byte, int) {
	ct := rec.Column(0).(*array.String)
	var dataCols []int
	var dataNames []string
	for _, c := range outCols {
		if c >= 3 {
			dataCols = append(dataCols, c)
			dataNames = append(dataNames, p.sch.Columns[c].Name)
		}
	}
	image := func(dst []byte, r int) []byte {
		start := len(dst)
		dst = record.AppendJSONRows(dst, rec, r, r+1, &record.JSONOptions{Columns: dataCols, Names: dataNames})
		n := copy(dst[start:], dst[start+1:len(dst)-1]) // "[{..}]" → "{..}"
		return dst[:start+n]
	}
	k := 0
	for _, r32 := range sel {
		r := int(r32)
		kind, ok := binlogChange[ct.Value(r)]
		if !ok {
			continue // -U: written with its +U
		}
		if !first || k > 0 {
			dst = append(dst, ',')
		}
		k++
		dst = append(dst, `{"_change_type":"`...)
		dst = append(dst, kind...)
		dst = append(dst, `",`...)
		start := len(dst)
		dst = record.AppendJSONRows(dst, rec, r, r+1, &record.JSONOptions{Columns: []int{1, 2}})
		n := copy(dst[start:], dst[start+2:len(dst)-2]) // "[{a,b}]" → "a,b"
		dst = dst[:start+n]
		dst = append(dst, `,"before":`...)
		switch {
		case kind == "delete":
			dst = image(dst, r)
		case kind == "update" && r > 0 && ct.Value(r-1) == "-U":
			dst = image(dst, r-1)
		default:
			dst = append(dst, "null"...)
		}
		dst = append(dst, `,"after":`...)
		if kind == "delete" {
			dst = append(dst, "null"...)
		} else {
			dst = image(dst, r)
		}
		dst = append(dst, '}')
	}
	return dst, k
}
