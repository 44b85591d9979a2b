package rpc

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
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
	// images (-U/+U pairs joined); in Arrow, before and after are structs.
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
var changelogSchemas record.Memo[*record.Schema, *record.Schema]

// changelogSchema is the schema of the $changelog view of a PK table with
// schema s: the three metadata columns, then s's columns.
func changelogSchema(s *record.Schema) *record.Schema {
	return changelogSchemas.Get(s, func() *record.Schema {
		cols := make([]record.Column, 0, 3+len(s.Columns))
		cols = append(cols,
			record.Column{Name: colChangeType, Type: record.Type{Kind: record.KindString}},
			record.Column{Name: colLogOffset, Type: record.Type{Kind: record.KindBigInt}},
			record.Column{Name: colCommitTs, Type: record.Type{Kind: record.KindTimestampLTZ, Precision: 3}},
		)
		cols = append(cols, s.Columns...)
		return &record.Schema{ID: s.ID, Columns: cols}
	})
}

// decode returns the record of a stored batch with the plan's p.need
// columns: projected and decoded for log tables, the changelog view's
// columns for the views. bsch is the schema version the batch was written
// with (readPlan.batchSchema): needed columns added after it are all null.
func (p *readPlan) decode(b *record.Batch, bsch *record.Schema) (arrow.Record, error) {
	if p.view != viewLog {
		return p.decodeView(b)
	}
	stored := len(bsch.Columns)
	have := 0 // p.need is ascending: the columns the batch stores come first
	for have < len(p.need) && p.need[have] < stored {
		have++
	}
	if have == 0 {
		return p.widen(nil, int(b.RecordCount)), nil
	}
	body := b.Body
	if have < stored {
		layout, err := p.layoutFor(bsch)
		if err != nil {
			return nil, err
		}
		if body, err = arrowipc.Project(nil, b.Body, p.need[:have], layout); err != nil {
			return nil, fmt.Errorf("project stored batch at offset %d (schema %d): %v", b.BaseOffset, bsch.ID, err)
		}
	}
	sch := p.needSch // the stored columns' fields are the same in every version
	if have < len(p.need) {
		sch = projectedSchema(bsch, p.need[:have])
	}
	rec, err := record.DecodeBody(sch, body, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("decode stored batch at offset %d (schema %d): %v", b.BaseOffset, bsch.ID, err)
	}
	if have == len(p.need) {
		return rec, nil
	}
	defer rec.Release()
	return p.widen(rec, int(b.RecordCount)), nil
}

// widen returns a record of the plan's p.need columns: part's columns
// first, then all-null columns for the rest (columns added after the
// batch's schema version). part may be nil (no stored column needed).
func (p *readPlan) widen(part arrow.Record, n int) arrow.Record {
	cols := make([]arrow.Array, len(p.need))
	have := 0
	if part != nil {
		have = int(part.NumCols())
		copy(cols, part.Columns()) // NewRecord retains them
	}
	for i := have; i < len(p.need); i++ {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, p.needSch.Field(i).Type, n)
	}
	out := array.NewRecord(p.needSch, cols, int64(n))
	releaseArrays(cols[have:])
	return out
}

// changeTypeNames are the _change_type strings by kvstore.ChangeType.
var changeTypeNames = [...]string{kvstore.Insert: "+I", kvstore.UpdateBefore: "-U", kvstore.UpdateAfter: "+U", kvstore.Delete: "-D"}

// decodeView decodes a stored changelog batch into the view's columns. A
// batch merged with an earlier schema version (batchSchema refused later
// ones) reads NULL in the columns added since.
func (p *readPlan) decodeView(b *record.Batch) (arrow.Record, error) {
	base := p.t.SchemaByID(b.SchemaID)
	if base == nil {
		return nil, fmt.Errorf("stored changelog batch at offset %d has schema %d, which table %s does not know", b.BaseOffset, b.SchemaID, p.t.FullName())
	}
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
	for i := len(cols); i < len(p.sch.Columns); i++ {
		cols = append(cols, array.MakeArrayOfNull(mem, sch.Field(i).Type, n))
	}
	out := array.NewRecord(sch, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

// binlogChange is the _change_type of a $binlog row.
var binlogChange = map[string]string{"+I": "insert", "+U": "update", "-D": "delete"}

// binlogRow says what changelog row r (ct: its _change_type column) is in
// $binlog: the change's kind and the rows of its before and after images,
// -1 for none. An update's before image is the -U row in front of it (the
// leader always emits the pair adjacent in one batch). ok is false for the
// -U row itself, which is no $binlog row of its own.
func binlogRow(ct *array.String, r int) (kind string, before, after int, ok bool) {
	kind, ok = binlogChange[ct.Value(r)]
	before, after = -1, -1
	switch {
	case !ok:
	case kind == "delete":
		before = r
	case kind == "update" && r > 0 && ct.Value(r-1) == "-U":
		before, after = r-1, r
	default:
		after = r
	}
	return kind, before, after, ok
}

// binlogFilterSchemas caches binlogFilterSchema per view schema.
var binlogFilterSchemas record.Memo[*record.Schema, *record.Schema]

// binlogFilterSchema is what a filter on $binlog binds to: the changelog
// view's columns sch (changelogSchema), then before.C and after.C for each
// of the table's columns C, nullable (an insert has no before image, a
// delete no after image). binlogFilterRecord builds its rows.
func binlogFilterSchema(sch *record.Schema) *record.Schema {
	return binlogFilterSchemas.Get(sch, func() *record.Schema {
		data := sch.Columns[3:]
		cols := make([]record.Column, 0, len(sch.Columns)+2*len(data))
		cols = append(cols, sch.Columns...)
		for _, image := range []string{"before.", "after."} {
			for _, c := range data {
				c.Name, c.Nullable = image+c.Name, true
				cols = append(cols, c)
			}
		}
		return &record.Schema{ID: sch.ID, Columns: cols}
	})
}

// binlogFilterRecord is rec (a changelog batch decoded in the view's
// columns) as a filter on $binlog sees it, in binlogFilterSchema's columns:
// _change_type in $binlog's words (insert, update, delete; null for a -U
// row, which is no $binlog row of its own), the data columns of the row
// that changed (the after image of an insert or update, the before image
// of a delete), and, with images, each row's before and after images (an
// update's before image is its -U row). The caller releases it.
func binlogFilterRecord(rec arrow.Record, images bool) (arrow.Record, error) {
	ct := rec.Column(0).(*array.String)
	n := ct.Len()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(n)
	var before, after []int // row of each image, -1 for none
	if images {
		before, after = make([]int, n), make([]int, n)
	}
	for i := range n {
		kind, bi, ai, ok := binlogRow(ct, i)
		if ok {
			b.Append(kind)
		} else {
			b.AppendNull()
		}
		if images {
			before[i], after[i] = bi, ai
		}
	}
	kinds := b.NewArray()
	defer kinds.Release()
	cols := slices.Clone(rec.Columns())
	cols[0] = kinds
	schema := rec.Schema()
	if images {
		data := make([]int, len(cols)-3)
		fields := slices.Clone(schema.Fields())
		for i := range data {
			data[i] = 3 + i
		}
		for _, img := range []struct {
			prefix string
			rows   []int
		}{{"before.", before}, {"after.", after}} {
			arrs, err := imageColumns(rec, data, img.rows)
			if err != nil {
				return nil, err // the other image's arrays: released by their defer
			}
			defer releaseArrays(arrs)
			cols = append(cols, arrs...)
			for _, c := range data {
				f := schema.Field(c)
				f.Name, f.Nullable = img.prefix+f.Name, true
				fields = append(fields, f)
			}
		}
		schema = arrow.NewSchema(fields, nil)
	}
	return array.NewRecord(schema, cols, int64(n)), nil
}

// imageColumns returns columns cols of rec at rows idx, null where idx is
// -1 (whatever the row's own value).
func imageColumns(rec arrow.Record, cols, idx []int) ([]arrow.Array, error) {
	n := len(idx)
	taken, valid, _, err := takeImage(rec, cols, idx)
	if err != nil {
		return nil, err
	}
	defer releaseArrays(taken)
	out := make([]arrow.Array, len(taken))
	for i, a := range taken {
		d := a.Data()
		off := d.Offset()
		bits := make([]byte, bitutil.BytesForBits(int64(off+n)))
		if v := d.Buffers()[0]; v != nil && d.NullN() > 0 {
			bitutil.BitmapAnd(v.Bytes(), valid, int64(off), 0, bits, int64(off), int64(n))
		} else {
			bitutil.CopyBitmap(valid, 0, n, bits, off)
		}
		bufs := slices.Clone(d.Buffers())
		bufs[0] = memory.NewBufferBytes(bits)
		var nd arrow.ArrayData
		if dict := d.Dictionary(); dict != nil {
			nd = array.NewDataWithDictionary(d.DataType(), n, bufs, array.UnknownNullCount, off, dict.(*array.Data))
		} else {
			nd = array.NewData(d.DataType(), n, bufs, d.Children(), array.UnknownNullCount, off)
		}
		out[i] = array.MakeFromData(nd)
		nd.Release()
	}
	return out, nil
}

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
		if r < 0 {
			return append(dst, "null"...)
		}
		start := len(dst)
		dst = record.AppendJSONRows(dst, rec, r, r+1, &record.JSONOptions{Columns: dataCols, Names: dataNames})
		n := copy(dst[start:], dst[start+1:len(dst)-1]) // "[{..}]" → "{..}"
		return dst[:start+n]
	}
	k := 0
	for _, r32 := range sel {
		kind, before, after, ok := binlogRow(ct, int(r32))
		if !ok {
			continue // -U: written with its +U
		}
		r := int(r32)
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
		dst = image(dst, before)
		dst = append(dst, `,"after":`...)
		dst = image(dst, after)
		dst = append(dst, '}')
	}
	return dst, k
}

// binlogArrowSchema is the Arrow schema of `db.t$binlog` with the data
// columns cols of the changelog schema sch (indexes >= 3): _change_type
// (insert|update|delete), _log_offset, _commit_timestamp, then before and
// after, nullable structs of those columns. Schemas are cached (the
// encoded schema message is cached per *arrow.Schema).
func binlogArrowSchema(sch *record.Schema, cols []int) *arrow.Schema {
	return projSchemas.Get(newProjKey(sch, cols, true), func() *arrow.Schema {
		full := sch.ArrowSchema()
		var fields []arrow.Field
		for _, c := range cols {
			if c >= 3 {
				f := full.Field(c)
				f.Metadata = arrow.Metadata{} // the images hold plain values, dictionary-encoded or not
				fields = append(fields, f)
			}
		}
		image := arrow.StructOf(fields...)
		return arrow.NewSchema([]arrow.Field{
			{Name: colChangeType, Type: arrow.BinaryTypes.String},
			full.Field(1),
			full.Field(2),
			{Name: "before", Type: image, Nullable: true},
			{Name: "after", Type: image, Nullable: true},
		}, nil)
	})
}

// binlogRecord builds the $binlog rows of the selected changelog rows of
// rec (the view's columns) in p.outSchema, pairing -U with the +U after it
// as appendBinlog does. outCols are the selected columns (record indexes).
// It returns nil when the selection holds no $binlog row.
func (p *readPlan) binlogRecord(rec arrow.Record, outCols []int, sel []int32) (arrow.Record, error) {
	ct := rec.Column(0).(*array.String)
	mem := memory.DefaultAllocator
	kinds := array.NewStringBuilder(mem)
	defer kinds.Release()
	var rows, before, after []int // before/after: -1 for no image
	for _, r32 := range sel {
		kind, b, a, ok := binlogRow(ct, int(r32))
		if !ok {
			continue // -U: written with its +U
		}
		kinds.Append(kind)
		rows, before, after = append(rows, int(r32)), append(before, b), append(after, a)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	var dataCols []int
	for _, c := range outCols {
		if c >= 3 {
			dataCols = append(dataCols, c)
		}
	}
	meta, err := takeColumns(rec, []int{1, 2}, rows)
	if err != nil {
		return nil, err
	}
	typ := p.outSchema.Field(3).Type.(*arrow.StructType)
	bs, err := imageArray(rec, dataCols, before, typ)
	if err != nil {
		releaseArrays(meta)
		return nil, err
	}
	as, err := imageArray(rec, dataCols, after, typ)
	if err != nil {
		releaseArrays(meta)
		bs.Release()
		return nil, err
	}
	cols := []arrow.Array{kinds.NewArray(), meta[0], meta[1], bs, as}
	defer releaseArrays(cols)
	return array.NewRecord(p.outSchema, cols, int64(len(rows))), nil
}

// takeColumns returns columns cols of rec at rows idx.
func takeColumns(rec arrow.Record, cols, idx []int) ([]arrow.Array, error) {
	arrs := make([]arrow.Array, len(cols))
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		arrs[i], fields[i] = rec.Column(c), rec.Schema().Field(c)
	}
	sub := array.NewRecord(arrow.NewSchema(fields, nil), arrs, rec.NumRows())
	defer sub.Release()
	taken, err := record.TakeRows(sub, idx, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("take rows: %v", err)
	}
	defer taken.Release()
	out := make([]arrow.Array, len(cols))
	for i := range out {
		out[i] = taken.Column(i)
		out[i].Retain()
	}
	return out, nil
}

// imageArray is the struct array of columns cols of rec at rows idx, null
// where idx is -1.
func imageArray(rec arrow.Record, cols, idx []int, typ *arrow.StructType) (arrow.Array, error) {
	children, valid, nulls, err := takeImage(rec, cols, idx)
	if err != nil {
		return nil, err
	}
	defer releaseArrays(children)
	childData := make([]arrow.ArrayData, len(children))
	for i, c := range children {
		childData[i] = c.Data()
	}
	data := array.NewData(typ, len(idx), []*memory.Buffer{memory.NewBufferBytes(valid)}, childData, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// takeImage returns columns cols of rec at rows idx (row 0 where idx is
// -1: any value will do under a null), the validity bitmap of idx (a bit
// for each row that is not -1) and its null count.
func takeImage(rec arrow.Record, cols, idx []int) ([]arrow.Array, []byte, int, error) {
	take := make([]int, len(idx))
	valid := make([]byte, bitutil.BytesForBits(int64(len(idx))))
	nulls := 0
	for i, r := range idx {
		if r < 0 {
			nulls++
			continue
		}
		take[i] = r
		bitutil.SetBit(valid, i)
	}
	taken, err := takeColumns(rec, cols, take)
	return taken, valid, nulls, err
}

func releaseArrays(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}
