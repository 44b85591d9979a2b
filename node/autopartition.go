package node

import (
	"context"
	"errors"
	"time"

	"github.com/fluss-node/fluss-node/raftmeta"
)

// autoPartitioner is the controller's auto-partitioning (Fluss's
// table.auto-partition.*): on every pass over the tables that enable it,
// it creates the partitions due ahead of time and drops those past
// retention (raftmeta.PlanAutoPartitions). It runs on the metadata leader
// only; a new leader carries on from the catalog. errs remembers each
// table's last failure so that a failing table is logged once, not every
// pass.
type autoPartitioner struct {
	n    *Node
	errs map[int64]string
}

// pass plans and applies the partitions of every auto-partitioned table
// at now.
func (ap *autoPartitioner) pass(ctx context.Context, now time.Time) {
	n := ap.n
	for _, t := range n.meta.FSM().AllTables() {
		cfg, on, err := raftmeta.AutoPartitionOf(t)
		if !on {
			ap.report(t, err)
			continue
		}
		parts, err := n.meta.Partitions(t.ID)
		if err != nil {
			continue // dropped meanwhile
		}
		create, drop := raftmeta.PlanAutoPartitions(t, cfg, parts, now)
		err = nil
		for _, values := range create {
			if _, e := n.createPartition(ctx, t.Database, t.Name, values, true); e != nil {
				err = errors.Join(err, e)
				continue
			}
			n.logger.Info("auto-partition: created partition", "table", t.FullName(), "values", values)
		}
		for _, name := range drop {
			values := partitionValuesOf(parts, name)
			if values == nil {
				continue
			}
			if e := n.meta.DropPartition(ctx, t.Database, t.Name, values, true); e != nil {
				err = errors.Join(err, e)
				continue
			}
			n.logger.Info("auto-partition: dropped partition past retention", "table", t.FullName(), "partition", name)
		}
		ap.report(t, err)
	}
}

// report logs err for t unless it is the error last logged for t.
func (ap *autoPartitioner) report(t *raftmeta.Table, err error) {
	if err == nil {
		delete(ap.errs, t.ID)
		return
	}
	if ap.errs[t.ID] == err.Error() {
		return
	}
	ap.errs[t.ID] = err.Error()
	ap.n.logger.Warn("auto-partition: table's partitions not maintained", "table", t.FullName(), "err", err)
}

func partitionValuesOf(parts []*raftmeta.Partition, name string) map[string]string {
	for _, p := range parts {
		if p.Name == name {
			return p.Values
		}
	}
	return nil
}

// createPartition creates a partition on the metadata leader once every
// alive node supports partitioned tables (featurePartitions).
func (n *Node) createPartition(ctx context.Context, db, table string, values map[string]string, ignoreIfExists bool) (int64, error) {
	if err := n.requireFeature(featurePartitions, "creating a partition"); err != nil {
		return 0, err
	}
	return n.meta.CreatePartition(ctx, db, table, values, ignoreIfExists)
}
