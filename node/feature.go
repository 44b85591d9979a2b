package node

import (
	"fmt"
	"slices"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Cluster feature levels (DESIGN §8: the minimum supported by all live
// nodes gates new on-disk and wire formats, so that old and new binaries
// interoperate during a rolling upgrade). A node gossips the highest level
// its binary supports; binaries from before levels gossip none (0).
const (
	// featurePartitions: partitioned tables. Their buckets use KV prefixes
	// (kvPrefix) and metadata operations (create_partition,
	// drop_partition) that earlier binaries do not know: an earlier node
	// would open a partition's PK bucket under another prefix and lose its
	// KV state when upgraded.
	featurePartitions uint32 = 1
	// featureSnapshotLog: a bucket snapshot sent to another replica carries
	// the sender's local log in front of the state (node/replica
	// snapshot.go). An earlier binary cannot read it and fails to restore.
	featureSnapshotLog uint32 = 2
	// featureDictionary: dictionary-encoded columns (record.Column
	// Dictionary). Their batches start with Arrow dictionary batches,
	// which an earlier binary neither decodes nor projects, and its
	// catalog would drop the column flag.
	featureDictionary uint32 = 3
	// featureDecommission: node state decommissioning in the catalog. An
	// earlier binary refuses to apply it (an unknown state), so its
	// catalog copy would part from the others'.
	featureDecommission uint32 = 4
	// featureForget: the forget_node metadata command, which removes a
	// decommissioned node from the catalog. An earlier binary cannot
	// decode it and would stop applying the metadata log.
	featureForget uint32 = 5
	// featureAlterProperties: the set_table_properties metadata command
	// (AlterTable's setProperties and resetProperties), which an earlier
	// binary cannot decode.
	featureAlterProperties uint32 = 6
	// featurePKColumns: adding columns to a primary-key table. Its
	// changelog batches then carry more than one schema version, and
	// bucket.pkwrite a schema id, which an earlier binary reads as one
	// version (it would apply a changelog batch with the wrong schema).
	featurePKColumns uint32 = 7
	// featureClusterConfig: the set_cluster_config metadata command (the
	// cluster-wide settings held in the catalog: node/clusterconfig.go),
	// which an earlier binary cannot decode.
	featureClusterConfig uint32 = 8
	// featureLakeFormat: table.datalake.format set on an existing table
	// (AlterTable turning its lake on, or naming the format of a table
	// that has none). An earlier binary's state machine refuses the key in
	// set_table_properties, so its catalog would part from the others'.
	featureLakeFormat uint32 = 9
	// featureRestoreBucket: the restore_bucket metadata command and bucket
	// groups of a generation above 0 (restore.go), which an earlier binary
	// cannot decode (its catalog would part from the others') nor open
	// (it would bootstrap the new group at offset 0).
	featureRestoreBucket uint32 = 10
	// featureFence: the fence_nodes metadata command (fence.go), which an
	// earlier binary cannot decode.
	featureFence uint32 = 11

	// featureLevel is the highest level this binary supports.
	featureLevel = featureFence
)

// clusterFeatureLevel is the lowest feature level the alive gossip members
// (this node included) support.
func (n *Node) clusterFeatureLevel() uint32 {
	level := n.featureLevel
	for _, mb := range n.members() {
		if mb.Status == membership.StatusAlive {
			level = min(level, mb.FeatureLevel)
		}
	}
	return level
}

// requireFeature refuses an operation that needs feature level want while
// an alive node supports less.
func (n *Node) requireFeature(want uint32, what string) error {
	if n.clusterFeatureLevel() >= want {
		return nil
	}
	var old []int32
	for _, mb := range n.members() {
		if mb.Status == membership.StatusAlive && mb.FeatureLevel < want {
			old = append(old, mb.ID)
		}
	}
	return fmt.Errorf("%w: %s needs cluster feature level %d, and node(s) %v run an older version; upgrade every node first", raftmeta.ErrFeatureLevel, what, want, old)
}

// requireDictionary refuses dictionary-encoded columns among cols while an
// alive node's binary does not know them.
func (n *Node) requireDictionary(cols []record.Column) error {
	if !slices.ContainsFunc(cols, func(c record.Column) bool { return c.Dictionary }) {
		return nil
	}
	return n.requireFeature(featureDictionary, "a dictionary-encoded column")
}
