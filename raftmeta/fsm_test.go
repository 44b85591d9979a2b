package raftmeta

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/proto/metapb"
	"github.com/hashicorp/raft"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the random command sequence (0: time-based)")

// applier feeds commands to an FSM with increasing log indexes.
type applier struct {
	t     testing.TB
	f     *FSM
	index uint64
}

func newApplier(t testing.TB) *applier { return &applier{t: t, f: NewFSM()} }

func (a *applier) apply(cmd *metapb.Command) *ApplyResult {
	a.t.Helper()
	b, err := EncodeCommand(cmd)
	if err != nil {
		a.t.Fatalf("encode: %v", err)
	}
	a.index++
	return a.f.Apply(&raft.Log{Index: a.index, Term: 1, Type: raft.LogCommand, Data: b}).(*ApplyResult)
}

func cCreateDB(name string, ignore bool) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_CreateDatabase{CreateDatabase: &metapb.CreateDatabase{
		Database: &metapb.Database{Name: name, CreatedAtMs: 1000}, IgnoreIfExists: ignore}}}
}

func cDropDB(name string, ignore, cascade bool) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_DropDatabase{DropDatabase: &metapb.DropDatabase{Name: name, IgnoreIfNotExists: ignore, Cascade: cascade}}}
}

func testSpec(db, name string) TableSpec {
	return TableSpec{
		Database: db, Name: name,
		Columns: []record.Column{
			{Name: "id", Type: record.Type{Kind: record.KindBigInt}},
			{Name: "dt", Type: record.Type{Kind: record.KindString}},
			{Name: "v", Type: record.Type{Kind: record.KindDouble}, Nullable: true},
		},
	}
}

// cCreateTable builds a CreateTable for spec with buckets placed on nodes 1..3.
func cCreateTable(t testing.TB, spec TableSpec, ignore bool) *metapb.Command {
	t.Helper()
	tb, err := BuildTable(spec)
	if err != nil {
		t.Fatalf("BuildTable: %v", err)
	}
	tb.CreatedAtMs = 2000
	c := &metapb.CreateTable{Table: tableToPB(tb), IgnoreIfExists: ignore}
	if len(tb.PartitionKeys) == 0 {
		c.Assignments = testAssignments(t, tb.BucketCount)
	}
	return &metapb.Command{Cmd: &metapb.Command_CreateTable{CreateTable: c}}
}

func testAssignments(t testing.TB, buckets int32) []*metapb.Assignment {
	nodes := []Node{{ID: 1, State: NodeActive}, {ID: 2, State: NodeActive}, {ID: 3, State: NodeActive}}
	reps, err := Placement(nodes, buckets, 2)
	if err != nil {
		t.Fatalf("Placement: %v", err)
	}
	out := make([]*metapb.Assignment, len(reps))
	for b, r := range reps {
		out[b] = assignmentToPB(Assignment{BucketID: BucketID{Bucket: int32(b)}, Replicas: r})
	}
	return out
}

func cDropTable(db, name string, ignore bool) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_DropTable{DropTable: &metapb.DropTable{Database: db, Name: name, IgnoreIfNotExists: ignore}}}
}

func cCreatePartition(t testing.TB, tableID int64, buckets int32, dt string, ignore bool) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_CreatePartition{CreatePartition: &metapb.CreatePartition{
		TableId: tableID, Name: dt, Values: map[string]string{"dt": dt}, IgnoreIfExists: ignore,
		Assignments: testAssignments(t, buckets), CreatedAtMs: 3000}}}
}

func cDropPartition(tableID int64, name string, ignore bool) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_DropPartition{DropPartition: &metapb.DropPartition{TableId: tableID, Name: name, IgnoreIfNotExists: ignore}}}
}

func cRegister(id NodeID, state NodeState) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_RegisterNode{RegisterNode: &metapb.RegisterNode{Node: nodeToPB(Node{
		ID: id, ClientAddr: fmt.Sprintf("127.0.0.1:%d", 9000+id), PeerAddr: "p", Version: "v1", State: state})}}}
}

func cNodeState(id NodeID, s NodeState) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_SetNodeState{SetNodeState: &metapb.SetNodeState{Id: int32(id), State: string(s)}}}
}

func cSetProps(tableID int64, set map[string]string, reset ...string) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_SetTableProperties{SetTableProperties: &metapb.SetTableProperties{TableId: tableID, Set: set, Reset_: reset}}}
}

func cForget(id NodeID) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_ForgetNode{ForgetNode: &metapb.ForgetNode{Id: int32(id)}}}
}

func cSetAssign(as ...Assignment) *metapb.Command {
	c := &metapb.SetAssignments{}
	for _, a := range as {
		c.Assignments = append(c.Assignments, assignmentToPB(a))
	}
	return &metapb.Command{Cmd: &metapb.Command_SetAssignments{SetAssignments: c}}
}

func cAddColumns(tableID int64, cols ...record.Column) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_AddColumns{AddColumns: &metapb.AddColumns{
		TableId: tableID, Columns: schemaToPB(&record.Schema{Columns: cols}).Columns}}}
}

func cClusterConfig(c ClusterConfig, onlyIfUnset bool) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_SetClusterConfig{SetClusterConfig: &metapb.SetClusterConfig{Config: clusterConfigToPB(c), OnlyIfUnset: onlyIfUnset}}}
}

func checkClusterConfig(t *testing.T, f *FSM, want ClusterConfig) {
	t.Helper()
	if got := f.ClusterConfig(); got != want {
		t.Fatalf("ClusterConfig = %+v, want %+v", got, want)
	}
}

func cClusterID(id string, onlyIfUnset bool) *metapb.Command {
	return &metapb.Command{Cmd: &metapb.Command_SetClusterId{SetClusterId: &metapb.SetClusterID{ClusterId: id, OnlyIfUnset: onlyIfUnset}}}
}

func partitionedSpec(db, name string) TableSpec {
	s := testSpec(db, name)
	s.PartitionKeys = []string{"dt"}
	s.BucketCount = 2
	return s
}

func TestFSMCommands(t *testing.T) {
	type step struct {
		name    string
		cmd     func(t testing.TB) *metapb.Command
		wantErr error // nil: success
		wantID  int64 // checked when non-zero
		check   func(t *testing.T, f *FSM)
	}
	pspec := partitionedSpec("shop", "events")
	steps := []step{
		{name: "create db", cmd: func(testing.TB) *metapb.Command { return cCreateDB("shop", false) },
			check: func(t *testing.T, f *FSM) {
				d, err := f.Database("shop")
				if err != nil || d.CreatedAtMs != 1000 {
					t.Fatalf("Database = %+v, %v", d, err)
				}
			}},
		{name: "create db twice", cmd: func(testing.TB) *metapb.Command { return cCreateDB("shop", false) }, wantErr: ErrDatabaseExists},
		{name: "create db twice ignored", cmd: func(testing.TB) *metapb.Command { return cCreateDB("shop", true) }},
		{name: "create db bad name", cmd: func(testing.TB) *metapb.Command { return cCreateDB("a.b", false) }, wantErr: ErrInvalid},
		{name: "table in missing db", cmd: func(t testing.TB) *metapb.Command {
			return cCreateTable(t, testSpec("nope", "t"), false)
		}, wantErr: ErrDatabaseNotFound},
		{name: "create table", cmd: func(t testing.TB) *metapb.Command {
			s := testSpec("shop", "orders")
			s.BucketCount = 4
			return cCreateTable(t, s, false)
		}, wantID: 1, check: func(t *testing.T, f *FSM) {
			tb, err := f.TableByName("shop", "orders")
			if err != nil {
				t.Fatal(err)
			}
			if tb.ID != 1 || tb.BucketCount != 4 || tb.CreatedAtMs != 2000 || tb.Schema().ID != 1 || len(tb.Schema().Columns) != 3 {
				t.Fatalf("table = %+v", tb)
			}
			if byID, _ := f.TableByID(1); byID != tb {
				t.Fatalf("TableByID differs from TableByName")
			}
			as := f.AssignmentsForTable(1)
			if len(as) != 4 {
				t.Fatalf("assignments = %v", as)
			}
			for b, a := range as {
				if a.TableID != 1 || a.PartitionID != NoPartition || a.Bucket != int32(b) || len(a.Replicas) != 2 {
					t.Fatalf("assignment %d = %+v", b, a)
				}
			}
		}},
		{name: "create table twice", cmd: func(t testing.TB) *metapb.Command {
			return cCreateTable(t, testSpec("shop", "orders"), false)
		}, wantErr: ErrTableExists},
		{name: "create table twice ignored returns id", cmd: func(t testing.TB) *metapb.Command {
			return cCreateTable(t, testSpec("shop", "orders"), true)
		}, wantID: 1},
		{name: "create table with wrong assignment count", cmd: func(t testing.TB) *metapb.Command {
			c := cCreateTable(t, testSpec("shop", "x"), false)
			c.GetCreateTable().Assignments = nil
			return c
		}, wantErr: ErrInvalid},
		{name: "create table with duplicate replica", cmd: func(t testing.TB) *metapb.Command {
			c := cCreateTable(t, testSpec("shop", "x"), false)
			c.GetCreateTable().Assignments[0].Replicas = []int32{1, 1}
			return c
		}, wantErr: ErrInvalid},
		{name: "failed create did not use an id", cmd: func(t testing.TB) *metapb.Command {
			return cCreateTable(t, pspec, false)
		}, wantID: 2, check: func(t *testing.T, f *FSM) {
			if as := f.AssignmentsForTable(2); len(as) != 0 {
				t.Fatalf("partitioned table got buckets before partitions: %v", as)
			}
		}},
		{name: "create partition", cmd: func(t testing.TB) *metapb.Command { return cCreatePartition(t, 2, 2, "2026-01-01", false) },
			wantID: 1, check: func(t *testing.T, f *FSM) {
				ps, err := f.Partitions(2)
				if err != nil || len(ps) != 1 || ps[0].Name != "2026-01-01" || ps[0].Values["dt"] != "2026-01-01" || ps[0].CreatedAtMs != 3000 {
					t.Fatalf("Partitions = %v, %v", ps, err)
				}
				as := f.AssignmentsForTable(2)
				if len(as) != 2 || as[0].PartitionID != 1 || as[1].Bucket != 1 {
					t.Fatalf("assignments = %+v", as)
				}
			}},
		{name: "create partition twice", cmd: func(t testing.TB) *metapb.Command { return cCreatePartition(t, 2, 2, "2026-01-01", false) }, wantErr: ErrPartitionExists},
		{name: "create partition twice ignored", cmd: func(t testing.TB) *metapb.Command { return cCreatePartition(t, 2, 2, "2026-01-01", true) }, wantID: 1},
		{name: "create partition of unknown table", cmd: func(t testing.TB) *metapb.Command { return cCreatePartition(t, 99, 2, "a", false) }, wantErr: ErrTableNotFound},
		{name: "create partition of unpartitioned table", cmd: func(t testing.TB) *metapb.Command { return cCreatePartition(t, 1, 4, "a", false) }, wantErr: ErrInvalid},
		{name: "create partition with mismatched name", cmd: func(t testing.TB) *metapb.Command {
			c := cCreatePartition(t, 2, 2, "b", false)
			c.GetCreatePartition().Name = "c"
			return c
		}, wantErr: ErrInvalid},
		{name: "create second partition", cmd: func(t testing.TB) *metapb.Command { return cCreatePartition(t, 2, 2, "2026-01-02", false) }, wantID: 2,
			check: func(t *testing.T, f *FSM) {
				if as := f.AssignmentsForTable(2); len(as) != 4 || as[2].PartitionID != 2 {
					t.Fatalf("assignments = %+v", as)
				}
			}},
		{name: "drop partition", cmd: func(testing.TB) *metapb.Command { return cDropPartition(2, "2026-01-01", false) },
			check: func(t *testing.T, f *FSM) {
				ps, _ := f.Partitions(2)
				as := f.AssignmentsForTable(2)
				if len(ps) != 1 || len(as) != 2 || as[0].PartitionID != 2 {
					t.Fatalf("after drop: partitions %v assignments %+v", ps, as)
				}
				if _, err := f.PartitionByName(2, "2026-01-01"); !errors.Is(err, ErrPartitionNotFound) {
					t.Fatalf("PartitionByName err = %v", err)
				}
			}},
		{name: "drop partition missing", cmd: func(testing.TB) *metapb.Command { return cDropPartition(2, "2026-01-01", false) }, wantErr: ErrPartitionNotFound},
		{name: "drop partition missing ignored", cmd: func(testing.TB) *metapb.Command { return cDropPartition(2, "2026-01-01", true) }},
		{name: "register node", cmd: func(testing.TB) *metapb.Command { return cRegister(7, NodeJoining) },
			check: func(t *testing.T, f *FSM) {
				n, err := f.Node(7)
				if err != nil || n.State != NodeJoining || n.ClientAddr != "127.0.0.1:9007" {
					t.Fatalf("Node = %+v, %v", n, err)
				}
			}},
		{name: "register node bad state", cmd: func(testing.TB) *metapb.Command { return cRegister(8, "sleepy") }, wantErr: ErrInvalid},
		{name: "register node bad id", cmd: func(testing.TB) *metapb.Command { return cRegister(0, NodeActive) }, wantErr: ErrInvalid},
		{name: "set node state", cmd: func(testing.TB) *metapb.Command { return cNodeState(7, NodeDraining) },
			check: func(t *testing.T, f *FSM) {
				if n, _ := f.Node(7); n.State != NodeDraining || n.Version != "v1" {
					t.Fatalf("Node = %+v", n)
				}
			}},
		{name: "set node state decommissioning", cmd: func(testing.TB) *metapb.Command { return cNodeState(7, NodeDecommissioning) },
			check: func(t *testing.T, f *FSM) {
				if n, _ := f.Node(7); n.State != NodeDecommissioning {
					t.Fatalf("Node = %+v", n)
				}
			}},
		{name: "set node state unknown", cmd: func(testing.TB) *metapb.Command { return cNodeState(7, "sleepy") }, wantErr: ErrInvalid},
		{name: "set state of unknown node", cmd: func(testing.TB) *metapb.Command { return cNodeState(9, NodeActive) }, wantErr: ErrNodeNotFound},
		{name: "set assignments", cmd: func(testing.TB) *metapb.Command {
			return cSetAssign(Assignment{BucketID: BucketID{TableID: 1, Bucket: 3}, Replicas: []NodeID{7, 1}})
		}, check: func(t *testing.T, f *FSM) {
			as := f.AssignmentsForTable(1)
			if len(as) != 4 || as[3].Replicas[0] != 7 || as[3].Replicas[1] != 1 {
				t.Fatalf("assignments = %+v", as)
			}
		}},
		{name: "set assignments out of range bucket", cmd: func(testing.TB) *metapb.Command {
			return cSetAssign(Assignment{BucketID: BucketID{TableID: 1, Bucket: 0}, Replicas: []NodeID{2}},
				Assignment{BucketID: BucketID{TableID: 1, Bucket: 4}, Replicas: []NodeID{2}})
		}, wantErr: ErrInvalid, check: func(t *testing.T, f *FSM) {
			if as := f.AssignmentsForTable(1); as[0].Replicas[0] == 2 && len(as[0].Replicas) == 1 {
				t.Fatalf("a failed SetAssignments changed bucket 0: %+v", as[0])
			}
		}},
		{name: "set assignments unknown table", cmd: func(testing.TB) *metapb.Command {
			return cSetAssign(Assignment{BucketID: BucketID{TableID: 42}, Replicas: []NodeID{2}})
		}, wantErr: ErrTableNotFound},
		{name: "set assignments partitioned table without partition", cmd: func(testing.TB) *metapb.Command {
			return cSetAssign(Assignment{BucketID: BucketID{TableID: 2}, Replicas: []NodeID{2}})
		}, wantErr: ErrInvalid},
		{name: "set assignments unknown partition", cmd: func(testing.TB) *metapb.Command {
			return cSetAssign(Assignment{BucketID: BucketID{TableID: 2, PartitionID: 1}, Replicas: []NodeID{2}})
		}, wantErr: ErrPartitionNotFound},
		{name: "set assignments no replicas", cmd: func(testing.TB) *metapb.Command {
			return cSetAssign(Assignment{BucketID: BucketID{TableID: 1}})
		}, wantErr: ErrInvalid},
		{name: "forget a node that holds a replica", cmd: func(testing.TB) *metapb.Command { return cForget(7) }, wantErr: ErrInvalid,
			check: func(t *testing.T, f *FSM) {
				if _, err := f.Node(7); err != nil {
					t.Fatalf("node 7 after a refused ForgetNode: %v", err)
				}
			}},
		{name: "add columns", cmd: func(testing.TB) *metapb.Command {
			return cAddColumns(1, record.Column{Name: "note", Type: record.Type{Kind: record.KindString}, Nullable: true})
		}, wantID: 2, check: func(t *testing.T, f *FSM) {
			tb, _ := f.TableByID(1)
			if len(tb.Schemas) != 2 || tb.Schema().ID != 2 || len(tb.Schema().Columns) != 4 || tb.Schema().Columns[3].Name != "note" {
				t.Fatalf("schemas after AddColumns: %+v", tb.Schemas)
			}
			if s1 := tb.SchemaByID(1); s1 == nil || len(s1.Columns) != 3 {
				t.Fatalf("schema 1 changed: %+v", s1)
			}
		}},
		{name: "set properties", cmd: func(testing.TB) *metapb.Command {
			return cSetProps(1, map[string]string{"table.log.ttl": "1d", "team": "core"})
		}, check: func(t *testing.T, f *FSM) {
			tb, _ := f.TableByID(1)
			if tb.Properties["table.log.ttl"] != "1d" || tb.Properties["team"] != "core" || tb.Schema().ID != 2 {
				t.Fatalf("table after SetTableProperties: %+v", tb)
			}
			if byName, _ := f.TableByName("shop", "orders"); byName != tb {
				t.Fatal("TableByName and TableByID disagree after SetTableProperties")
			}
		}},
		{name: "reset a property", cmd: func(testing.TB) *metapb.Command { return cSetProps(1, nil, "team") },
			check: func(t *testing.T, f *FSM) {
				tb, _ := f.TableByID(1)
				if _, ok := tb.Properties["team"]; ok || tb.Properties["table.log.ttl"] != "1d" {
					t.Fatalf("properties after a reset: %v", tb.Properties)
				}
			}},
		{name: "set a property fixed at creation", cmd: func(testing.TB) *metapb.Command {
			return cSetProps(1, map[string]string{"table.log.ttl": "2d", "table.delete.behavior": "ignore"})
		}, wantErr: ErrInvalid, check: func(t *testing.T, f *FSM) {
			tb, _ := f.TableByID(1)
			if tb.Properties["table.log.ttl"] != "1d" || tb.Properties["table.delete.behavior"] != "" {
				t.Fatalf("a refused SetTableProperties changed %v", tb.Properties)
			}
		}},
		{name: "set properties of an unknown table", cmd: func(testing.TB) *metapb.Command {
			return cSetProps(77, map[string]string{"table.log.ttl": "2d"})
		}, wantErr: ErrTableNotFound},
		{name: "lake format set once", cmd: func(testing.TB) *metapb.Command {
			return cSetProps(1, map[string]string{PropLakeFormat: "parquet"})
		}, check: func(t *testing.T, f *FSM) {
			if tb, _ := f.TableByID(1); tb.Properties[PropLakeFormat] != "parquet" {
				t.Fatalf("properties %v after setting the lake format", tb.Properties)
			}
		}},
		{name: "lake format fixed once set", cmd: func(testing.TB) *metapb.Command {
			return cSetProps(1, map[string]string{PropLakeFormat: "iceberg"})
		}, wantErr: ErrInvalid},
		{name: "lake format not reset", cmd: func(testing.TB) *metapb.Command { return cSetProps(1, nil, PropLakeFormat) }, wantErr: ErrInvalid},
		{name: "add existing column", cmd: func(testing.TB) *metapb.Command {
			return cAddColumns(1, record.Column{Name: "id", Type: record.Type{Kind: record.KindString}, Nullable: true})
		}, wantErr: ErrInvalid},
		{name: "add not-null column", cmd: func(testing.TB) *metapb.Command {
			return cAddColumns(1, record.Column{Name: "x", Type: record.Type{Kind: record.KindString}})
		}, wantErr: ErrInvalid},
		{name: "add no columns", cmd: func(testing.TB) *metapb.Command { return cAddColumns(1) }, wantErr: ErrInvalid},
		{name: "add columns unknown table", cmd: func(testing.TB) *metapb.Command {
			return cAddColumns(77, record.Column{Name: "x", Type: record.Type{Kind: record.KindString}, Nullable: true})
		}, wantErr: ErrTableNotFound},
		{name: "cluster id", cmd: func(testing.TB) *metapb.Command { return cClusterID("abc", true) },
			check: func(t *testing.T, f *FSM) {
				if f.ClusterID() != "abc" {
					t.Fatalf("ClusterID = %q", f.ClusterID())
				}
			}},
		{name: "cluster id only if unset keeps the first", cmd: func(testing.TB) *metapb.Command { return cClusterID("def", true) },
			check: func(t *testing.T, f *FSM) {
				if f.ClusterID() != "abc" {
					t.Fatalf("ClusterID = %q", f.ClusterID())
				}
			}},
		{name: "empty cluster id", cmd: func(testing.TB) *metapb.Command { return cClusterID("", false) }, wantErr: ErrInvalid},
		{name: "cluster config recorded", cmd: func(testing.TB) *metapb.Command { return cClusterConfig(ClusterConfig{MetaVoters: 3}, true) },
			check: func(t *testing.T, f *FSM) { checkClusterConfig(t, f, ClusterConfig{MetaVoters: 3}) }},
		{name: "cluster config only if unset sets only what is unset", cmd: func(testing.TB) *metapb.Command {
			return cClusterConfig(ClusterConfig{MetaVoters: 5, DeadNodeGrace: time.Minute}, true)
		}, check: func(t *testing.T, f *FSM) {
			checkClusterConfig(t, f, ClusterConfig{MetaVoters: 3, DeadNodeGrace: time.Minute})
		}},
		{name: "cluster config set keeps what it leaves out", cmd: func(testing.TB) *metapb.Command { return cClusterConfig(ClusterConfig{MetaVoters: 5}, false) },
			check: func(t *testing.T, f *FSM) {
				checkClusterConfig(t, f, ClusterConfig{MetaVoters: 5, DeadNodeGrace: time.Minute})
			}},
		{name: "too many meta voters", cmd: func(testing.TB) *metapb.Command {
			return cClusterConfig(ClusterConfig{MetaVoters: MaxMetaVoters + 1, DeadNodeGrace: time.Hour}, false)
		}, wantErr: ErrInvalid},
		{name: "default log ttl set", cmd: func(testing.TB) *metapb.Command {
			return cClusterConfig(ClusterConfig{DefaultLogTTL: 72 * time.Hour}, false)
		}, check: func(t *testing.T, f *FSM) {
			checkClusterConfig(t, f, ClusterConfig{MetaVoters: 5, DeadNodeGrace: time.Minute, DefaultLogTTL: 72 * time.Hour})
		}},
		{name: "default log ttl too short", cmd: func(testing.TB) *metapb.Command {
			return cClusterConfig(ClusterConfig{DefaultLogTTL: time.Millisecond}, false)
		}, wantErr: ErrInvalid},
		{name: "lake snapshot retention recorded beside the others", cmd: func(testing.TB) *metapb.Command {
			return cClusterConfig(ClusterConfig{MetaVoters: 3, DefaultLogTTL: time.Hour, LakeSnapshotRetention: 90 * time.Minute}, true)
		}, check: func(t *testing.T, f *FSM) {
			checkClusterConfig(t, f, ClusterConfig{MetaVoters: 5, DeadNodeGrace: time.Minute, DefaultLogTTL: 72 * time.Hour, LakeSnapshotRetention: 90 * time.Minute})
		}},
		{name: "lake snapshot retention negative", cmd: func(testing.TB) *metapb.Command {
			return cClusterConfig(ClusterConfig{LakeSnapshotRetention: -time.Hour}, false)
		}, wantErr: ErrInvalid},
		{name: "negative meta voters", cmd: func(testing.TB) *metapb.Command { return cClusterConfig(ClusterConfig{MetaVoters: -1}, true) }, wantErr: ErrInvalid},
		{name: "grace too short", cmd: func(testing.TB) *metapb.Command {
			return cClusterConfig(ClusterConfig{MetaVoters: 7, DeadNodeGrace: time.Millisecond}, false)
		}, wantErr: ErrInvalid},
		{name: "grace too long", cmd: func(testing.TB) *metapb.Command {
			return cClusterConfig(ClusterConfig{DeadNodeGrace: MaxDeadNodeGrace + time.Millisecond}, false)
		}, wantErr: ErrInvalid, check: func(t *testing.T, f *FSM) {
			checkClusterConfig(t, f, ClusterConfig{MetaVoters: 5, DeadNodeGrace: time.Minute, DefaultLogTTL: 72 * time.Hour, LakeSnapshotRetention: 90 * time.Minute})
		}},
		{name: "drop non-empty db", cmd: func(testing.TB) *metapb.Command { return cDropDB("shop", false, false) }, wantErr: ErrDatabaseNotEmpty},
		{name: "drop table", cmd: func(testing.TB) *metapb.Command { return cDropTable("shop", "orders", false) },
			check: func(t *testing.T, f *FSM) {
				if _, err := f.TableByName("shop", "orders"); !errors.Is(err, ErrTableNotFound) {
					t.Fatalf("TableByName err = %v", err)
				}
				if _, err := f.TableByID(1); !errors.Is(err, ErrTableNotFound) {
					t.Fatalf("TableByID err = %v", err)
				}
				if as := f.AssignmentsForTable(1); len(as) != 0 {
					t.Fatalf("assignments left: %v", as)
				}
			}},
		{name: "drop table missing", cmd: func(testing.TB) *metapb.Command { return cDropTable("shop", "orders", false) }, wantErr: ErrTableNotFound},
		{name: "drop table missing db", cmd: func(testing.TB) *metapb.Command { return cDropTable("zz", "orders", false) }, wantErr: ErrDatabaseNotFound},
		{name: "drop table missing ignored", cmd: func(testing.TB) *metapb.Command { return cDropTable("shop", "orders", true) }},
		{name: "forget a decommissioned node", cmd: func(testing.TB) *metapb.Command { return cForget(7) },
			check: func(t *testing.T, f *FSM) {
				if _, err := f.Node(7); !errors.Is(err, ErrNodeNotFound) {
					t.Fatalf("node 7 after ForgetNode: %v", err)
				}
				if got := f.ForgottenNodeID(); got != 7 {
					t.Fatalf("ForgottenNodeID = %d, want 7", got)
				}
			}},
		{name: "forget an unknown node", cmd: func(testing.TB) *metapb.Command { return cForget(7) }, wantErr: ErrNodeNotFound},
		{name: "register another node", cmd: func(testing.TB) *metapb.Command { return cRegister(8, NodeActive) }},
		{name: "forget an active node", cmd: func(testing.TB) *metapb.Command { return cForget(8) }, wantErr: ErrInvalid},
		{name: "recreate gets a new id", cmd: func(t testing.TB) *metapb.Command {
			return cCreateTable(t, testSpec("shop", "orders"), false)
		}, wantID: 3},
		{name: "drop db cascade", cmd: func(testing.TB) *metapb.Command { return cDropDB("shop", false, true) },
			check: func(t *testing.T, f *FSM) {
				if len(f.Databases()) != 0 || len(f.AllTables()) != 0 || len(f.Assignments()) != 0 {
					t.Fatalf("left: %v %v %v", f.Databases(), f.AllTables(), f.Assignments())
				}
				if _, err := f.Partitions(2); !errors.Is(err, ErrTableNotFound) {
					t.Fatalf("Partitions err = %v", err)
				}
				if _, err := f.Tables("shop"); !errors.Is(err, ErrDatabaseNotFound) {
					t.Fatalf("Tables err = %v", err)
				}
			}},
		{name: "drop db missing", cmd: func(testing.TB) *metapb.Command { return cDropDB("shop", false, false) }, wantErr: ErrDatabaseNotFound},
		{name: "drop db missing ignored", cmd: func(testing.TB) *metapb.Command { return cDropDB("shop", true, false) }},
	}
	a := newApplier(t)
	for _, s := range steps {
		// Steps depend on each other: run them in order, stop at the first failure.
		ok := t.Run(s.name, func(t *testing.T) {
			before, _ := a.f.MarshalState()
			res := a.apply(s.cmd(t))
			if s.wantErr == nil && res.Err != nil {
				t.Fatalf("unexpected error: %v", res.Err)
			}
			if s.wantErr != nil {
				if !errors.Is(res.Err, s.wantErr) {
					t.Fatalf("error = %v, want %v", res.Err, s.wantErr)
				}
				after, _ := a.f.MarshalState()
				// Only the applied index may differ.
				var b, c metapb.State
				_ = unmarshal(before, &b)
				_ = unmarshal(after, &c)
				b.AppliedIndex, c.AppliedIndex = 0, 0
				if !protoEqual(&b, &c) {
					t.Fatalf("a failed command changed the state")
				}
			}
			if s.wantID != 0 && res.ID != s.wantID {
				t.Fatalf("id = %d, want %d", res.ID, s.wantID)
			}
			if a.f.AppliedIndex() != a.index {
				t.Fatalf("AppliedIndex = %d, want %d", a.f.AppliedIndex(), a.index)
			}
			if s.check != nil {
				s.check(t, a.f)
			}
		})
		if !ok {
			return
		}
	}
}

func TestFSMWatch(t *testing.T) {
	a := newApplier(t)
	w := a.f.Watch()
	a.apply(cDropDB("none", true, false)) // no change
	select {
	case <-w:
		t.Fatal("watch fired without a change")
	default:
	}
	a.apply(cCreateDB("db", false))
	select {
	case <-w:
	default:
		t.Fatal("watch did not fire on a change")
	}
	w2 := a.f.Watch()
	if w2 == w {
		t.Fatal("Watch returned the fired channel again")
	}
	a.apply(cCreateDB("db", false)) // error: no change
	select {
	case <-w2:
		t.Fatal("watch fired on a failed command")
	default:
	}
	snap, _ := a.f.MarshalState()
	if err := a.f.Restore(nopCloser{bytes.NewReader(snap)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w2:
	default:
		t.Fatal("watch did not fire on restore")
	}
}

func TestApplyPanicsOnUndecodable(t *testing.T) {
	for _, data := range [][]byte{{0xff, 0xff, 0xff}, {}, mustEncode(t, &metapb.Command{Cmd: &metapb.Command_CreateTable{CreateTable: &metapb.CreateTable{}}})} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Fatalf("Apply(%x) did not panic", data)
				}
			}()
			NewFSM().Apply(&raft.Log{Index: 1, Data: data})
		}()
	}
}

func mustEncode(t testing.TB, c *metapb.Command) []byte {
	b, err := EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeCommand(t *testing.T) {
	bad := []struct {
		name string
		data []byte
		want string
	}{
		{"garbage", []byte{0x0a, 0xff}, "undecodable"},
		{"empty", nil, "unknown command"},
		{"create table without table", mustEncode(t, &metapb.Command{Cmd: &metapb.Command_CreateTable{CreateTable: &metapb.CreateTable{}}}), "without a table"},
		{"create db without db", mustEncode(t, &metapb.Command{Cmd: &metapb.Command_CreateDatabase{CreateDatabase: &metapb.CreateDatabase{}}}), "without a database"},
		{"register without node", mustEncode(t, &metapb.Command{Cmd: &metapb.Command_RegisterNode{RegisterNode: &metapb.RegisterNode{}}}), "without a node"},
		{"bad column type", mustEncode(t, &metapb.Command{Cmd: &metapb.Command_CreateTable{CreateTable: &metapb.CreateTable{Table: &metapb.Table{
			Name: "t", Schemas: []*metapb.Schema{{Id: 1, Columns: []*metapb.Column{{Name: "a", Type: "WIDGET"}}}}}}}}), "WIDGET"},
		{"cluster config without a config", mustEncode(t, &metapb.Command{Cmd: &metapb.Command_SetClusterConfig{SetClusterConfig: &metapb.SetClusterConfig{OnlyIfUnset: true}}}), "without a config"},
		{"table without schema", mustEncode(t, &metapb.Command{Cmd: &metapb.Command_CreateTable{CreateTable: &metapb.CreateTable{Table: &metapb.Table{Name: "t"}}}}), "no schema"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCommand(tc.data)
			if !errors.Is(err, ErrBadCommand) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadCommand mentioning %q", err, tc.want)
			}
		})
	}
	good := cCreateTable(t, testSpec("d", "t"), false)
	c, err := DecodeCommand(mustEncode(t, good))
	if err != nil || c.GetCreateTable().GetTable().GetName() != "t" {
		t.Fatalf("DecodeCommand(good) = %v, %v", c, err)
	}
}

// randomCommand draws a command that is often, but not always, valid
// against the state the sequence has built.
func randomCommand(t testing.TB, r *rand.Rand) *metapb.Command {
	dbs := []string{"a", "b", "c"}
	tables := []string{"t1", "t2", "t3", "t4"}
	db := dbs[r.IntN(len(dbs))]
	tb := tables[r.IntN(len(tables))]
	switch r.IntN(13) {
	case 12:
		return cClusterConfig(ClusterConfig{MetaVoters: r.IntN(MaxMetaVoters + 2), DeadNodeGrace: time.Duration(r.IntN(3)) * time.Minute,
			DefaultLogTTL: time.Duration(r.IntN(3)) * time.Hour, LakeSnapshotRetention: time.Duration(r.IntN(3)) * time.Minute}, r.IntN(2) == 0)
	case 11:
		return cAddColumns(int64(1+r.IntN(8)), record.Column{Name: fmt.Sprintf("c%d", r.IntN(6)), Type: record.Type{Kind: record.KindInt}, Nullable: r.IntN(4) != 0})
	case 0, 1:
		return cCreateDB(db, r.IntN(2) == 0)
	case 2:
		return cDropDB(db, r.IntN(2) == 0, r.IntN(2) == 0)
	case 3, 4:
		var s TableSpec
		if r.IntN(2) == 0 {
			s = partitionedSpec(db, tb)
		} else {
			s = testSpec(db, tb)
			s.BucketCount = int32(1 + r.IntN(5))
		}
		s.Properties = map[string]string{"owner": fmt.Sprint(r.IntN(3)), "table.log.ttl": "7d"}
		return cCreateTable(t, s, r.IntN(2) == 0)
	case 5:
		return cDropTable(db, tb, r.IntN(2) == 0)
	case 6:
		return cCreatePartition(t, int64(1+r.IntN(8)), 2, fmt.Sprintf("p%d", r.IntN(4)), r.IntN(2) == 0)
	case 7:
		return cDropPartition(int64(1+r.IntN(8)), fmt.Sprintf("p%d", r.IntN(4)), r.IntN(2) == 0)
	case 8:
		states := []NodeState{NodeJoining, NodeActive, NodeDraining, NodeLeft, NodeDecommissioning}
		switch r.IntN(5) {
		case 0, 1:
			return cRegister(NodeID(1+r.IntN(5)), states[r.IntN(len(states))])
		case 2:
			return cForget(NodeID(1 + r.IntN(5)))
		}
		return cNodeState(NodeID(1+r.IntN(5)), states[r.IntN(len(states))])
	case 10:
		return cSetProps(int64(1+r.IntN(8)), map[string]string{"table.log.ttl": fmt.Sprintf("%dd", 1+r.IntN(3))}, "owner")
	case 9:
		var as []Assignment
		for range 1 + r.IntN(3) {
			as = append(as, Assignment{
				BucketID: BucketID{TableID: int64(1 + r.IntN(8)), PartitionID: int64(r.IntN(4)), Bucket: int32(r.IntN(3))},
				Replicas: []NodeID{NodeID(1 + r.IntN(2)), NodeID(3 + r.IntN(3))},
			})
		}
		return cSetAssign(as...)
	default:
		return cClusterID(fmt.Sprintf("c%d", r.IntN(3)), r.IntN(2) == 0)
	}
}

func TestFSMReplayDeterminism(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0))
	const n = 600
	cmds := make([]*metapb.Command, n)
	for i := range cmds {
		cmds[i] = randomCommand(t, r)
	}
	a, b := newApplier(t), newApplier(t)
	var restored *applier
	ok := 0
	for i, c := range cmds {
		ra, rb := a.apply(c), b.apply(c)
		if (ra.Err == nil) != (rb.Err == nil) || ra.ID != rb.ID {
			t.Fatalf("command %d: results differ: %+v vs %+v", i, ra, rb)
		}
		if ra.Err == nil {
			ok++
		}
		if i == n/2 {
			restored = snapshotRoundTrip(t, a)
			restored.index = a.index
			if restored.f.AppliedIndex() != a.index {
				t.Fatalf("restored AppliedIndex = %d, want %d", restored.f.AppliedIndex(), a.index)
			}
		} else if restored != nil {
			restored.apply(c)
		}
	}
	if ok < n/4 {
		t.Fatalf("only %d of %d commands succeeded: the generator exercises too little", ok, n)
	}
	sa, _ := a.f.MarshalState()
	sb, _ := b.f.MarshalState()
	sr, _ := restored.f.MarshalState()
	if !bytes.Equal(sa, sb) {
		t.Fatal("two FSMs fed the same commands produced different snapshots")
	}
	if !bytes.Equal(sa, sr) {
		t.Fatal("the FSM restored from a mid-way snapshot diverged")
	}
	t.Logf("%d/%d commands succeeded; final state %d bytes, %d tables, %d assignments", ok, n, len(sa), len(a.f.AllTables()), len(a.f.Assignments()))
}

func TestRestoreRejectsGarbage(t *testing.T) {
	f := NewFSM()
	if err := f.Restore(nopCloser{bytes.NewReader([]byte{0x32, 0xff})}); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("Restore(garbage) = %v, want ErrBadSnapshot", err)
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

// TestFSMPartitionLimits: a table holds at most MaxPartitionsPerTable
// partitions and MaxBucketsPerTable buckets over them; the next create is
// ErrTooManyPartitions and changes nothing, and a drop makes room again.
func TestFSMPartitionLimits(t *testing.T) {
	for _, tc := range []struct {
		buckets int32
		fits    int
	}{
		{1, MaxPartitionsPerTable},
		{4096, MaxBucketsPerTable / 4096},
	} {
		t.Run(fmt.Sprint(tc.buckets, " buckets"), func(t *testing.T) {
			a := newApplier(t)
			a.apply(cCreateDB("shop", false))
			spec := partitionedSpec("shop", "events")
			spec.BucketCount = tc.buckets
			if res := a.apply(cCreateTable(t, spec, false)); res.Err != nil {
				t.Fatal(res.Err)
			}
			tableID := a.f.AllTables()[0].ID
			// The same assignments for every partition: the FSM stamps ids.
			as := testAssignments(t, tc.buckets)
			create := func(dt string) error {
				return a.apply(&metapb.Command{Cmd: &metapb.Command_CreatePartition{CreatePartition: &metapb.CreatePartition{
					TableId: tableID, Name: dt, Values: map[string]string{"dt": dt}, Assignments: as, CreatedAtMs: 3000}}}).Err
			}
			for i := range tc.fits {
				if err := create(fmt.Sprintf("p%d", i)); err != nil {
					t.Fatalf("partition %d of %d: %v", i+1, tc.fits, err)
				}
			}
			if err := create("over"); !errors.Is(err, ErrTooManyPartitions) {
				t.Fatalf("partition %d: %v, want ErrTooManyPartitions", tc.fits+1, err)
			}
			if ps, _ := a.f.Partitions(tableID); len(ps) != tc.fits {
				t.Fatalf("%d partitions after the refused create, want %d", len(ps), tc.fits)
			}
			if res := a.apply(cDropPartition(tableID, "p0", false)); res.Err != nil {
				t.Fatal(res.Err)
			}
			if err := create("over"); err != nil {
				t.Fatalf("create after a drop: %v", err)
			}
		})
	}
}

// TestSnapshotKeepsDictionaryColumns: a column's dictionary flag survives
// the catalog's commands and a snapshot round trip.
func TestSnapshotKeepsDictionaryColumns(t *testing.T) {
	a := newApplier(t)
	if r := a.apply(cCreateDB("db", false)); r.Err != nil {
		t.Fatal(r.Err)
	}
	spec := testSpec("db", "t")
	spec.Columns[1].Dictionary = true
	if r := a.apply(cCreateTable(t, spec, false)); r.Err != nil {
		t.Fatal(r.Err)
	}
	restored := snapshotRoundTrip(t, a)
	for _, f := range []*FSM{a.f, restored.f} {
		tables := f.AllTables()
		if len(tables) != 1 {
			t.Fatalf("%d tables", len(tables))
		}
		var flags []bool
		for _, c := range tables[0].Schema().Columns {
			flags = append(flags, c.Dictionary)
		}
		if !slices.Equal(flags, []bool{false, true, false}) {
			t.Fatalf("dictionary flags %v, want [false true false]", flags)
		}
	}
}

// snapshotRoundTrip persists a snapshot of a's FSM and restores it into a
// new applier.
func snapshotRoundTrip(t *testing.T, a *applier) *applier {
	t.Helper()
	snap, err := a.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	restored := newApplier(t)
	if err := restored.f.Restore(nopCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
	return restored
}
