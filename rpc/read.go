package rpc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
	"github.com/fluss-node/fluss-node/logstore/record/filter"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// readPlan is what a Fetch or Scan asks of each batch: the output columns
// (schema indexes, in schema order), the filter and the format.
type readPlan struct {
	t      *raftmeta.Table
	view   view           // what the log is read as
	sch    *record.Schema // the columns read: the table's, or the view's
	out    []int          // output columns, ascending schema indexes
	names  []string
	filter *filter.Filter
	need   []int // out ∪ filter columns, ascending: what gets decoded
	arrow  bool
	// images: the filter (on $binlog) names before.C or after.C.
	images bool

	outSchema *arrow.Schema // Arrow schema of the output columns
	outMsg    []byte        // its encapsulated schema message
	needSch   *arrow.Schema // Arrow schema of the decoded columns
	layout    *arrowipc.Layout
}

// caches of immutable per-schema data, keyed by *record.Schema (catalog
// schemas are immutable) and the column list.
var (
	layouts     record.Memo[*record.Schema, *arrowipc.Layout]
	projSchemas record.Memo[projKey, *arrow.Schema]
)

type projKey struct {
	s      *record.Schema
	cols   string
	binlog bool
}

func newProjKey(s *record.Schema, cols []int, binlog bool) projKey {
	var b strings.Builder
	for _, c := range cols {
		b.WriteString(strconv.Itoa(c))
		b.WriteByte(',')
	}
	return projKey{s, b.String(), binlog}
}

func projectedSchema(s *record.Schema, cols []int) *arrow.Schema {
	return projSchemas.Get(newProjKey(s, cols, false), func() *arrow.Schema {
		full := s.ArrowSchema()
		fields := make([]arrow.Field, len(cols))
		for i, c := range cols {
			fields[i] = full.Field(c)
		}
		return arrow.NewSchema(fields, nil)
	})
}

func layoutOf(s *record.Schema) (*arrowipc.Layout, error) {
	return layouts.GetErr(s, func() (*arrowipc.Layout, error) {
		l, err := arrowipc.LayoutOf(record.SchemaMessage(s.ArrowSchema()))
		if err != nil {
			return nil, fmt.Errorf("layout of schema %d: %w", s.ID, err)
		}
		return l, nil
	})
}

// newReadPlan resolves columns (empty: all) and the filter of a read.
func newReadPlan(t *raftmeta.Table, v view, columns []string, filterExpr string, format flussv1.Format) (*readPlan, error) {
	sch := t.Schema()
	if v != viewLog {
		sch = changelogSchema(sch)
	}
	p := &readPlan{t: t, view: v, sch: sch, arrow: format == flussv1.Format_ARROW}
	switch format {
	case flussv1.Format_JSON, flussv1.Format_ARROW:
	default:
		return nil, fmt.Errorf("%w: unknown format %d (want JSON or ARROW)", ErrInvalidRequest, format)
	}
	if len(columns) == 0 {
		for i := range sch.Columns {
			p.out = append(p.out, i)
		}
	} else {
		for _, name := range columns {
			i := sch.Index(name)
			if i < 0 {
				return nil, fmt.Errorf("%w: unknown column %q in columns; table %s has: %s", ErrInvalidRequest, name, t.FullName(), columnList(sch))
			}
			if !slices.Contains(p.out, i) {
				p.out = append(p.out, i)
			}
		}
		slices.Sort(p.out)
	}
	for _, i := range p.out {
		p.names = append(p.names, sch.Columns[i].Name)
	}
	p.need = slices.Clone(p.out)
	if strings.TrimSpace(filterExpr) != "" {
		e, err := filter.Parse(filterExpr)
		if err != nil {
			return nil, fmt.Errorf("filter %s: %w", quoteClipped(filterExpr), err)
		}
		bindSch := sch
		if v == viewBinlog {
			bindSch = binlogFilterSchema(sch)
		}
		if p.filter, err = filter.Bind(e, bindSch); err != nil {
			return nil, fmt.Errorf("filter %s: %w", quoteClipped(filterExpr), err)
		}
		for _, c := range p.filter.Columns() {
			if c >= len(sch.Columns) {
				p.images = true // before.C, after.C: built from the view's columns
			} else if !slices.Contains(p.need, c) {
				p.need = append(p.need, c)
			}
		}
		slices.Sort(p.need)
	}
	if v != viewLog {
		// Views decode whole stored batches (decodeView): every column.
		p.need = p.need[:0]
		for i := range sch.Columns {
			p.need = append(p.need, i)
		}
	}
	var err error
	if p.layout, err = layoutOf(sch); err != nil {
		return nil, err
	}
	p.outSchema = projectedSchema(sch, p.out)
	if v == viewBinlog {
		p.outSchema = binlogArrowSchema(sch, p.out)
	}
	p.needSch = projectedSchema(sch, p.need)
	p.outMsg = record.SchemaMessage(p.outSchema)
	return p, nil
}

// batchSchema returns the schema version a stored batch was written with:
// the plan's own, or (log tables only) an older version of the table, whose
// columns are a prefix of the plan's (versions only append nullable
// columns).
func (p *readPlan) batchSchema(b *record.Batch) (*record.Schema, error) {
	if p.view != viewLog {
		// Views decode changelog batches by their own version (decodeView).
		if b.SchemaID > p.sch.ID {
			return nil, fmt.Errorf("%w: changelog batch at offset %d of %s has schema %d, this node knows up to %d; retry", ErrCatalogBehind, b.BaseOffset, p.t.FullName(), b.SchemaID, p.sch.ID)
		}
		return p.sch, nil
	}
	if b.SchemaID == p.sch.ID {
		return p.sch, nil
	}
	if b.SchemaID > p.sch.ID {
		// Written through a node whose catalog already had a later
		// AlterTable than this one's.
		return nil, fmt.Errorf("%w: batch at offset %d of %s has schema %d, this node knows up to %d; retry", ErrCatalogBehind, b.BaseOffset, p.t.FullName(), b.SchemaID, p.sch.ID)
	}
	bs := p.t.SchemaByID(b.SchemaID)
	if bs == nil || len(bs.Columns) > len(p.sch.Columns) {
		return nil, fmt.Errorf("stored batch at offset %d has schema %d, which table %s (schema %d) does not know", b.BaseOffset, b.SchemaID, p.t.FullName(), p.sch.ID)
	}
	return bs, nil
}

// layoutFor is the buffer layout of batches written with schema version
// bsch.
func (p *readPlan) layoutFor(bsch *record.Schema) (*arrowipc.Layout, error) {
	if bsch == p.sch {
		return p.layout, nil
	}
	return layoutOf(bsch)
}

// readOut is the converted result of one read of one bucket.
type readOut struct {
	rows       []byte   // JSON array (JSON format)
	arrowMsgs  [][]byte // record-batch messages (ARROW format)
	nextOffset int64
	records    int
}

// convert turns fetched batches into the plan's output, starting at
// offset, keeping at most maxRecords rows (0: no limit) and about maxBytes
// bytes of output (at least one batch). nextOffset is the offset after the
// last row examined: rows a filter drops still advance it.
func (p *readPlan) convert(batches [][]byte, offset int64, maxRecords, maxBytes int) (*readOut, error) {
	o := &readOut{nextOffset: offset}
	if !p.arrow {
		o.rows = append(o.rows, '[')
	}
	outBytes := 0
	var sel []int32
	for _, raw := range batches {
		if maxRecords > 0 && o.records >= maxRecords {
			break
		}
		if outBytes > 0 && outBytes >= maxBytes {
			break
		}
		b, _, err := record.ParseBatch(raw)
		if err != nil {
			return nil, fmt.Errorf("stored batch: %v", err) // corruption: internal
		}
		count := int64(b.RecordCount)
		last := b.BaseOffset + count // one past
		if last <= o.nextOffset {
			continue // wholly before the requested offset
		}
		from := max(o.nextOffset-b.BaseOffset, 0)
		to := count
		if maxRecords > 0 && p.filter == nil && p.view != viewBinlog {
			to = min(to, from+int64(maxRecords-o.records))
		}
		bsch, err := p.batchSchema(&b)
		if err != nil {
			return nil, err
		}
		// Statistics of an older batch cover its own columns; the filter
		// treats the others as unknown.
		if p.view == viewLog && p.filter != nil && b.Stats != nil && !p.filter.MayMatch(b.Stats) {
			o.nextOffset = b.BaseOffset + to
			continue
		}
		// Fast path: a whole batch, no filter, ARROW, every output column
		// stored in it: buffer-level projection.
		if p.view == viewLog && p.arrow && p.filter == nil && from == 0 && to == count && p.out[len(p.out)-1] < len(bsch.Columns) {
			msg := b.Body
			if len(p.out) != len(bsch.Columns) {
				layout, err := p.layoutFor(bsch)
				if err != nil {
					return nil, err
				}
				if msg, err = arrowipc.Project(nil, b.Body, p.out, layout); err != nil {
					return nil, fmt.Errorf("project stored batch at offset %d: %v", b.BaseOffset, err)
				}
			}
			o.arrowMsgs = append(o.arrowMsgs, msg)
			outBytes += len(msg)
			o.records += int(count)
			o.nextOffset = last
			continue
		}
		n, err := p.convertSlow(o, &b, bsch, from, to, maxRecords, &sel, &outBytes)
		if err != nil {
			return nil, err
		}
		o.nextOffset = b.BaseOffset + n
	}
	if !p.arrow {
		o.rows = append(o.rows, ']')
	}
	return o, nil
}

// convertSlow decodes the needed columns of one batch, filters and writes
// the selected rows; it returns the batch-relative offset after the last
// row examined.
func (p *readPlan) convertSlow(o *readOut, b *record.Batch, bsch *record.Schema, from, to int64, maxRecords int, selp *[]int32, outBytes *int) (int64, error) {
	rec, err := p.decode(b, bsch)
	if err != nil {
		return 0, err
	}
	defer rec.Release()
	// Columns of the decoded record: position in p.need.
	colIndex := func(schemaCol int) int {
		i, _ := slices.BinarySearch(p.need, schemaCol)
		return i
	}
	sel := (*selp)[:0]
	end := to
	if p.filter != nil {
		frec, fcol := rec, colIndex
		if p.view == viewBinlog {
			// In binlogFilterSchema's order, which extends the view's.
			if frec, err = binlogFilterRecord(rec, p.images); err != nil {
				return 0, err
			}
			defer frec.Release()
			fcol = func(c int) int { return c }
		}
		if sel, err = p.filter.Eval(frec, fcol, sel); err != nil {
			return 0, fmt.Errorf("filter on stored batch at offset %d: %v", b.BaseOffset, err)
		}
		// Keep rows in [from, to); stop at maxRecords.
		k := 0
		for _, r := range sel {
			if int64(r) < from || int64(r) >= to {
				continue
			}
			if frec != rec && frec.Column(0).IsNull(int(r)) {
				continue // -U: no $binlog row of its own
			}
			if maxRecords > 0 && o.records+k >= maxRecords {
				end = int64(r)
				break
			}
			sel[k] = r
			k++
		}
		sel = sel[:k]
	} else {
		// $binlog: a -U row is no row of its own, so it does not count
		// against maxRecords (convert does not cap to for it).
		var ct *array.String
		if p.view == viewBinlog && maxRecords > 0 {
			ct = rec.Column(0).(*array.String)
		}
		k := 0
		for r := from; r < to; r++ {
			if ct != nil {
				if _, _, _, own := binlogRow(ct, int(r)); own {
					if o.records+k >= maxRecords {
						end = r
						break
					}
					k++
				}
			}
			sel = append(sel, int32(r))
		}
	}
	*selp = sel
	outCols := make([]int, len(p.out))
	for i, c := range p.out {
		outCols[i] = colIndex(c)
	}
	if len(sel) == 0 {
		return end, nil
	}
	if p.arrow {
		var outRec arrow.Record
		if p.view == viewBinlog {
			outRec, err = p.binlogRecord(rec, outCols, sel)
		} else {
			outRec, err = takeRows(rec, outCols, p.outSchema, sel)
		}
		if err != nil {
			return 0, err
		}
		if outRec == nil {
			return end, nil // only -U rows, written with their +U
		}
		defer outRec.Release()
		msg, err := record.EncodeBody(outRec, b.Compression(), 3)
		if err != nil {
			return 0, fmt.Errorf("encode fetched rows: %v", err)
		}
		o.arrowMsgs = append(o.arrowMsgs, msg)
		*outBytes += len(msg)
		o.records += int(outRec.NumRows())
		return end, nil
	} else if p.view == viewBinlog {
		before := len(o.rows)
		var k int
		o.rows, k = p.appendBinlog(o.rows, rec, outCols, sel, o.records == 0)
		*outBytes += len(o.rows) - before
		o.records += k
		return end, nil
	} else {
		before := len(o.rows)
		if o.records > 0 {
			o.rows = append(o.rows, ',')
		}
		o.rows = appendJSONRows(o.rows, rec, outCols, p.names, sel)
		*outBytes += len(o.rows) - before
	}
	o.records += len(sel)
	return end, nil
}

// arrowStream builds the complete IPC stream of a read.
func (p *readPlan) arrowStream(msgs [][]byte) []byte {
	return arrowipc.AppendStream(nil, p.outMsg, msgs...)
}

func (s *service) fetchLimits(maxBytes, maxWaitMs int32) (int, time.Duration) {
	mb := s.lim.MaxFetchBytes
	if maxBytes > 0 && int(maxBytes) < mb {
		mb = int(maxBytes)
	}
	wait := time.Duration(max(maxWaitMs, 0)) * time.Millisecond
	if wait > s.lim.MaxWait {
		wait = s.lim.MaxWait
	}
	return mb, wait
}

// Fetch reads one bucket of a log table.
func (s *service) Fetch(ctx context.Context, req *connect.Request[flussv1.FetchRequest]) (*connect.Response[flussv1.FetchResponse], error) {
	m := req.Msg
	t, v, err := s.readTable(ctx, m.GetTable())
	if err != nil {
		return nil, err
	}
	p, err := s.namedPartition(ctx, t, m.GetPartition())
	if err != nil {
		return nil, err
	}
	if err := checkBucket(t, m.GetBucket()); err != nil {
		return nil, err
	}
	if m.GetOffset() < 0 {
		return nil, fmt.Errorf("%w: offset %d is negative; use ListOffsets to find EARLIEST", ErrOffsetOutOfRange, m.GetOffset())
	}
	switch {
	case m.GetMaxRecords() < 0:
		return nil, fmt.Errorf("%w: maxRecords %d is negative", ErrInvalidRequest, m.GetMaxRecords())
	case m.GetMaxBytes() < 0:
		return nil, fmt.Errorf("%w: maxBytes %d is negative (0 or absent: max_fetch_bytes)", ErrInvalidRequest, m.GetMaxBytes())
	case m.GetMaxWaitMs() < 0:
		return nil, fmt.Errorf("%w: maxWaitMs %d is negative (0 or absent: no wait)", ErrInvalidRequest, m.GetMaxWaitMs())
	}
	plan, err := newReadPlan(t, v, m.GetColumns(), m.GetFilter(), m.GetFormat())
	if err != nil {
		return nil, err
	}
	maxBytes, wait := s.fetchLimits(m.GetMaxBytes(), m.GetMaxWaitMs())
	res, err := s.b.Fetch(ctx, bucketOf(t, p, m.GetBucket()), m.GetOffset(), maxBytes, wait)
	if err != nil {
		return nil, fmt.Errorf("fetch %s at offset %d: %w", where(t, p, m.GetBucket()), m.GetOffset(), err)
	}
	if m.GetOffset() > res.HighWatermark || m.GetOffset() < res.LogStartOffset {
		return nil, fmt.Errorf("%w: offset %d of %s is outside the log [%d, %d]", ErrOffsetOutOfRange, m.GetOffset(), where(t, p, m.GetBucket()), res.LogStartOffset, res.HighWatermark)
	}
	out, err := plan.convert(res.Batches, m.GetOffset(), int(m.GetMaxRecords()), maxBytes)
	if err != nil {
		return nil, err
	}
	resp := &flussv1.FetchResponse{NextOffset: out.nextOffset, HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset}
	if plan.arrow {
		resp.Arrow = plan.arrowStream(out.arrowMsgs)
	} else if out.records > 0 {
		resp.Rows = out.rows
	}
	s.m.read(t, out.records, len(resp.Rows)+len(resp.Arrow))
	return connect.NewResponse(resp), nil
}

// Scan streams a table's buckets from a start position: until the high
// watermark each bucket had when the scan started, or, with follow, until
// the client cancels. One goroutine per bucket fetches (long-polling when
// following); the handler goroutine alone sends on the stream. A
// partitioned table is scanned in the partition the request names, or in
// all of them; a following scan of all partitions also picks up the
// partitions created while it runs (from their start).
func (s *service) Scan(ctx context.Context, req *connect.Request[flussv1.ScanRequest], stream *connect.ServerStream[flussv1.ScanResponse]) error {
	m := req.Msg
	t, v, err := s.readTable(ctx, m.GetTable())
	if err != nil {
		return err
	}
	plan, err := newReadPlan(t, v, m.GetColumns(), m.GetFilter(), m.GetFormat())
	if err != nil {
		return err
	}
	bs, err := buckets(t, m.GetBuckets())
	if err != nil {
		return err
	}
	// The partitions to scan: nil alone for an unpartitioned table.
	parts := []*raftmeta.Partition{nil}
	all := len(t.PartitionKeys) > 0 && m.GetPartition() == ""
	switch {
	case all:
		if parts, err = s.b.Partitions(ctx, t.ID); err != nil {
			return fmt.Errorf("scan %s: %w", t.FullName(), err)
		}
	case m.GetPartition() != "" || len(t.PartitionKeys) > 0:
		p, err := s.namedPartition(ctx, t, m.GetPartition())
		if err != nil {
			return err
		}
		parts = []*raftmeta.Partition{p}
	}
	var targets []scanTarget
	start := map[raftmeta.BucketID]int64{}
	if m.GetFrom() == flussv1.ScanRequest_OFFSETS {
		if len(m.GetOffsets()) == 0 {
			return fmt.Errorf("%w: from OFFSETS needs offsets [{partition, bucket, offset}]", ErrInvalidRequest)
		}
		for _, bo := range m.GetOffsets() {
			if err := checkBucket(t, bo.GetBucket()); err != nil {
				return err
			}
			p, err := s.namedPartition(ctx, t, bo.GetPartition())
			if err != nil {
				return err
			}
			if m.GetPartition() != "" && bo.GetPartition() != m.GetPartition() {
				return fmt.Errorf("%w: offsets name partition %s, the request partition %s", ErrInvalidRequest, quoteClipped(bo.GetPartition()), quoteClipped(m.GetPartition()))
			}
			id := bucketOf(t, p, bo.GetBucket())
			if _, dup := start[id]; !dup && (len(m.GetBuckets()) == 0 || slices.Contains(bs, bo.GetBucket())) {
				targets = append(targets, scanTarget{p, bo.GetBucket()})
			}
			start[id] = bo.GetOffset()
		}
		all = false // the offsets say what to scan
		if len(m.GetBuckets()) > 0 {
			for _, p := range parts {
				for _, b := range bs {
					if _, ok := start[bucketOf(t, p, b)]; !ok {
						return fmt.Errorf("%w: from OFFSETS: no offset given for %s", ErrInvalidRequest, where(t, p, b))
					}
				}
			}
		}
	} else {
		for _, p := range parts {
			for _, b := range bs {
				targets = append(targets, scanTarget{p, b})
			}
		}
	}
	var spec OffsetSpec
	switch m.GetFrom() {
	case flussv1.ScanRequest_EARLIEST:
		spec = OffsetEarliest
	case flussv1.ScanRequest_LATEST:
		spec = OffsetLatest
	case flussv1.ScanRequest_TIMESTAMP:
		spec = OffsetTimestamp
	case flussv1.ScanRequest_OFFSETS:
	default:
		return fmt.Errorf("%w: unknown scan start %d (want EARLIEST, LATEST, TIMESTAMP or OFFSETS)", ErrInvalidRequest, m.GetFrom())
	}
	sc := &scan{s: s, plan: plan, follow: m.GetFollow(), start: start, ends: map[raftmeta.BucketID]int64{}}
	for _, tg := range targets {
		if err := sc.position(ctx, tg, spec, m.GetTimestampMs()); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs := make(chan *flussv1.ScanResponse)
	errc := make(chan error, 1)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
		cancel()
	}
	var wg sync.WaitGroup
	maxBytes, _ := s.fetchLimits(0, 0)
	run := func(tg scanTarget) {
		wg.Go(func() {
			if err := sc.bucket(ctx, tg, maxBytes, msgs); err != nil {
				fail(err)
			}
		})
	}
	for _, tg := range targets {
		run(tg)
	}
	if all && m.GetFollow() {
		// Counted in wg, so the Go calls it makes never race a Wait at zero.
		wg.Go(func() {
			if err := sc.newPartitions(ctx, parts, bs, run); err != nil {
				fail(err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case msg := <-msgs:
			if err := stream.Send(msg); err != nil {
				cancel()
				<-done
				return err
			}
		case <-done:
			select {
			case err := <-errc:
				return err
			default:
			}
			return ctx.Err()
		}
	}
}

// scanTarget is one bucket a Scan reads.
type scanTarget struct {
	part   *raftmeta.Partition // nil: unpartitioned table
	bucket int32
}

// scan is the state one Scan shares between its bucket goroutines. start
// and ends are written before the goroutines start, or (for partitions
// found later) under mu.
type scan struct {
	s      *service
	plan   *readPlan
	follow bool
	mu     sync.Mutex
	start  map[raftmeta.BucketID]int64
	ends   map[raftmeta.BucketID]int64 // without follow: where each bucket ends
}

// position sets where target starts (unless the request gave an offset)
// and, without follow, where it ends.
func (sc *scan) position(ctx context.Context, tg scanTarget, spec OffsetSpec, tsMs int64) error {
	t := sc.plan.t
	id := bucketOf(t, tg.part, tg.bucket)
	sc.mu.Lock()
	start, given := sc.start[id]
	sc.mu.Unlock()
	if !given {
		off, err := sc.s.b.ListOffset(ctx, id, spec, tsMs)
		if err != nil {
			return fmt.Errorf("scan %s: start offset: %w", where(t, tg.part, tg.bucket), err)
		}
		sc.mu.Lock()
		sc.start[id] = off
		sc.mu.Unlock()
	}
	if !sc.follow {
		end, err := sc.s.b.ListOffset(ctx, id, OffsetLatest, 0)
		if err != nil {
			return fmt.Errorf("scan %s: end offset: %w", where(t, tg.part, tg.bucket), err)
		}
		if given && start > end {
			// As Fetch answers; a following Scan learns it from its
			// first Fetch.
			return fmt.Errorf("%w: scan %s: offset %d is past the end of the log (%d)", ErrOffsetOutOfRange, where(t, tg.part, tg.bucket), start, end)
		}
		sc.mu.Lock()
		sc.ends[id] = end
		sc.mu.Unlock()
	}
	return nil
}

// newPartitionsEvery is how often a following Scan of a partitioned table
// looks for partitions created since it started.
const newPartitionsEvery = time.Second

// newPartitions runs until ctx ends, starting run for every bucket of each
// partition of the table that is not in known, from its earliest offset.
// A new partition's buckets may not have leaders yet when the catalog
// shows it: such a bucket is tried again on the next round.
func (sc *scan) newPartitions(ctx context.Context, known []*raftmeta.Partition, bs []int32, run func(scanTarget)) error {
	t := sc.plan.t
	seen := map[int64]bool{}
	for _, p := range known {
		seen[p.ID] = true
	}
	started := map[raftmeta.BucketID]bool{}
	tick := time.NewTicker(newPartitionsEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		ps, err := sc.s.b.Partitions(ctx, t.ID)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("scan %s: partitions: %w", t.FullName(), err)
		}
		for _, p := range ps {
			if seen[p.ID] {
				continue
			}
			all := true
			for _, b := range bs {
				tg := scanTarget{p, b}
				id := bucketOf(t, p, b)
				if started[id] {
					continue
				}
				err := sc.position(ctx, tg, OffsetEarliest, 0)
				switch {
				case err == nil:
					started[id] = true
					run(tg)
				case ctx.Err() != nil:
					return nil
				case errors.Is(err, ErrNoBucketLeader), errors.Is(err, ErrNotLeader), errors.Is(err, ErrBucketNotFound):
					all = false // not open yet, or gone: seen again next round
				default:
					return err
				}
			}
			seen[p.ID] = all
		}
	}
}

// dropped reports whether partition p is gone from the catalog: its
// buckets then end a scan quietly.
func (sc *scan) dropped(ctx context.Context, p *raftmeta.Partition) bool {
	if p == nil {
		return false
	}
	_, err := sc.s.b.Partition(ctx, sc.plan.t.ID, p.Name)
	return errors.Is(err, raftmeta.ErrPartitionNotFound)
}

// bucket reads one bucket from its start offset and hands each non-empty
// step to msgs. Without follow it stops at its end offset.
func (sc *scan) bucket(ctx context.Context, tg scanTarget, maxBytes int, msgs chan<- *flussv1.ScanResponse) error {
	t := sc.plan.t
	id := bucketOf(t, tg.part, tg.bucket)
	sc.mu.Lock()
	offset := sc.start[id]
	end, bounded := sc.ends[id]
	sc.mu.Unlock()
	for {
		if bounded && offset >= end {
			return nil
		}
		wait := time.Duration(0)
		if sc.follow {
			wait = sc.s.lim.MaxWait
		}
		res, err := sc.s.b.Fetch(ctx, id, offset, maxBytes, wait)
		if err != nil {
			if ctx.Err() != nil || sc.dropped(ctx, tg.part) {
				return nil
			}
			return fmt.Errorf("scan %s at offset %d: %w", where(t, tg.part, tg.bucket), offset, err)
		}
		out, err := sc.plan.convert(res.Batches, offset, 0, maxBytes)
		if err != nil {
			return err
		}
		if out.nextOffset == offset {
			if !sc.follow {
				return nil // nothing more below the end
			}
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		msg := &flussv1.ScanResponse{Partition: partitionName(tg.part), Bucket: tg.bucket, NextOffset: out.nextOffset}
		if sc.plan.arrow {
			if len(out.arrowMsgs) > 0 {
				msg.Arrow = sc.plan.arrowStream(out.arrowMsgs)
			}
		} else if out.records > 0 {
			msg.Rows = out.rows
		}
		sc.s.m.read(t, out.records, len(msg.Rows)+len(msg.Arrow))
		offset = out.nextOffset
		select {
		case msgs <- msg:
		case <-ctx.Done():
			return nil
		}
	}
}

// quoteClipped quotes a client's string for an error message, at most 200
// bytes of it: the message goes back to the client and into logs.
func quoteClipped(s string) string {
	const max = 200
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:max], len(s))
}
