package raftmeta

import (
	"fmt"
	"maps"
	"slices"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/proto/metapb"
)

// apply executes one decoded command against st. It is deterministic: it
// reads nothing but st and cmd, and every map iteration it does only
// deletes or checks, never orders output. It reports whether st changed.
// A command that fails changes nothing.
func (st *state) apply(cmd *metapb.Command) (*ApplyResult, bool) {
	var (
		id  int64
		err error
	)
	changed := true
	switch c := cmd.Cmd.(type) {
	case *metapb.Command_CreateDatabase:
		changed, err = st.createDatabase(c.CreateDatabase)
	case *metapb.Command_DropDatabase:
		changed, err = st.dropDatabase(c.DropDatabase)
	case *metapb.Command_CreateTable:
		id, changed, err = st.createTable(c.CreateTable)
	case *metapb.Command_DropTable:
		changed, err = st.dropTable(c.DropTable)
	case *metapb.Command_CreatePartition:
		id, changed, err = st.createPartition(c.CreatePartition)
	case *metapb.Command_DropPartition:
		changed, err = st.dropPartition(c.DropPartition)
	case *metapb.Command_SetAssignments:
		err = st.setAssignments(c.SetAssignments.Assignments)
	case *metapb.Command_RegisterNode:
		err = st.registerNode(c.RegisterNode.Node)
	case *metapb.Command_SetNodeState:
		err = st.setNodeState(c.SetNodeState)
	case *metapb.Command_SetTableProperties:
		err = st.setTableProperties(c.SetTableProperties)
	case *metapb.Command_ForgetNode:
		err = st.forgetNode(c.ForgetNode)
	case *metapb.Command_SetClusterId:
		changed, err = st.setClusterID(c.SetClusterId)
	case *metapb.Command_SetClusterConfig:
		changed, err = st.setClusterConfig(c.SetClusterConfig)
	case *metapb.Command_RestoreBucket:
		err = st.restoreBucket(c.RestoreBucket)
	case *metapb.Command_FenceNodes:
		changed, err = st.fenceNodes(c.FenceNodes)
	case *metapb.Command_AddColumns:
		var sid int32
		sid, err = st.addColumns(c.AddColumns)
		id = int64(sid)
	default:
		// DecodeCommand rejects these; reaching here is a programming error.
		panic(fmt.Sprintf("raftmeta: unknown command %T", c))
	}
	if err != nil {
		changed = false
	}
	return &ApplyResult{ID: id, Err: err}, changed
}

func (st *state) createDatabase(c *metapb.CreateDatabase) (bool, error) {
	d := c.Database
	if _, ok := st.databases[d.Name]; ok {
		if c.IgnoreIfExists {
			return false, nil
		}
		return false, Named(ErrDatabaseExists, "database %q already exists", d.Name)
	}
	if err := ValidateDatabaseName(d.Name); err != nil {
		return false, err
	}
	st.databases[d.Name] = &Database{Name: d.Name, Comment: d.Comment, CreatedAtMs: d.CreatedAtMs}
	return true, nil
}

func (st *state) dropDatabase(c *metapb.DropDatabase) (bool, error) {
	if _, ok := st.databases[c.Name]; !ok {
		if c.IgnoreIfNotExists {
			return false, nil
		}
		return false, Named(ErrDatabaseNotFound, "database %q not found", c.Name)
	}
	var ids []int64
	for id, t := range st.tables {
		if t.Database == c.Name {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 && !c.Cascade {
		tables := "1 table"
		if len(ids) > 1 {
			tables = fmt.Sprintf("%d tables", len(ids))
		}
		return false, Named(ErrDatabaseNotEmpty, "database %q is not empty: it holds %s (drop them first, or drop the database with cascade)", c.Name, tables)
	}
	for _, id := range ids {
		st.removeTable(id)
	}
	delete(st.databases, c.Name)
	return true, nil
}

func (st *state) removeTable(id int64) {
	t := st.tables[id]
	delete(st.tableNames, t.FullName())
	delete(st.tables, id)
	for _, pid := range st.partNames[id] {
		delete(st.partitions, pid)
	}
	delete(st.partNames, id)
	delete(st.assignments, id)
}

func (st *state) createTable(c *metapb.CreateTable) (int64, bool, error) {
	t, err := tableFromPB(c.Table)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, ok := st.databases[t.Database]; !ok {
		return 0, false, Named(ErrDatabaseNotFound, "database %q not found", t.Database)
	}
	if id, ok := st.tableNames[t.FullName()]; ok {
		if c.IgnoreIfExists {
			return id, false, nil
		}
		return id, false, Named(ErrTableExists, "table %s already exists", t.FullName())
	}
	if err := ValidateTableName(t.Name); err != nil {
		return 0, false, err
	}
	if t.BucketCount < 1 || t.BucketCount > MaxBuckets {
		return 0, false, fmt.Errorf("%w: table %s: bucket count %d outside 1..%d", ErrInvalid, t.FullName(), t.BucketCount, MaxBuckets)
	}
	t.ID = st.nextTableID
	var as []Assignment
	if len(t.PartitionKeys) > 0 {
		if len(c.Assignments) != 0 {
			return 0, false, fmt.Errorf("%w: table %s is partitioned: its buckets are assigned per partition", ErrInvalid, t.FullName())
		}
	} else {
		as, err = st.checkNewBuckets(t, NoPartition, c.Assignments)
		if err != nil {
			return 0, false, err
		}
	}
	st.nextTableID++
	st.tables[t.ID] = t
	st.tableNames[t.FullName()] = t.ID
	if len(as) > 0 {
		st.assignments[t.ID] = as
	}
	return t.ID, true, nil
}

// checkNewBuckets converts the assignments of a new table or partition: they
// must name every bucket 0..BucketCount-1 exactly once.
func (st *state) checkNewBuckets(t *Table, partID int64, pbs []*metapb.Assignment) ([]Assignment, error) {
	if len(pbs) != int(t.BucketCount) {
		return nil, fmt.Errorf("%w: table %s has %d buckets but %d assignments", ErrInvalid, t.FullName(), t.BucketCount, len(pbs))
	}
	as := make([]Assignment, t.BucketCount)
	seen := make([]bool, t.BucketCount)
	for _, p := range pbs {
		a := assignmentFromPB(p)
		a.TableID, a.PartitionID = t.ID, partID
		a.Epoch = 0 // the set a bucket is created with
		if a.Bucket < 0 || a.Bucket >= t.BucketCount || seen[a.Bucket] {
			return nil, fmt.Errorf("%w: table %s: bucket %d is out of range or assigned twice", ErrInvalid, t.FullName(), a.Bucket)
		}
		if err := checkReplicas(a); err != nil {
			return nil, err
		}
		seen[a.Bucket] = true
		as[a.Bucket] = a
	}
	return as, nil
}

func checkReplicas(a Assignment) error {
	if len(a.Replicas) == 0 {
		return fmt.Errorf("%w: bucket %d of table %d partition %d has no replicas", ErrInvalid, a.Bucket, a.TableID, a.PartitionID)
	}
	for i, r := range a.Replicas {
		if r <= 0 || slices.Contains(a.Replicas[:i], r) {
			return fmt.Errorf("%w: bucket %d of table %d partition %d: replica %d is invalid or listed twice", ErrInvalid, a.Bucket, a.TableID, a.PartitionID, r)
		}
	}
	return nil
}

// restoreBucket gives a bucket a new replica set that starts a
// new Raft group (the next generation, epoch 0) at c.StartOffset. Whether
// the bucket lost every replica is the proposer's to check (it takes
// liveness, which the state machine does not know).
func (st *state) restoreBucket(c *metapb.RestoreBucket) error {
	if c.StartOffset < 0 {
		return fmt.Errorf("%w: restore bucket %d: start offset %d is negative", ErrInvalid, c.Bucket, c.StartOffset)
	}
	want := assignmentFromPB(&metapb.Assignment{TableId: c.TableId, PartitionId: c.PartitionId, Bucket: c.Bucket, Replicas: c.Replicas})
	if err := checkReplicas(want); err != nil {
		return err
	}
	t, ok := st.tables[c.TableId]
	if !ok {
		return Named(ErrTableNotFound, "restore bucket %d: table id %d not found", c.Bucket, c.TableId)
	}
	as := st.assignments[t.ID]
	i, found := slices.BinarySearchFunc(as, want, compareAssignments)
	if !found {
		if c.PartitionId != NoPartition {
			if pt, ok := st.partitions[c.PartitionId]; !ok || pt.TableID != t.ID {
				return Named(ErrPartitionNotFound, "restore bucket %d: partition id %d of table %s not found", c.Bucket, c.PartitionId, t.FullName())
			}
		}
		return fmt.Errorf("%w: restore: table %s has no bucket %d (it has %d)", ErrInvalid, t.FullName(), c.Bucket, t.BucketCount)
	}
	next := slices.Clone(as)
	want.Generation, want.StartOffset = as[i].Generation+1, c.StartOffset
	next[i] = want
	st.assignments[t.ID] = next
	return nil
}

func (st *state) dropTable(c *metapb.DropTable) (bool, error) {
	full := c.Database + "." + c.Name
	id, ok := st.tableNames[full]
	if !ok {
		if c.IgnoreIfNotExists {
			return false, nil
		}
		if _, ok := st.databases[c.Database]; !ok {
			return false, Named(ErrDatabaseNotFound, "database %q not found", c.Database)
		}
		return false, Named(ErrTableNotFound, "table %s not found", full)
	}
	st.removeTable(id)
	return true, nil
}

func (st *state) createPartition(c *metapb.CreatePartition) (int64, bool, error) {
	t, ok := st.tables[c.TableId]
	if !ok {
		return 0, false, Named(ErrTableNotFound, "create partition %q: table id %d not found", c.Name, c.TableId)
	}
	if id, ok := st.partNames[t.ID][c.Name]; ok {
		if c.IgnoreIfExists {
			return id, false, nil
		}
		return id, false, Named(ErrPartitionExists, "partition %q of table %s already exists", c.Name, t.FullName())
	}
	name, err := PartitionName(t, c.Values)
	if err != nil {
		return 0, false, err
	}
	if name != c.Name {
		return 0, false, fmt.Errorf("%w: partition name %q does not match its values (want %q)", ErrInvalid, c.Name, name)
	}
	if n := len(st.partNames[t.ID]); n >= MaxPartitionsPerTable {
		return 0, false, fmt.Errorf("create partition %q: table %s has %d partitions, the most a table may have (drop old ones first): %w", name, t.FullName(), n, ErrTooManyPartitions)
	} else if total := (n + 1) * int(t.BucketCount); total > MaxBucketsPerTable {
		return 0, false, fmt.Errorf("create partition %q: table %s would have %d buckets in %d partitions of %d, over the %d a table may have (drop old partitions first): %w", name, t.FullName(), total, n+1, t.BucketCount, MaxBucketsPerTable, ErrTooManyPartitions)
	}
	pid := st.nextPartitionID
	as, err := st.checkNewBuckets(t, pid, c.Assignments)
	if err != nil {
		return 0, false, err
	}
	st.nextPartitionID++
	st.partitions[pid] = &Partition{ID: pid, TableID: t.ID, Name: name, Values: maps.Clone(c.Values), CreatedAtMs: c.CreatedAtMs}
	if st.partNames[t.ID] == nil {
		st.partNames[t.ID] = map[string]int64{}
	}
	st.partNames[t.ID][name] = pid
	merged := append(slices.Clone(st.assignments[t.ID]), as...)
	slices.SortFunc(merged, compareAssignments)
	st.assignments[t.ID] = merged
	return pid, true, nil
}

func (st *state) dropPartition(c *metapb.DropPartition) (bool, error) {
	t, ok := st.tables[c.TableId]
	if !ok {
		return false, Named(ErrTableNotFound, "drop partition %q: table id %d not found", c.Name, c.TableId)
	}
	pid, ok := st.partNames[t.ID][c.Name]
	if !ok {
		if c.IgnoreIfNotExists {
			return false, nil
		}
		return false, Named(ErrPartitionNotFound, "partition %q of table %s not found", c.Name, t.FullName())
	}
	delete(st.partitions, pid)
	delete(st.partNames[t.ID], c.Name)
	kept := make([]Assignment, 0, len(st.assignments[t.ID]))
	for _, a := range st.assignments[t.ID] {
		if a.PartitionID != pid {
			kept = append(kept, a)
		}
	}
	st.assignments[t.ID] = kept
	return true, nil
}

func (st *state) setAssignments(pbs []*metapb.Assignment) error {
	// Check everything first: a failed command changes nothing.
	byTable := map[int64][]Assignment{}
	var order []int64
	for _, p := range pbs {
		a := assignmentFromPB(p)
		t, ok := st.tables[a.TableID]
		if !ok {
			return Named(ErrTableNotFound, "assign bucket %d: table id %d not found", a.Bucket, a.TableID)
		}
		if a.PartitionID == NoPartition {
			if len(t.PartitionKeys) > 0 {
				return fmt.Errorf("%w: table %s is partitioned: name a partition for bucket %d", ErrInvalid, t.FullName(), a.Bucket)
			}
		} else if pt, ok := st.partitions[a.PartitionID]; !ok || pt.TableID != t.ID {
			return Named(ErrPartitionNotFound, "assign bucket %d: partition id %d of table %s not found", a.Bucket, a.PartitionID, t.FullName())
		}
		if a.Bucket < 0 || a.Bucket >= t.BucketCount {
			return fmt.Errorf("%w: table %s has no bucket %d (it has %d)", ErrInvalid, t.FullName(), a.Bucket, t.BucketCount)
		}
		if err := checkReplicas(a); err != nil {
			return err
		}
		if _, ok := byTable[a.TableID]; !ok {
			order = append(order, a.TableID)
		}
		byTable[a.TableID] = append(byTable[a.TableID], a)
	}
	for _, tid := range order {
		next := slices.Clone(st.assignments[tid])
		for _, a := range byTable[tid] {
			i, found := slices.BinarySearchFunc(next, a, compareAssignments)
			if found {
				a.Epoch, a.Generation, a.StartOffset = next[i].Epoch, next[i].Generation, next[i].StartOffset
				if !SameReplicas(a.Replicas, next[i].Replicas) {
					a.Epoch++
				}
				next[i] = a
			} else {
				// A bucket without an assignment yet: no replica has
				// Raft state, so this first set bootstraps the group.
				a.Epoch, a.Generation, a.StartOffset = 0, 0, 0
				next = slices.Insert(next, i, a)
			}
		}
		st.assignments[tid] = next
	}
	return nil
}

func validNodeState(s NodeState) bool {
	switch s {
	case NodeJoining, NodeActive, NodeDraining, NodeLeft, NodeDecommissioning:
		return true
	}
	return false
}

func (st *state) registerNode(p *metapb.Node) error {
	n := nodeFromPB(p)
	if n.ID <= 0 {
		return fmt.Errorf("%w: node id %d must be positive", ErrInvalid, n.ID)
	}
	if !validNodeState(n.State) {
		return fmt.Errorf("%w: node %d: state %q is not joining, active, draining, left or decommissioning", ErrInvalid, n.ID, n.State)
	}
	st.nodes[n.ID] = n
	return nil
}

func (st *state) setNodeState(c *metapb.SetNodeState) error {
	n, ok := st.nodes[NodeID(c.Id)]
	if !ok {
		return Named(ErrNodeNotFound, "set state of node %d: node not found", c.Id)
	}
	if !validNodeState(NodeState(c.State)) {
		return fmt.Errorf("%w: node %d: state %q is not joining, active, draining, left or decommissioning", ErrInvalid, c.Id, c.State)
	}
	n.State = NodeState(c.State)
	st.nodes[n.ID] = n
	return nil
}

// setTableProperties applies a property change. The proposer checked it
// whole (AlterProperties); the state machine re-checks only that the table
// exists and each key may change, so the catalog never holds a changed
// key that only a newer build's proposer would allow. table.datalake.format
// may be set once on a table that has none (node: featureLakeFormat).
func (st *state) setTableProperties(c *metapb.SetTableProperties) error {
	t, ok := st.tables[c.TableId]
	if !ok {
		return Named(ErrTableNotFound, "set properties: table id %d not found", c.TableId)
	}
	for _, k := range append(slices.Sorted(maps.Keys(c.Set)), c.Reset_...) {
		_, setting := c.Set[k]
		if k == PropLakeFormat && setting && t.Properties[k] == "" && !slices.Contains(c.Reset_, k) {
			continue
		}
		if !MutableProperty(k) {
			return fmt.Errorf("%w: table %s: property %q cannot change after the table is created", ErrInvalid, t.FullName(), k)
		}
	}
	nt := *t
	nt.Properties = withProperties(t.Properties, c.Set, c.Reset_)
	st.tables[t.ID] = &nt
	return nil
}

// forgetNode removes a decommissioned node: only one decommissioning and
// named by no assignment, so that nothing refers to it afterwards. Its id
// is remembered (forgottenNodeID) so that no joining node is given it: the
// old machine, restarted on its data, would take itself for that node.
func (st *state) forgetNode(c *metapb.ForgetNode) error {
	n, ok := st.nodes[NodeID(c.Id)]
	if !ok {
		return Named(ErrNodeNotFound, "forget node %d: node not found", c.Id)
	}
	if n.State != NodeDecommissioning {
		return fmt.Errorf("%w: node %d is %s: only a decommissioned node can be forgotten", ErrInvalid, c.Id, n.State)
	}
	held := 0
	for _, as := range st.assignments {
		for _, a := range as {
			if slices.Contains(a.Replicas, n.ID) {
				held++
			}
		}
	}
	if held > 0 {
		return fmt.Errorf("%w: node %d still holds %d bucket replicas", ErrInvalid, c.Id, held)
	}
	delete(st.nodes, n.ID)
	st.forgottenNodeID = max(st.forgottenNodeID, n.ID)
	return nil
}

// fenceNodes adds ids to the fenced nodes (a sorted slice, replaced, never
// edited); ids already there are no change.
func (st *state) fenceNodes(c *metapb.FenceNodes) (bool, error) {
	if len(c.Ids) == 0 {
		return false, fmt.Errorf("%w: fence no node", ErrInvalid)
	}
	fenced := slices.Clone(st.fenced)
	for _, id := range c.Ids {
		if id <= 0 {
			return false, fmt.Errorf("%w: fence node %d: a node id is positive", ErrInvalid, id)
		}
		if !slices.Contains(fenced, NodeID(id)) {
			fenced = append(fenced, NodeID(id))
		}
	}
	if len(fenced) == len(st.fenced) {
		return false, nil
	}
	slices.Sort(fenced)
	st.fenced = fenced
	return true, nil
}

func (st *state) setClusterID(c *metapb.SetClusterID) (bool, error) {
	if c.ClusterId == "" {
		return false, fmt.Errorf("%w: empty cluster id", ErrInvalid)
	}
	if c.OnlyIfUnset && st.clusterID != "" {
		return false, nil
	}
	if st.clusterID == c.ClusterId {
		return false, nil
	}
	st.clusterID = c.ClusterId
	return true, nil
}

func (st *state) setClusterConfig(c *metapb.SetClusterConfig) (bool, error) {
	change := clusterConfigFromPB(c.Config)
	if err := change.Validate(); err != nil {
		return false, err
	}
	next := st.config.merge(change, c.OnlyIfUnset)
	if next == st.config {
		return false, nil
	}
	st.config = next
	return true, nil
}

// addColumns appends a schema version. The proposer validated the columns
// (ValidateNewColumns); the FSM re-checks only what keeps the catalog
// consistent: the table exists, the columns are nullable and new.
func (st *state) addColumns(c *metapb.AddColumns) (int32, error) {
	t, ok := st.tables[c.TableId]
	if !ok {
		return 0, Named(ErrTableNotFound, "add columns: table id %d not found", c.TableId)
	}
	add, err := schemaFromPB(&metapb.Schema{Columns: c.Columns})
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	cur := t.Schema()
	if err := ValidateNewColumns(t.FullName(), cur, add.Columns); err != nil {
		return 0, err
	}
	next := &record.Schema{ID: cur.ID + 1, PrimaryKey: slices.Clone(cur.PrimaryKey)}
	next.Columns = append(slices.Clone(cur.Columns), add.Columns...)
	nt := *t
	nt.Schemas = append(slices.Clip(t.Schemas), next)
	st.tables[t.ID] = &nt
	return next.ID, nil
}
