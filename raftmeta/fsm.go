package raftmeta

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fluss-node/fluss-node/proto/metapb"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
)

// ApplyResult is the response of FSM.Apply for every command. Err is a
// domain error (wrapping one of the sentinels); ID is the id the command
// assigned (table or partition id), or the existing id when an
// ignore-if-exists create found the object already there.
type ApplyResult struct {
	ID  int64
	Err error
}

// state is the catalog. Its maps are owned by the FSM and mutated only by
// Apply under FSM.mu; the values they hold (*Table, *Partition, *Database,
// assignment slices) are immutable once stored and are handed out to
// readers as they are.
type state struct {
	clusterID       string
	nextTableID     int64
	nextPartitionID int64
	appliedIndex    uint64
	// forgottenNodeID is the highest id forgetNode removed (0: none).
	forgottenNodeID NodeID
	// config is the cluster-wide settings (zero fields: not set yet).
	config ClusterConfig
	// fenced are the nodes fenceNodes fenced, ascending; replaced, never
	// edited.
	fenced []NodeID

	nodes      map[NodeID]Node
	databases  map[string]*Database
	tables     map[int64]*Table
	tableNames map[string]int64 // "db.table" → id
	partitions map[int64]*Partition
	// partNames maps a table id to its partitions by name.
	partNames map[int64]map[string]int64
	// assignments maps a table id to its buckets' assignments, sorted by
	// (partition id, bucket). A slice is replaced, never edited.
	assignments map[int64][]Assignment
}

func newState() *state {
	return &state{
		nextTableID:     1,
		nextPartitionID: 1,
		nodes:           map[NodeID]Node{},
		databases:       map[string]*Database{},
		tables:          map[int64]*Table{},
		tableNames:      map[string]int64{},
		partitions:      map[int64]*Partition{},
		partNames:       map[int64]map[string]int64{},
		assignments:     map[int64][]Assignment{},
	}
}

// FSM is the catalog state machine of the metadata Raft group. It
// implements raft.FSM. Apply, Snapshot and Restore are called by raft's FSM
// goroutine; every read method may be called from any goroutine and returns
// immutable values or fresh slices.
type FSM struct {
	mu    sync.RWMutex
	st    *state
	watch chan struct{} // closed on the next change; guarded by mu

	applied  atomic.Uint64
	restores atomic.Int64 // snapshots restored; for tests and stats
	// fenced is st.fenced, readable without mu: nodes ask on every raft
	// request they receive (FencedNodes).
	fenced atomic.Pointer[[]NodeID]
}

// NewFSM returns an empty catalog.
func NewFSM() *FSM {
	return &FSM{st: newState(), watch: make(chan struct{})}
}

var _ raft.FSM = (*FSM)(nil)

// Apply applies one committed command. It panics only when the entry does
// not decode (the replica must stop rather than diverge); domain errors are
// returned as *ApplyResult.
func (f *FSM) Apply(l *raft.Log) any {
	cmd, err := DecodeCommand(l.Data)
	if err != nil {
		panic(fmt.Sprintf("raftmeta: log entry %d: %v", l.Index, err))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res, changed := f.st.apply(cmd)
	f.st.appliedIndex = l.Index
	f.applied.Store(l.Index)
	fenced := f.st.fenced // a copy of the header: apply replaces the slice, never edits it
	f.fenced.Store(&fenced)
	if changed {
		close(f.watch)
		f.watch = make(chan struct{})
	}
	return res
}

// Watch returns a channel that is closed on the next applied change (or
// restore). Call it again after it fires.
func (f *FSM) Watch() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.watch
}

// AppliedIndex is the index of the last log entry applied (or the index of
// the restored snapshot).
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Snapshot captures the catalog as a protobuf State; Persist writes it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnapshot{st: f.st.toPB()}, nil
}

// MarshalState returns the deterministic encoding of the whole catalog:
// exactly the bytes a snapshot persists.
func (f *FSM) MarshalState() ([]byte, error) {
	f.mu.RLock()
	pb := f.st.toPB()
	f.mu.RUnlock()
	return marshalOpts.Marshal(pb)
}

// Restore replaces the catalog with the snapshot read from rc.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("raftmeta: read snapshot: %w", err)
	}
	st, err := decodeState(b)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	f.applied.Store(st.appliedIndex)
	fenced := st.fenced
	f.fenced.Store(&fenced)
	f.restores.Add(1)
	close(f.watch)
	f.watch = make(chan struct{})
	return nil
}

type fsmSnapshot struct{ st *metapb.State }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	b, err := marshalOpts.Marshal(s.st)
	if err == nil {
		_, err = sink.Write(b)
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftmeta: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

func (st *state) toPB() *metapb.State {
	out := &metapb.State{
		ClusterId:       st.clusterID,
		NextTableId:     st.nextTableID,
		NextPartitionId: st.nextPartitionID,
		AppliedIndex:    st.appliedIndex,
		ForgottenNodeId: int32(st.forgottenNodeID),
		ClusterConfig:   clusterConfigToPB(st.config),
	}
	for _, id := range st.fenced {
		out.FencedNodeIds = append(out.FencedNodeIds, int32(id))
	}
	for _, id := range slices.Sorted(maps.Keys(st.nodes)) {
		out.Nodes = append(out.Nodes, nodeToPB(st.nodes[id]))
	}
	for _, name := range slices.Sorted(maps.Keys(st.databases)) {
		d := st.databases[name]
		out.Databases = append(out.Databases, &metapb.Database{Name: d.Name, Comment: d.Comment, CreatedAtMs: d.CreatedAtMs})
	}
	tids := slices.Sorted(maps.Keys(st.tables))
	for _, id := range tids {
		out.Tables = append(out.Tables, tableToPB(st.tables[id]))
	}
	for _, id := range slices.Sorted(maps.Keys(st.partitions)) {
		out.Partitions = append(out.Partitions, partitionToPB(st.partitions[id]))
	}
	for _, id := range tids {
		for _, a := range st.assignments[id] {
			out.Assignments = append(out.Assignments, assignmentToPB(a))
		}
	}
	return out
}

// decodeState parses a snapshot and rebuilds the catalog from it.
func decodeState(b []byte) (*state, error) {
	var pb metapb.State
	if err := proto.Unmarshal(b, &pb); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	st := newState()
	st.clusterID = pb.ClusterId
	st.nextTableID = pb.NextTableId
	st.nextPartitionID = pb.NextPartitionId
	st.appliedIndex = pb.AppliedIndex
	st.forgottenNodeID = NodeID(pb.ForgottenNodeId)
	st.config = clusterConfigFromPB(pb.ClusterConfig)
	if err := st.config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	for i, id := range pb.FencedNodeIds {
		if id <= 0 || i > 0 && id <= pb.FencedNodeIds[i-1] {
			return nil, fmt.Errorf("%w: fenced node ids not positive and ascending", ErrBadSnapshot)
		}
		st.fenced = append(st.fenced, NodeID(id))
	}
	for _, n := range pb.Nodes {
		if n == nil {
			return nil, fmt.Errorf("%w: nil node", ErrBadSnapshot)
		}
		st.nodes[NodeID(n.Id)] = nodeFromPB(n)
	}
	for _, d := range pb.Databases {
		if d == nil {
			return nil, fmt.Errorf("%w: nil database", ErrBadSnapshot)
		}
		st.databases[d.Name] = &Database{Name: d.Name, Comment: d.Comment, CreatedAtMs: d.CreatedAtMs}
	}
	for _, pt := range pb.Tables {
		if pt == nil {
			return nil, fmt.Errorf("%w: nil table", ErrBadSnapshot)
		}
		t, err := tableFromPB(pt)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		st.tables[t.ID] = t
		st.tableNames[t.FullName()] = t.ID
	}
	for _, pp := range pb.Partitions {
		if pp == nil {
			return nil, fmt.Errorf("%w: nil partition", ErrBadSnapshot)
		}
		p := partitionFromPB(pp)
		st.partitions[p.ID] = p
		if st.partNames[p.TableID] == nil {
			st.partNames[p.TableID] = map[string]int64{}
		}
		st.partNames[p.TableID][p.Name] = p.ID
	}
	for _, pa := range pb.Assignments {
		if pa == nil {
			return nil, fmt.Errorf("%w: nil assignment", ErrBadSnapshot)
		}
		a := assignmentFromPB(pa)
		st.assignments[a.TableID] = append(st.assignments[a.TableID], a)
	}
	for id := range st.assignments {
		slices.SortFunc(st.assignments[id], compareAssignments)
	}
	return st, nil
}

func compareAssignments(a, b Assignment) int {
	return cmp.Or(cmp.Compare(a.TableID, b.TableID), cmp.Compare(a.PartitionID, b.PartitionID), cmp.Compare(a.Bucket, b.Bucket))
}

// ---------------------------------------------------------------- reads

// ClusterID is the cluster's id, "" until one is set.
func (f *FSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.clusterID
}

// ClusterConfig is the cluster-wide settings; a field is zero until set
// (SetClusterConfig).
func (f *FSM) ClusterConfig() ClusterConfig {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.config
}

// ForgottenNodeID is the highest node id ForgetNode removed (0: none); a
// joining node is given a higher one.
func (f *FSM) ForgottenNodeID() NodeID {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.forgottenNodeID
}

// FencedNodes are the nodes FenceNodes fenced, ascending (nil: none). The
// slice is shared: do not modify it. It takes no lock.
func (f *FSM) FencedNodes() []NodeID {
	if p := f.fenced.Load(); p != nil {
		return *p
	}
	return nil
}

// Databases lists every database, sorted by name.
func (f *FSM) Databases() []Database {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Database, 0, len(f.st.databases))
	for _, name := range slices.Sorted(maps.Keys(f.st.databases)) {
		out = append(out, *f.st.databases[name])
	}
	return out
}

// Database returns the named database.
func (f *FSM) Database(name string) (Database, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d, ok := f.st.databases[name]
	if !ok {
		return Database{}, Named(ErrDatabaseNotFound, "database %q not found", name)
	}
	return *d, nil
}

// Tables lists the tables of a database, sorted by name.
func (f *FSM) Tables(db string) ([]*Table, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if _, ok := f.st.databases[db]; !ok {
		return nil, Named(ErrDatabaseNotFound, "database %q not found", db)
	}
	var out []*Table
	for _, t := range f.st.tables {
		if t.Database == db {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *Table) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// AllTables lists every table, sorted by id.
func (f *FSM) AllTables() []*Table {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Table, 0, len(f.st.tables))
	for _, id := range slices.Sorted(maps.Keys(f.st.tables)) {
		out = append(out, f.st.tables[id])
	}
	return out
}

// TableByName returns the table db.name. The result is immutable.
func (f *FSM) TableByName(db, name string) (*Table, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if id, ok := f.st.tableNames[db+"."+name]; ok {
		return f.st.tables[id], nil
	}
	if _, ok := f.st.databases[db]; !ok {
		return nil, Named(ErrDatabaseNotFound, "table %s.%s not found: database %q not found", db, name, db)
	}
	return nil, Named(ErrTableNotFound, "table %s.%s not found", db, name)
}

// TableByID returns the table with the given id. The result is immutable.
func (f *FSM) TableByID(id int64) (*Table, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if t, ok := f.st.tables[id]; ok {
		return t, nil
	}
	return nil, Named(ErrTableNotFound, "table id %d not found", id)
}

// Partitions lists a table's partitions, sorted by name.
func (f *FSM) Partitions(tableID int64) ([]*Partition, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if _, ok := f.st.tables[tableID]; !ok {
		return nil, Named(ErrTableNotFound, "table id %d not found", tableID)
	}
	names := f.st.partNames[tableID]
	out := make([]*Partition, 0, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		out = append(out, f.st.partitions[names[name]])
	}
	return out, nil
}

// PartitionByName returns the named partition of a table.
func (f *FSM) PartitionByName(tableID int64, name string) (*Partition, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.tables[tableID]
	if !ok {
		return nil, Named(ErrTableNotFound, "table id %d not found", tableID)
	}
	if id, ok := f.st.partNames[tableID][name]; ok {
		return f.st.partitions[id], nil
	}
	return nil, Named(ErrPartitionNotFound, "partition %q of table %s not found", name, t.FullName())
}

// Assignments lists every bucket assignment, sorted by (table, partition,
// bucket). The Replicas slices are shared and must not be modified.
func (f *FSM) Assignments() []Assignment {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []Assignment
	for _, id := range slices.Sorted(maps.Keys(f.st.assignments)) {
		out = append(out, f.st.assignments[id]...)
	}
	return out
}

// AssignmentsForTable lists a table's bucket assignments, sorted by
// (partition, bucket). The result must not be modified.
func (f *FSM) AssignmentsForTable(tableID int64) []Assignment {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clip(f.st.assignments[tableID])
}

// Nodes lists the registered nodes, sorted by id.
func (f *FSM) Nodes() []Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Node, 0, len(f.st.nodes))
	for _, id := range slices.Sorted(maps.Keys(f.st.nodes)) {
		out = append(out, f.st.nodes[id])
	}
	return out
}

// Node returns one registered node.
func (f *FSM) Node(id NodeID) (Node, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.st.nodes[id]
	if !ok {
		return Node{}, Named(ErrNodeNotFound, "node %d not found", id)
	}
	return n, nil
}

// assignmentCount is the number of placed buckets (placement's rotation start).
func (f *FSM) assignmentCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := 0
	for _, as := range f.st.assignments {
		n += len(as)
	}
	return n
}
