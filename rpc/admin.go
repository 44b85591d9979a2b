package rpc

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// tableRef is a parsed table name: "db.table" with an optional virtual
// suffix ("$changelog" or "$binlog").
type tableRef struct {
	Database, Table string
	Virtual         string // "", "changelog" or "binlog"
}

func (r tableRef) full() string { return r.Database + "." + r.Table }

func parseTableName(name string) (tableRef, error) {
	var ref tableRef
	base := name
	if i := strings.IndexByte(name, '$'); i >= 0 {
		base, ref.Virtual = name[:i], name[i+1:]
		if ref.Virtual != "changelog" && ref.Virtual != "binlog" {
			return ref, fmt.Errorf("%w: table %q: unknown suffix $%s (want $changelog or $binlog)", ErrInvalidRequest, name, ref.Virtual)
		}
	}
	db, t, ok := strings.Cut(base, ".")
	if !ok || db == "" || t == "" || strings.Contains(t, ".") {
		return ref, fmt.Errorf("%w: table name %q must be \"database.table\"", ErrInvalidRequest, name)
	}
	ref.Database, ref.Table = db, t
	return ref, nil
}

// table resolves a table name; a $changelog or $binlog suffix is allowed on
// primary-key tables (ref.Virtual says which).
func (s *service) table(ctx context.Context, name string) (*raftmeta.Table, tableRef, error) {
	ref, err := parseTableName(name)
	if err != nil {
		return nil, ref, err
	}
	t, err := s.b.Table(ctx, ref.full())
	if err != nil {
		return nil, ref, err // the catalog's error names the table
	}
	if ref.Virtual != "" {
		if !t.HasPrimaryKey() {
			return nil, ref, fmt.Errorf("%w: %q is a log table; $%s exists only for primary-key tables", ErrWrongTableKind, ref.full(), ref.Virtual)
		}
	}
	return t, ref, nil
}

func (s *service) CreateDatabase(ctx context.Context, req *connect.Request[flussv1.CreateDatabaseRequest]) (*connect.Response[flussv1.CreateDatabaseResponse], error) {
	m := req.Msg
	if m.GetName() == "" {
		return nil, fmt.Errorf("%w: database name is empty", ErrInvalidRequest)
	}
	if err := s.b.CreateDatabase(ctx, m.GetName(), m.GetComment(), m.GetIgnoreIfExists()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&flussv1.CreateDatabaseResponse{}), nil
}

func (s *service) DropDatabase(ctx context.Context, req *connect.Request[flussv1.DropDatabaseRequest]) (*connect.Response[flussv1.DropDatabaseResponse], error) {
	m := req.Msg
	var tables []string // their traffic series go with them
	if m.GetCascade() {
		tables, _ = s.b.ListTables(ctx, m.GetName())
	}
	if err := s.b.DropDatabase(ctx, m.GetName(), m.GetIgnoreIfNotExists(), m.GetCascade()); err != nil {
		return nil, err
	}
	for _, t := range tables {
		s.m.dropped(m.GetName() + "." + t)
	}
	return connect.NewResponse(&flussv1.DropDatabaseResponse{}), nil
}

func (s *service) ListDatabases(ctx context.Context, req *connect.Request[flussv1.ListDatabasesRequest]) (*connect.Response[flussv1.ListDatabasesResponse], error) {
	dbs, err := s.b.ListDatabases(ctx)
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	return connect.NewResponse(&flussv1.ListDatabasesResponse{Databases: dbs}), nil
}

// tableSpecFromProto converts a CreateTable request. A column's type may
// carry "NOT NULL"; `nullable` absent means nullable, except for
// primary-key columns, which are always NOT NULL.
func tableSpecFromProto(m *flussv1.CreateTableRequest) (raftmeta.TableSpec, error) {
	ref, err := parseTableName(m.GetTable())
	if err != nil {
		return raftmeta.TableSpec{}, err
	}
	if ref.Virtual != "" {
		return raftmeta.TableSpec{}, fmt.Errorf("%w: cannot create %q: $%s tables are virtual", ErrInvalidRequest, m.GetTable(), ref.Virtual)
	}
	spec := raftmeta.TableSpec{
		Database:      ref.Database,
		Name:          ref.Table,
		PartitionKeys: m.GetPartitionKeys(),
		BucketKeys:    m.GetBucketKeys(),
		BucketCount:   m.GetBucketCount(),
		Properties:    maps.Clone(m.GetProperties()),
		Comment:       m.GetComment(),
	}
	if spec.BucketCount < 0 {
		return spec, fmt.Errorf("%w: bucketCount %d must be >= 1 (0 means the default)", ErrInvalidRequest, spec.BucketCount)
	}
	sch := m.GetSchema()
	if sch == nil || len(sch.GetColumns()) == 0 {
		return spec, fmt.Errorf("%w: table %q needs a schema with at least one column", ErrInvalidRequest, m.GetTable())
	}
	pk := map[string]bool{}
	for _, k := range sch.GetPrimaryKey() {
		pk[k] = true
	}
	spec.PrimaryKey = sch.GetPrimaryKey()
	for _, c := range sch.GetColumns() {
		col, err := columnFromProto(c, pk[c.GetName()])
		if err != nil {
			return spec, err
		}
		spec.Columns = append(spec.Columns, col)
	}
	return spec, nil
}

// columnFromProto converts a column of a request. Without an explicit
// nullable flag a column is nullable unless its type says NOT NULL or it is
// a primary-key column.
func columnFromProto(c *flussv1.Column, primaryKey bool) (record.Column, error) {
	typ, notNull, err := record.ParseType(c.GetType())
	if err != nil {
		return record.Column{}, fmt.Errorf("column %q: %w", c.GetName(), err)
	}
	nullable := !notNull && !primaryKey
	if c.Nullable != nil {
		if c.GetNullable() && notNull {
			return record.Column{}, fmt.Errorf("%w: column %q says nullable but its type says NOT NULL", ErrInvalidRequest, c.GetName())
		}
		nullable = c.GetNullable()
	}
	return record.Column{Name: c.GetName(), Type: typ, Nullable: nullable, Comment: c.GetComment(), Dictionary: c.GetDictionary()}, nil
}

func (s *service) CreateTable(ctx context.Context, req *connect.Request[flussv1.CreateTableRequest]) (*connect.Response[flussv1.CreateTableResponse], error) {
	spec, err := tableSpecFromProto(req.Msg)
	if err != nil {
		return nil, err
	}
	if len(spec.PrimaryKey) > 0 {
		// The merge engine a bucket replica will build must accept the
		// properties; refuse them here rather than leave buckets unopenable.
		sch := &record.Schema{ID: 1, Columns: spec.Columns, PrimaryKey: spec.PrimaryKey}
		if sch.Validate() == nil {
			if _, err := kvstore.NewMerger(sch, spec.Properties); err != nil {
				return nil, fmt.Errorf("%w: table %q: %v", ErrInvalidRequest, req.Msg.GetTable(), err)
			}
		}
	}
	id, err := s.b.CreateTable(ctx, spec, req.Msg.GetIgnoreIfExists())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&flussv1.CreateTableResponse{TableId: id}), nil
}

func schemaToProto(s *record.Schema) *flussv1.Schema {
	out := &flussv1.Schema{PrimaryKey: s.PrimaryKey}
	for _, c := range s.Columns {
		nullable := c.Nullable
		out.Columns = append(out.Columns, &flussv1.Column{Name: c.Name, Type: c.Type.String(), Nullable: &nullable, Comment: c.Comment, Dictionary: c.Dictionary})
	}
	return out
}

func (s *service) GetTable(ctx context.Context, req *connect.Request[flussv1.GetTableRequest]) (*connect.Response[flussv1.GetTableResponse], error) {
	t, _, err := s.table(ctx, req.Msg.GetTable())
	if err != nil {
		return nil, err
	}
	sch := t.Schema()
	return connect.NewResponse(&flussv1.GetTableResponse{
		TableId:       t.ID,
		SchemaId:      sch.ID,
		Schema:        schemaToProto(sch),
		PartitionKeys: t.PartitionKeys,
		BucketKeys:    t.BucketKeys,
		BucketCount:   t.BucketCount,
		Properties:    t.Properties,
		CreatedAtMs:   t.CreatedAtMs,
		Comment:       t.Comment,
	}), nil
}

func (s *service) ListTables(ctx context.Context, req *connect.Request[flussv1.ListTablesRequest]) (*connect.Response[flussv1.ListTablesResponse], error) {
	ts, err := s.b.ListTables(ctx, req.Msg.GetDatabase())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&flussv1.ListTablesResponse{Tables: ts}), nil
}

func (s *service) DropTable(ctx context.Context, req *connect.Request[flussv1.DropTableRequest]) (*connect.Response[flussv1.DropTableResponse], error) {
	ref, err := parseTableName(req.Msg.GetTable())
	if err != nil {
		return nil, err
	}
	if ref.Virtual != "" {
		return nil, fmt.Errorf("%w: cannot drop %q: $%s tables are virtual", ErrInvalidRequest, req.Msg.GetTable(), ref.Virtual)
	}
	if err := s.b.DropTable(ctx, ref.full(), req.Msg.GetIgnoreIfNotExists()); err != nil {
		return nil, err
	}
	s.m.dropped(ref.full())
	return connect.NewResponse(&flussv1.DropTableResponse{}), nil
}

// AlterTable adds nullable columns to a log table (a new schema version)
// and sets and resets table properties that may change after creation.
// Both parts are checked before either is applied; the properties change
// first, then the columns are added.
func (s *service) AlterTable(ctx context.Context, req *connect.Request[flussv1.AlterTableRequest]) (*connect.Response[flussv1.AlterTableResponse], error) {
	t, ref, err := s.table(ctx, req.Msg.GetTable())
	if err != nil {
		return nil, err
	}
	if ref.Virtual != "" {
		return nil, fmt.Errorf("%w: cannot alter %q: $%s tables are virtual", ErrInvalidRequest, req.Msg.GetTable(), ref.Virtual)
	}
	add, set, reset := req.Msg.GetAddColumns(), req.Msg.GetSetProperties(), req.Msg.GetResetProperties()
	if len(add) == 0 && len(set) == 0 && len(reset) == 0 {
		return nil, fmt.Errorf("%w: alter table %s: no change given (addColumns, setProperties and resetProperties are empty)", ErrInvalidRequest, t.FullName())
	}
	props := len(set) > 0 || len(reset) > 0
	if props {
		if _, err := raftmeta.AlterProperties(t, set, reset); err != nil {
			return nil, err
		}
	}
	cols := make([]record.Column, 0, len(add))
	if len(add) > 0 {
		for _, c := range add {
			col, err := columnFromProto(c, false)
			if err != nil {
				return nil, fmt.Errorf("alter table %s: %w", t.FullName(), err)
			}
			cols = append(cols, col)
		}
		if err := raftmeta.ValidateNewColumns(t.FullName(), t.Schema(), cols); err != nil {
			return nil, fmt.Errorf("alter table %s: %w", t.FullName(), err)
		}
	}
	if props {
		if err := s.b.SetTableProperties(ctx, t.FullName(), set, reset); err != nil {
			return nil, err
		}
	}
	id := t.Schema().ID
	if len(cols) > 0 {
		if id, err = s.b.AddColumns(ctx, t.FullName(), cols); err != nil {
			return nil, fmt.Errorf("alter table %s: %w", t.FullName(), err)
		}
	}
	return connect.NewResponse(&flussv1.AlterTableResponse{SchemaId: id}), nil
}

// buckets resolves a request's bucket list (empty: every bucket).
func buckets(t *raftmeta.Table, req []int32) ([]int32, error) {
	if len(req) == 0 {
		out := make([]int32, t.BucketCount)
		for i := range out {
			out[i] = int32(i)
		}
		return out, nil
	}
	for _, b := range req {
		if err := checkBucket(t, b); err != nil {
			return nil, err
		}
	}
	return req, nil
}

func checkBucket(t *raftmeta.Table, b int32) error {
	if b < 0 || b >= t.BucketCount {
		return fmt.Errorf("%w: table %q has buckets 0..%d, not %d", ErrBucketNotFound, t.FullName(), t.BucketCount-1, b)
	}
	return nil
}

func (s *service) ListOffsets(ctx context.Context, req *connect.Request[flussv1.ListOffsetsRequest]) (*connect.Response[flussv1.ListOffsetsResponse], error) {
	m := req.Msg
	t, _, err := s.table(ctx, m.GetTable())
	if err != nil {
		return nil, err
	}
	p, err := s.namedPartition(ctx, t, m.GetPartition())
	if err != nil {
		return nil, err
	}
	bs, err := buckets(t, m.GetBuckets())
	if err != nil {
		return nil, err
	}
	var spec OffsetSpec
	switch m.GetSpec() {
	case flussv1.ListOffsetsRequest_EARLIEST:
		spec = OffsetEarliest
	case flussv1.ListOffsetsRequest_LATEST:
		spec = OffsetLatest
	case flussv1.ListOffsetsRequest_TIMESTAMP:
		spec = OffsetTimestamp
	default:
		return nil, fmt.Errorf("%w: unknown offset spec %d (want EARLIEST, LATEST or TIMESTAMP)", ErrInvalidRequest, m.GetSpec())
	}
	out := &flussv1.ListOffsetsResponse{}
	for _, b := range bs {
		off, err := s.b.ListOffset(ctx, bucketOf(t, p, b), spec, m.GetTimestampMs())
		if err != nil {
			return nil, fmt.Errorf("list offset of %s: %w", where(t, p, b), err)
		}
		out.Offsets = append(out.Offsets, &flussv1.BucketOffset{Partition: partitionName(p), Bucket: b, Offset: off})
	}
	return connect.NewResponse(out), nil
}

func (s *service) GetTableLayout(ctx context.Context, req *connect.Request[flussv1.GetTableLayoutRequest]) (*connect.Response[flussv1.GetTableLayoutResponse], error) {
	t, _, err := s.table(ctx, req.Msg.GetTable())
	if err != nil {
		return nil, err
	}
	lay, err := s.b.Layout(ctx, t.ID, req.Msg.GetInSync())
	if err != nil {
		return nil, fmt.Errorf("layout of %s: %w", t.FullName(), err)
	}
	out := &flussv1.GetTableLayoutResponse{}
	for _, l := range lay {
		bl := &flussv1.BucketLayout{Partition: l.PartitionName, Bucket: l.Bucket, Leader: int32(l.Leader)}
		for _, r := range l.Replicas {
			bl.Replicas = append(bl.Replicas, int32(r))
		}
		for _, r := range l.InSync {
			bl.InSyncReplicas = append(bl.InSyncReplicas, int32(r))
		}
		out.Buckets = append(out.Buckets, bl)
	}
	return connect.NewResponse(out), nil
}

func (s *service) DescribeCluster(ctx context.Context, req *connect.Request[flussv1.DescribeClusterRequest]) (*connect.Response[flussv1.DescribeClusterResponse], error) {
	ci, err := s.b.DescribeCluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("describe cluster: %w", err)
	}
	out := &flussv1.DescribeClusterResponse{ClusterId: ci.ClusterID, MetaLeader: int32(ci.MetaLeader),
		MetaVoters: int32(ci.Config.MetaVoters), DeadNodeGraceMs: ci.Config.DeadNodeGrace.Milliseconds(),
		DefaultLogTtlMs: ci.Config.DefaultLogTTL.Milliseconds(), LakeSnapshotRetentionMs: ci.Config.LakeSnapshotRetention.Milliseconds(),
		LeaderlessBuckets: ci.Leaderless, LostBuckets: ci.Lost}
	for _, n := range ci.Nodes {
		ni := &flussv1.NodeInfo{
			Id: int32(n.ID), ClientAddr: n.ClientAddr, PeerAddr: n.PeerAddr,
			State: string(n.State), Version: n.Version, MetaRole: n.MetaRole,
			Replicas: n.Replicas, Leaders: n.Leaders,
		}
		if n.UnderReplicated >= 0 {
			ni.UnderReplicated = &n.UnderReplicated
		}
		if n.Offline >= 0 {
			ni.OfflineReplicas = &n.Offline
		}
		out.Nodes = append(out.Nodes, ni)
	}
	return connect.NewResponse(out), nil
}

// ---------------------------------------------------------------- cluster operations (backend_admin.go)

func (s *service) DrainNode(ctx context.Context, req *connect.Request[flussv1.DrainNodeRequest]) (*connect.Response[flussv1.DrainNodeResponse], error) {
	if err := s.changeNode(ctx, "DrainNode", "drain", req.Msg.NodeId, ClusterAdmin.DrainNode); err != nil {
		return nil, err
	}
	return connect.NewResponse(&flussv1.DrainNodeResponse{}), nil
}

func (s *service) UndrainNode(ctx context.Context, req *connect.Request[flussv1.UndrainNodeRequest]) (*connect.Response[flussv1.UndrainNodeResponse], error) {
	if err := s.changeNode(ctx, "UndrainNode", "undrain", req.Msg.NodeId, ClusterAdmin.UndrainNode); err != nil {
		return nil, err
	}
	return connect.NewResponse(&flussv1.UndrainNodeResponse{}), nil
}

func (s *service) DecommissionNode(ctx context.Context, req *connect.Request[flussv1.DecommissionNodeRequest]) (*connect.Response[flussv1.DecommissionNodeResponse], error) {
	if err := s.changeNode(ctx, "DecommissionNode", "decommission", req.Msg.NodeId, ClusterAdmin.DecommissionNode); err != nil {
		return nil, err
	}
	return connect.NewResponse(&flussv1.DecommissionNodeResponse{}), nil
}

// changeNode runs one of the cluster admin's node state changes (call:
// drain, undrain, decommission; verb names it in errors) on node id.
func (s *service) changeNode(ctx context.Context, method, verb string, id int32, call func(ClusterAdmin, context.Context, raftmeta.NodeID) error) error {
	ca, err := s.clusterAdmin(method)
	if err != nil {
		return err
	}
	if id <= 0 {
		return fmt.Errorf("%w: %s: node_id must be > 0, got %d", ErrInvalidRequest, verb, id)
	}
	if err := call(ca, ctx, raftmeta.NodeID(id)); err != nil {
		return adminError(fmt.Errorf("%s node %d: %w", verb, id, err))
	}
	return nil
}

func (s *service) Rebalance(ctx context.Context, req *connect.Request[flussv1.RebalanceRequest]) (*connect.Response[flussv1.RebalanceResponse], error) {
	ca, err := s.clusterAdmin("Rebalance")
	if err != nil {
		return nil, err
	}
	moved, err := ca.Rebalance(ctx)
	if err != nil {
		return nil, adminError(fmt.Errorf("rebalance: %w", err))
	}
	return connect.NewResponse(&flussv1.RebalanceResponse{Moved: int32(moved)}), nil
}

func (s *service) SetClusterConfig(ctx context.Context, req *connect.Request[flussv1.SetClusterConfigRequest]) (*connect.Response[flussv1.SetClusterConfigResponse], error) {
	ca, err := s.clusterAdmin("SetClusterConfig")
	if err != nil {
		return nil, err
	}
	var change ClusterConfigChange
	if req.Msg.MetaVoters != nil {
		v := int(req.Msg.GetMetaVoters())
		if err := raftmeta.ValidateMetaVoters(v); err != nil {
			return nil, err
		}
		change.MetaVoters = &v
	}
	if change.DeadNodeGrace, err = millisField(req.Msg.DeadNodeGraceMs, "deadNodeGraceMs", raftmeta.ValidateDeadNodeGrace); err != nil {
		return nil, err
	}
	if change.DefaultLogTTL, err = millisField(req.Msg.DefaultLogTtlMs, "defaultLogTtlMs", raftmeta.ValidateDefaultLogTTL); err != nil {
		return nil, err
	}
	if change.LakeSnapshotRetention, err = millisField(req.Msg.LakeSnapshotRetentionMs, "lakeSnapshotRetentionMs", raftmeta.ValidateLakeSnapshotRetention); err != nil {
		return nil, err
	}
	cfg, err := ca.SetClusterConfig(ctx, change)
	if err != nil {
		return nil, adminError(fmt.Errorf("set cluster config: %w", err))
	}
	return connect.NewResponse(&flussv1.SetClusterConfigResponse{MetaVoters: int32(cfg.MetaVoters),
		DeadNodeGraceMs: cfg.DeadNodeGrace.Milliseconds(), DefaultLogTtlMs: cfg.DefaultLogTTL.Milliseconds(),
		LakeSnapshotRetentionMs: cfg.LakeSnapshotRetention.Milliseconds()}), nil
}

func (s *service) RestoreBucket(ctx context.Context, req *connect.Request[flussv1.RestoreBucketRequest]) (*connect.Response[flussv1.RestoreBucketResponse], error) {
	ca, err := s.clusterAdmin("RestoreBucket")
	if err != nil {
		return nil, err
	}
	ref, err := parseTableName(req.Msg.GetTable())
	if err != nil {
		return nil, err
	}
	if ref.Virtual != "" {
		return nil, fmt.Errorf("%w: restore a bucket of %s, not of its $%s", ErrInvalidRequest, ref.full(), ref.Virtual)
	}
	if req.Msg.GetBucket() < 0 {
		return nil, fmt.Errorf("%w: bucket %d is negative", ErrInvalidRequest, req.Msg.GetBucket())
	}
	a, err := ca.RestoreBucket(ctx, ref.Database, ref.Table, req.Msg.GetPartition(), req.Msg.GetBucket())
	if err != nil {
		return nil, fmt.Errorf("restore bucket %d of %s: %w", req.Msg.GetBucket(), ref.full(), err)
	}
	out := &flussv1.RestoreBucketResponse{StartOffset: a.StartOffset, Generation: a.Generation}
	for _, r := range a.Replicas {
		out.Replicas = append(out.Replicas, int32(r))
	}
	return connect.NewResponse(out), nil
}

// millisField is the duration of an optional milliseconds field named
// name (nil when absent), checked by validate.
func millisField(ms *int64, name string, validate func(time.Duration) error) (*time.Duration, error) {
	if ms == nil {
		return nil, nil
	}
	d := raftmeta.DurationFromMillis(*ms)
	if err := validate(d); err != nil {
		return nil, fmt.Errorf("%w (%s %d)", err, name, *ms)
	}
	return &d, nil
}
