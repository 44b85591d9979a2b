// Package membackend is an in-memory rpc.Backend for tests of the rpc
// handlers and the Go client: one process, no Raft, no disk.
//
// Invariants: offsets are dense per bucket; a retried (writerID, seq) in a
// bucket returns the first attempt's result and stores nothing; Fetch
// returns only whole stored batches, at least one when any holds offsets
// >= offset; every method is safe for concurrent use.
package membackend

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Backend is the in-memory rpc.Backend.
type Backend struct {
	mu      sync.Mutex
	dbs     map[string]bool
	tables  map[string]*raftmeta.Table
	buckets map[raftmeta.BucketID]*bucket
	nextID  int64
	parts   map[int64][]*raftmeta.Partition // by table id, sorted by name
	nextPID int64
	appends int // Append calls that stored something
	now     func() int64

	// AppendHook, when set, runs before every Append; a non-nil error is
	// returned instead of appending (e.g. rpc.ErrNoBucketLeader to test
	// client retries).
	AppendHook func(b raftmeta.BucketID) error
	// ReadHook, when set, runs before every Fetch and ListOffset, like
	// AppendHook.
	ReadHook func(b raftmeta.BucketID) error
	// ReadyErr is what Ready returns.
	ReadyErr error
}

type bucket struct {
	batches [][]byte
	next    int64
	writers map[int64]writerState
	notify  chan struct{} // closed and replaced on every append
}

type writerState struct {
	seq int32
	res rpc.AppendResult
}

// New returns an empty backend.
func New() *Backend {
	return &Backend{
		dbs: map[string]bool{}, tables: map[string]*raftmeta.Table{},
		buckets: map[raftmeta.BucketID]*bucket{}, nextID: 1,
		parts: map[int64][]*raftmeta.Partition{}, nextPID: 1,
		now: func() int64 { return time.Now().UnixMilli() },
	}
}

// Appends is the number of Append calls that stored data.
func (m *Backend) Appends() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.appends
}

// Records returns the number of records stored in a bucket.
func (m *Backend) Records(tableID int64, b int32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if bk := m.buckets[raftmeta.BucketID{TableID: tableID, Bucket: b}]; bk != nil {
		return bk.next
	}
	return 0
}

func (m *Backend) CreateDatabase(ctx context.Context, name, comment string, ignoreIfExists bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dbs[name] {
		if ignoreIfExists {
			return nil
		}
		return fmt.Errorf("%w: %q", raftmeta.ErrDatabaseExists, name)
	}
	m.dbs[name] = true
	return nil
}

func (m *Backend) DropDatabase(ctx context.Context, name string, ignoreIfNotExists, cascade bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dbs[name] {
		if ignoreIfNotExists {
			return nil
		}
		return fmt.Errorf("%w: %q", raftmeta.ErrDatabaseNotFound, name)
	}
	for n := range m.tables {
		if strings.HasPrefix(n, name+".") {
			if !cascade {
				return fmt.Errorf("%w: %q has tables", raftmeta.ErrDatabaseNotEmpty, name)
			}
			delete(m.tables, n)
		}
	}
	delete(m.dbs, name)
	return nil
}

func (m *Backend) ListDatabases(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for d := range m.dbs {
		out = append(out, d)
	}
	slices.Sort(out)
	return out, nil
}

func (m *Backend) CreateTable(ctx context.Context, spec raftmeta.TableSpec, ignoreIfExists bool) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dbs[spec.Database] {
		return 0, fmt.Errorf("%w: %q", raftmeta.ErrDatabaseNotFound, spec.Database)
	}
	full := spec.Database + "." + spec.Name
	if t, ok := m.tables[full]; ok {
		if ignoreIfExists {
			return t.ID, nil
		}
		return 0, fmt.Errorf("%w: %q", raftmeta.ErrTableExists, full)
	}
	sch := &record.Schema{ID: 1, Columns: spec.Columns, PrimaryKey: spec.PrimaryKey}
	if err := sch.Validate(); err != nil {
		return 0, fmt.Errorf("%w: %w", raftmeta.ErrInvalid, err)
	}
	n := spec.BucketCount
	if n == 0 {
		n = 1
	}
	keys := spec.BucketKeys
	if len(keys) == 0 {
		keys = spec.PrimaryKey
	}
	for _, k := range keys {
		if sch.Index(k) < 0 {
			return 0, fmt.Errorf("%w: bucket key %q is not a column", raftmeta.ErrInvalid, k)
		}
	}
	t := &raftmeta.Table{
		ID: m.nextID, Database: spec.Database, Name: spec.Name, Schemas: []*record.Schema{sch},
		PartitionKeys: spec.PartitionKeys, BucketKeys: keys, BucketCount: n,
		Properties: spec.Properties, Comment: spec.Comment, CreatedAtMs: m.now(),
	}
	m.nextID++
	m.tables[full] = t
	return t.ID, nil
}

// ReplaceTable makes name's catalog entry t, e.g. an earlier version of it
// to play a node whose catalog lags.
func (m *Backend) ReplaceTable(name string, t *raftmeta.Table) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tables[name] = t
}

func (m *Backend) Table(ctx context.Context, name string) (*raftmeta.Table, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tables[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", raftmeta.ErrTableNotFound, name)
	}
	return t, nil
}

func (m *Backend) ListTables(ctx context.Context, database string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dbs[database] {
		return nil, fmt.Errorf("%w: %q", raftmeta.ErrDatabaseNotFound, database)
	}
	var out []string
	for _, t := range m.tables {
		if t.Database == database {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (m *Backend) DropTable(ctx context.Context, name string, ignoreIfNotExists bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tables[name]; !ok {
		if ignoreIfNotExists {
			return nil
		}
		return fmt.Errorf("%w: %q", raftmeta.ErrTableNotFound, name)
	}
	delete(m.tables, name)
	return nil
}

func (m *Backend) AddColumns(ctx context.Context, name string, cols []record.Column) (int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tables[name]
	if !ok {
		return 0, fmt.Errorf("%w: %q", raftmeta.ErrTableNotFound, name)
	}
	cur := t.Schema()
	if cur.HasPrimaryKey() {
		return 0, fmt.Errorf("%w: table %s has a primary key", raftmeta.ErrInvalid, name)
	}
	if err := raftmeta.ValidateNewColumns(name, cur, cols); err != nil {
		return 0, err
	}
	next := &record.Schema{ID: cur.ID + 1, Columns: append(slices.Clone(cur.Columns), cols...)}
	nt := *t // tables are immutable once handed out
	nt.Schemas = append(slices.Clip(t.Schemas), next)
	m.tables[name] = &nt
	return next.ID, nil
}

func (m *Backend) SetTableProperties(ctx context.Context, name string, set map[string]string, reset []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.tableLocked(name)
	if err != nil {
		return err
	}
	props, err := raftmeta.AlterProperties(t, set, reset)
	if err != nil {
		return err
	}
	nt := *t // tables are immutable once handed out
	nt.Properties = props
	m.tables[name] = &nt
	return nil
}

func (m *Backend) tableLocked(name string) (*raftmeta.Table, error) {
	t, ok := m.tables[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", raftmeta.ErrTableNotFound, name)
	}
	return t, nil
}

func (m *Backend) CreatePartition(ctx context.Context, table string, values map[string]string, ignoreIfExists bool) (*raftmeta.Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.tableLocked(table)
	if err != nil {
		return nil, err
	}
	name, err := raftmeta.PartitionName(t, values)
	if err != nil {
		return nil, err
	}
	for _, p := range m.parts[t.ID] {
		if p.Name == name {
			if ignoreIfExists {
				return p, nil
			}
			return nil, fmt.Errorf("%w: %q", raftmeta.ErrPartitionExists, name)
		}
	}
	p := &raftmeta.Partition{ID: m.nextPID, TableID: t.ID, Name: name, Values: maps.Clone(values), CreatedAtMs: m.now()}
	m.nextPID++
	m.parts[t.ID] = append(m.parts[t.ID], p)
	slices.SortFunc(m.parts[t.ID], func(a, b *raftmeta.Partition) int { return strings.Compare(a.Name, b.Name) })
	return p, nil
}

func (m *Backend) DropPartition(ctx context.Context, table string, values map[string]string, ignoreIfNotExists bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.tableLocked(table)
	if err != nil {
		return err
	}
	name, err := raftmeta.PartitionName(t, values)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(m.parts[t.ID], func(p *raftmeta.Partition) bool { return p.Name == name })
	if i < 0 {
		if ignoreIfNotExists {
			return nil
		}
		return fmt.Errorf("%w: %q", raftmeta.ErrPartitionNotFound, name)
	}
	m.parts[t.ID] = slices.Delete(slices.Clone(m.parts[t.ID]), i, i+1)
	return nil
}

func (m *Backend) Partitions(ctx context.Context, tableID int64) ([]*raftmeta.Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.parts[tableID]), nil
}

func (m *Backend) Partition(ctx context.Context, tableID int64, name string) (*raftmeta.Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.parts[tableID] {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("partition %q: %w", name, raftmeta.ErrPartitionNotFound)
}

func (m *Backend) Layout(ctx context.Context, tableID int64, inSync bool) ([]rpc.BucketLayout, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.tables {
		if t.ID == tableID {
			out := make([]rpc.BucketLayout, t.BucketCount)
			for i := range out {
				out[i] = rpc.BucketLayout{Bucket: int32(i), Leader: 1, Replicas: []raftmeta.NodeID{1}}
				if inSync {
					out[i].InSync = []raftmeta.NodeID{1}
				}
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%w: id %d", raftmeta.ErrTableNotFound, tableID)
}

func (m *Backend) DescribeCluster(ctx context.Context) (*rpc.ClusterInfo, error) {
	return &rpc.ClusterInfo{ClusterID: "mem", MetaLeader: 1, Nodes: []rpc.NodeInfo{{
		Node:     raftmeta.Node{ID: 1, ClientAddr: "127.0.0.1:9123", State: raftmeta.NodeActive, Version: "test"},
		MetaRole: "leader",
	}}}, nil
}

func (m *Backend) bucketLocked(b raftmeta.BucketID) *bucket {
	bk := m.buckets[b]
	if bk == nil {
		bk = &bucket{writers: map[int64]writerState{}, notify: make(chan struct{})}
		m.buckets[b] = bk
	}
	return bk
}

func (m *Backend) Append(ctx context.Context, b raftmeta.BucketID, batches [][]byte, writerID int64, seq int32) (rpc.AppendResult, error) {
	if m.AppendHook != nil {
		if err := m.AppendHook(b); err != nil {
			return rpc.AppendResult{}, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bk := m.bucketLocked(b)
	if writerID != 0 {
		if w, ok := bk.writers[writerID]; ok && seq <= w.seq {
			return w.res, nil
		}
	}
	res := rpc.AppendResult{BaseOffset: bk.next}
	ts := m.now()
	for _, raw := range batches {
		bt, _, err := record.ParseBatch(raw)
		if err != nil {
			return rpc.AppendResult{}, fmt.Errorf("membackend: %w", err)
		}
		c := bytes.Clone(raw)
		record.Restamp(c, bk.next, ts)
		bk.batches = append(bk.batches, c)
		bk.next += int64(bt.RecordCount)
		res.Count += bt.RecordCount
	}
	if writerID != 0 {
		bk.writers[writerID] = writerState{seq: seq, res: res}
	}
	m.appends++
	close(bk.notify)
	bk.notify = make(chan struct{})
	return res, nil
}

func (m *Backend) Fetch(ctx context.Context, b raftmeta.BucketID, offset int64, maxBytes int, maxWait time.Duration) (*rpc.FetchResult, error) {
	if m.ReadHook != nil {
		if err := m.ReadHook(b); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(maxWait)
	for {
		m.mu.Lock()
		bk := m.bucketLocked(b)
		if offset < 0 || offset > bk.next {
			next := bk.next
			m.mu.Unlock()
			return nil, fmt.Errorf("%w: offset %d, log is [0, %d]", rpc.ErrOffsetOutOfRange, offset, next)
		}
		res := &rpc.FetchResult{HighWatermark: bk.next}
		size := 0
		for _, raw := range bk.batches {
			bt, _, _ := record.ParseBatch(raw)
			if bt.BaseOffset+int64(bt.RecordCount) <= offset {
				continue
			}
			if len(res.Batches) > 0 && size+len(raw) > maxBytes {
				break
			}
			res.Batches = append(res.Batches, raw)
			size += len(raw)
		}
		notify := bk.notify
		m.mu.Unlock()
		wait := time.Until(deadline)
		if len(res.Batches) > 0 || wait <= 0 {
			return res, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		case <-notify:
			t.Stop()
		}
	}
}

func (m *Backend) ListOffset(ctx context.Context, b raftmeta.BucketID, spec rpc.OffsetSpec, tsMs int64) (int64, error) {
	if m.ReadHook != nil {
		if err := m.ReadHook(b); err != nil {
			return 0, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bk := m.bucketLocked(b)
	switch spec {
	case rpc.OffsetEarliest:
		return 0, nil
	case rpc.OffsetLatest:
		return bk.next, nil
	default:
		for _, raw := range bk.batches {
			bt, _, _ := record.ParseBatch(raw)
			if bt.CommitTimestamp >= tsMs {
				return bt.BaseOffset, nil
			}
		}
		return bk.next, nil
	}
}

func (m *Backend) Ready() error { return m.ReadyErr }

var _ rpc.Backend = (*Backend)(nil)

// errNoPK: primary-key tables need the real KV path; their handlers are
// tested against real nodes (node and integration packages).
var errNoPK = fmt.Errorf("%w: the in-memory test backend has no primary-key state", rpc.ErrUnimplemented)

func (m *Backend) Write(context.Context, raftmeta.BucketID, *rpc.PKWrite, int64, int32) (rpc.AppendResult, error) {
	return rpc.AppendResult{}, errNoPK
}

func (m *Backend) Lookup(context.Context, raftmeta.BucketID, [][]byte, int) ([][]byte, error) {
	return nil, errNoPK
}

func (m *Backend) PrefixScan(context.Context, raftmeta.BucketID, []byte, int, int) ([][]byte, error) {
	return nil, errNoPK
}

// LeadsLocally: every bucket of the in-memory backend is local.
func (m *Backend) LeadsLocally(raftmeta.BucketID) bool { return true }
