package raftmeta

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/proto/metapb"
	"google.golang.org/protobuf/proto"
)

// ErrBadCommand reports bytes that are not a metadata command this binary
// understands. Apply panics on it (a replica must not skip an entry); the
// decoder returns it so that fuzzing and tooling can inspect entries safely.
var ErrBadCommand = errors.New("undecodable metadata command")

// ErrBadSnapshot reports a snapshot that does not decode.
var ErrBadSnapshot = errors.New("undecodable metadata snapshot")

var marshalOpts = proto.MarshalOptions{Deterministic: true}

// EncodeCommand marshals cmd deterministically.
func EncodeCommand(cmd *metapb.Command) ([]byte, error) {
	return marshalOpts.Marshal(cmd)
}

// DecodeCommand parses one Raft log entry of the metadata group and checks
// that it is complete: a known command with every required sub-message and
// parseable column types. It never panics.
func DecodeCommand(b []byte) (*metapb.Command, error) {
	var cmd metapb.Command
	if err := proto.Unmarshal(b, &cmd); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	switch c := cmd.Cmd.(type) {
	case *metapb.Command_CreateDatabase:
		if c.CreateDatabase == nil || c.CreateDatabase.Database == nil {
			return nil, fmt.Errorf("%w: CreateDatabase without a database", ErrBadCommand)
		}
	case *metapb.Command_DropDatabase:
		if c.DropDatabase == nil {
			return nil, fmt.Errorf("%w: empty DropDatabase", ErrBadCommand)
		}
	case *metapb.Command_CreateTable:
		if c.CreateTable == nil || c.CreateTable.Table == nil {
			return nil, fmt.Errorf("%w: CreateTable without a table", ErrBadCommand)
		}
		if _, err := tableFromPB(c.CreateTable.Table); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
		}
	case *metapb.Command_DropTable:
		if c.DropTable == nil {
			return nil, fmt.Errorf("%w: empty DropTable", ErrBadCommand)
		}
	case *metapb.Command_CreatePartition:
		if c.CreatePartition == nil {
			return nil, fmt.Errorf("%w: empty CreatePartition", ErrBadCommand)
		}
	case *metapb.Command_DropPartition:
		if c.DropPartition == nil {
			return nil, fmt.Errorf("%w: empty DropPartition", ErrBadCommand)
		}
	case *metapb.Command_SetAssignments:
		if c.SetAssignments == nil {
			return nil, fmt.Errorf("%w: empty SetAssignments", ErrBadCommand)
		}
	case *metapb.Command_RegisterNode:
		if c.RegisterNode == nil || c.RegisterNode.Node == nil {
			return nil, fmt.Errorf("%w: RegisterNode without a node", ErrBadCommand)
		}
	case *metapb.Command_SetNodeState:
		if c.SetNodeState == nil {
			return nil, fmt.Errorf("%w: empty SetNodeState", ErrBadCommand)
		}
	case *metapb.Command_SetTableProperties:
		if c.SetTableProperties == nil {
			return nil, fmt.Errorf("%w: empty SetTableProperties", ErrBadCommand)
		}
	case *metapb.Command_ForgetNode:
		if c.ForgetNode == nil {
			return nil, fmt.Errorf("%w: empty ForgetNode", ErrBadCommand)
		}
	case *metapb.Command_SetClusterId:
		if c.SetClusterId == nil {
			return nil, fmt.Errorf("%w: empty SetClusterID", ErrBadCommand)
		}
	case *metapb.Command_SetClusterConfig:
		if c.SetClusterConfig == nil || c.SetClusterConfig.Config == nil {
			return nil, fmt.Errorf("%w: SetClusterConfig without a config", ErrBadCommand)
		}
	case *metapb.Command_RestoreBucket:
		if c.RestoreBucket == nil {
			return nil, fmt.Errorf("%w: empty RestoreBucket", ErrBadCommand)
		}
	case *metapb.Command_FenceNodes:
		if c.FenceNodes == nil {
			return nil, fmt.Errorf("%w: empty FenceNodes", ErrBadCommand)
		}
	case *metapb.Command_AddColumns:
		if c.AddColumns == nil {
			return nil, fmt.Errorf("%w: empty AddColumns", ErrBadCommand)
		}
		if _, err := schemaFromPB(&metapb.Schema{Columns: c.AddColumns.Columns}); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
		}
	default:
		return nil, fmt.Errorf("%w: unknown command (written by a newer version?)", ErrBadCommand)
	}
	for _, a := range commandAssignments(&cmd) {
		if a == nil {
			return nil, fmt.Errorf("%w: empty assignment", ErrBadCommand)
		}
	}
	return &cmd, nil
}

func commandAssignments(cmd *metapb.Command) []*metapb.Assignment {
	switch c := cmd.Cmd.(type) {
	case *metapb.Command_CreateTable:
		return c.CreateTable.Assignments
	case *metapb.Command_CreatePartition:
		return c.CreatePartition.Assignments
	case *metapb.Command_SetAssignments:
		return c.SetAssignments.Assignments
	}
	return nil
}

func clusterConfigToPB(c ClusterConfig) *metapb.ClusterConfig {
	return &metapb.ClusterConfig{MetaVoters: int32(c.MetaVoters), DeadNodeGraceMs: c.DeadNodeGrace.Milliseconds(), DefaultLogTtlMs: c.DefaultLogTTL.Milliseconds(),
		LakeSnapshotRetentionMs: c.LakeSnapshotRetention.Milliseconds()}
}

func clusterConfigFromPB(p *metapb.ClusterConfig) ClusterConfig {
	return ClusterConfig{MetaVoters: int(p.GetMetaVoters()), DeadNodeGrace: DurationFromMillis(p.GetDeadNodeGraceMs()), DefaultLogTTL: DurationFromMillis(p.GetDefaultLogTtlMs()),
		LakeSnapshotRetention: DurationFromMillis(p.GetLakeSnapshotRetentionMs())}
}

// DurationFromMillis is ms milliseconds; one that overflows a Duration is -1 ns,
// which validation refuses.
func DurationFromMillis(ms int64) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	if d/time.Millisecond != time.Duration(ms) {
		return -1
	}
	return d
}

func schemaToPB(s *record.Schema) *metapb.Schema {
	out := &metapb.Schema{Id: s.ID, PrimaryKey: slices.Clone(s.PrimaryKey)}
	out.Columns = make([]*metapb.Column, len(s.Columns))
	for i, c := range s.Columns {
		out.Columns[i] = &metapb.Column{Name: c.Name, Type: c.Type.String(), Nullable: c.Nullable, Comment: c.Comment, Dictionary: c.Dictionary}
	}
	return out
}

func schemaFromPB(p *metapb.Schema) (*record.Schema, error) {
	if p == nil {
		return nil, errors.New("nil schema")
	}
	s := &record.Schema{ID: p.Id, PrimaryKey: slices.Clone(p.PrimaryKey)}
	s.Columns = make([]record.Column, len(p.Columns))
	for i, c := range p.Columns {
		if c == nil {
			return nil, fmt.Errorf("schema %d: nil column %d", p.Id, i)
		}
		t, _, err := record.ParseType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("schema %d column %q: %w", p.Id, c.Name, err)
		}
		s.Columns[i] = record.Column{Name: c.Name, Type: t, Nullable: c.Nullable, Comment: c.Comment, Dictionary: c.Dictionary}
	}
	return s, nil
}

func tableToPB(t *Table) *metapb.Table {
	out := &metapb.Table{
		Id: t.ID, Database: t.Database, Name: t.Name,
		PartitionKeys: slices.Clone(t.PartitionKeys), BucketKeys: slices.Clone(t.BucketKeys),
		BucketCount: t.BucketCount, Properties: maps.Clone(t.Properties),
		Comment: t.Comment, CreatedAtMs: t.CreatedAtMs,
	}
	out.Schemas = make([]*metapb.Schema, len(t.Schemas))
	for i, s := range t.Schemas {
		out.Schemas[i] = schemaToPB(s)
	}
	return out
}

func tableFromPB(p *metapb.Table) (*Table, error) {
	if len(p.Schemas) == 0 {
		return nil, fmt.Errorf("table %s.%s has no schema", p.Database, p.Name)
	}
	t := &Table{
		ID: p.Id, Database: p.Database, Name: p.Name,
		PartitionKeys: slices.Clone(p.PartitionKeys), BucketKeys: slices.Clone(p.BucketKeys),
		BucketCount: p.BucketCount, Properties: maps.Clone(p.Properties),
		Comment: p.Comment, CreatedAtMs: p.CreatedAtMs,
	}
	if t.Properties == nil {
		t.Properties = map[string]string{}
	}
	t.Schemas = make([]*record.Schema, len(p.Schemas))
	for i, ps := range p.Schemas {
		s, err := schemaFromPB(ps)
		if err != nil {
			return nil, fmt.Errorf("table %s.%s: %w", p.Database, p.Name, err)
		}
		t.Schemas[i] = s
	}
	return t, nil
}

func assignmentToPB(a Assignment) *metapb.Assignment {
	out := &metapb.Assignment{TableId: a.TableID, PartitionId: a.PartitionID, Bucket: a.Bucket, Epoch: a.Epoch,
		Generation: a.Generation, StartOffset: a.StartOffset}
	out.Replicas = make([]int32, len(a.Replicas))
	for i, r := range a.Replicas {
		out.Replicas[i] = int32(r)
	}
	return out
}

func assignmentFromPB(p *metapb.Assignment) Assignment {
	a := Assignment{BucketID: BucketID{TableID: p.TableId, PartitionID: p.PartitionId, Bucket: p.Bucket}, Epoch: p.Epoch,
		Generation: p.Generation, StartOffset: p.StartOffset}
	a.Replicas = make([]NodeID, len(p.Replicas))
	for i, r := range p.Replicas {
		a.Replicas[i] = NodeID(r)
	}
	return a
}

func nodeToPB(n Node) *metapb.Node {
	return &metapb.Node{Id: int32(n.ID), ClientAddr: n.ClientAddr, PeerAddr: n.PeerAddr,
		GossipAddr: n.GossipAddr, Version: n.Version, State: string(n.State)}
}

func nodeFromPB(p *metapb.Node) Node {
	return Node{ID: NodeID(p.Id), ClientAddr: p.ClientAddr, PeerAddr: p.PeerAddr,
		GossipAddr: p.GossipAddr, Version: p.Version, State: NodeState(p.State)}
}

func partitionToPB(p *Partition) *metapb.Partition {
	return &metapb.Partition{Id: p.ID, TableId: p.TableID, Name: p.Name, Values: maps.Clone(p.Values), CreatedAtMs: p.CreatedAtMs}
}

func partitionFromPB(p *metapb.Partition) *Partition {
	v := maps.Clone(p.Values)
	if v == nil {
		v = map[string]string{}
	}
	return &Partition{ID: p.Id, TableID: p.TableId, Name: p.Name, Values: v, CreatedAtMs: p.CreatedAtMs}
}
