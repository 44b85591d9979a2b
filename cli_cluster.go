package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// nodeStateCmd is a command that changes one node's state with call and
// prints done(node id).
func nodeStateCmd(use, short string, done func(int32) string, call func(context.Context, *client.Client, int32) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseNodeArg(args[0])
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			if err := call(ctx, newClient(), id); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), done(id))
			return nil
		},
	}
}

// waitableStateCmd is a nodeStateCmd with --wait: send makes the change,
// and with --wait D the command then waits (await, up to D) until the node
// got there; done says so, or, when the command did not wait, how to
// watch it.
func waitableStateCmd(use, short, waitHelp string, done func(id int32, waited bool) string,
	send func(context.Context, *client.Client, int32) error, await func(context.Context, *client.Client, int32, time.Duration) error) *cobra.Command {
	var wait time.Duration
	cmd := nodeStateCmd(use, short, func(id int32) string { return done(id, wait > 0) },
		func(ctx context.Context, c *client.Client, id int32) error {
			if wait < 0 {
				return fmt.Errorf("--wait must be 0 (do not wait) or more, got %v", wait)
			}
			if err := send(ctx, c, id); err != nil || wait == 0 {
				return err
			}
			return await(ctx, c, id, wait)
		})
	cmd.Flags().DurationVar(&wait, "wait", 0, waitHelp)
	return cmd
}

// clusterOpsCmds are the cluster operations of `fluss-node cluster`:
// drain, undrain, decommission and rebalance (AdminService DrainNode,
// UndrainNode, DecommissionNode, Rebalance). Each returns once the
// metadata leader applied the change; the nodes then converge (watch
// `cluster status`, or wait with --wait).
func clusterOpsCmds() []*cobra.Command {
	drain := waitableStateCmd("drain NODE", "Move every bucket leadership off a node and place nothing new on it (until undrain)",
		"wait up to this long until the node leads no bucket, and fail if it still does (0: return at once)",
		func(id int32, waited bool) string {
			if waited {
				return fmt.Sprintf("node %d is draining and leads no bucket", id)
			}
			return fmt.Sprintf("node %d is draining; `fluss-node cluster status` shows its leaders going to 0 (or use --wait)", id)
		},
		func(ctx context.Context, c *client.Client, id int32) error {
			_, err := c.Admin().DrainNode(ctx, connect.NewRequest(&flussv1.DrainNodeRequest{NodeId: id}))
			return err
		}, waitDrained)
	undrain := nodeStateCmd("undrain NODE", "Return a draining or decommissioning node to active: it leads and receives buckets again",
		func(id int32) string { return fmt.Sprintf("node %d is active", id) },
		func(ctx context.Context, c *client.Client, id int32) error {
			_, err := c.Admin().UndrainNode(ctx, connect.NewRequest(&flussv1.UndrainNodeRequest{NodeId: id}))
			return err
		})
	decommission := waitableStateCmd("decommission NODE", "Remove a running node from the cluster for good: move its replicas and vote to other nodes",
		"wait up to this long until the node holds nothing and has left the metadata group, and fail if not (0: return at once)",
		func(id int32, waited bool) string {
			if waited {
				return fmt.Sprintf("node %d is decommissioned: it holds no replica and has left the metadata group; stop it", id)
			}
			return fmt.Sprintf("node %d is decommissioning; `fluss-node cluster status` shows its replicas going to 0, then the node decommissioned (or use --wait); stop it then", id)
		},
		func(ctx context.Context, c *client.Client, id int32) error {
			_, err := c.Admin().DecommissionNode(ctx, connect.NewRequest(&flussv1.DecommissionNodeRequest{NodeId: id}))
			return err
		}, waitDecommissioned)
	decommission.Long = "Remove a running node from the cluster for good. It hands off its leaderships as a drain\n" +
		"does; each of its replicas is copied to an active node, which votes before the old one is\n" +
		"removed (the buckets keep all their replicas meanwhile); then it leaves the metadata group.\n" +
		"Refused when some bucket it holds has no other active node free to take it.\n" +
		"`cluster undrain NODE` stops a decommission, or undoes a finished one while the node runs.\n" +
		"Once stopped for cluster.dead_node_grace, a decommissioned node is forgotten (gone from\n" +
		"`cluster status`); its id is not given to another node."
	rebalance := &cobra.Command{
		Use:   "rebalance",
		Short: "Spread bucket replicas and leaders evenly over the active nodes",
		Long: "Spread bucket replicas and leaders evenly over the active nodes. A replica moves by\n" +
			"adding the new one, waiting until it caught up, then removing the old one (which serves\n" +
			"until then, so buckets of any replication factor move); at most one replica of a bucket\n" +
			"moves per run.\n" +
			"Run it again once the moves finished until it reports 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			res, err := newClient().Admin().Rebalance(ctx, connect.NewRequest(&flussv1.RebalanceRequest{}))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d replica(s) moving\n", res.Msg.Moved)
			return nil
		},
	}
	return []*cobra.Command{drain, undrain, decommission, rebalance, clusterConfigCmd(), restoreBucketCmd()}
}

// restoreBucketCmd brings back a bucket that lost every replica
// (AdminService RestoreBucket).
func restoreBucketCmd() *cobra.Command {
	var bucket int32
	var partition string
	cmd := &cobra.Command{
		Use:   "restore-bucket DB.TABLE --bucket N [--partition NAME]",
		Short: "Bring back a bucket that lost every replica, from what remote storage holds of it",
		Long: "Bring back a bucket whose every replica is gone (their nodes died for good\n" +
			"and have been down past cluster.dead_node_grace): a new Raft group for the bucket starts\n" +
			"on a live node, and the table's replication factor is restored as for any bucket. Its log\n" +
			"continues after the last offset that remote storage (tiering) and the lake hold of the\n" +
			"bucket, which stay readable; what only the lost replicas held is gone, and new records\n" +
			"take its offsets. Without tiering the bucket starts empty at offset 0. A primary-key\n" +
			"bucket's rows are those of its newest KV snapshot in remote storage\n" +
			"(tiering.kv_snapshot_interval) with the remote changelog after it applied.\n" +
			"Refused while a replica's node is up or not yet down past the grace, and for a\n" +
			"primary-key bucket when remote storage holds no KV snapshot from which its remote log\n" +
			"runs without a gap to its end.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("bucket") {
				return fmt.Errorf("--bucket is required")
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			res, err := newClient().Admin().RestoreBucket(ctx, connect.NewRequest(&flussv1.RestoreBucketRequest{
				Table: args[0], Partition: partition, Bucket: bucket}))
			if err != nil {
				return err
			}
			where := args[0]
			if partition != "" {
				where += " partition " + partition
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bucket %d of %s restored (generation %d) on node(s) %v: its log continues at offset %d\n",
				bucket, where, res.Msg.Generation, res.Msg.Replicas, res.Msg.StartOffset)
			return nil
		},
	}
	cmd.Flags().Int32Var(&bucket, "bucket", 0, "the bucket to restore")
	cmd.Flags().StringVar(&partition, "partition", "", "the partition's name, for a partitioned table")
	return cmd
}

// clusterConfigCmd shows or changes the cluster-wide settings
// (AdminService SetClusterConfig).
func clusterConfigCmd() *cobra.Command {
	var metaVoters int32
	var grace, ttl, lakeRetention time.Duration
	cmd := &cobra.Command{
		Use:   "config [--meta-voters N] [--dead-node-grace D] [--default-log-ttl D] [--lake-snapshot-retention D]",
		Short: "Show or change cluster-wide settings (meta_voters, dead_node_grace, default_log_ttl, lake_snapshot_retention)",
		Long: "Show the cluster-wide settings, or change those given as flags. They are the cluster's,\n" +
			"kept in its catalog: the meta_voters, [cluster] dead_node_grace, [storage]\n" +
			"default_log_ttl and [tiering] lake_snapshot_retention of a node's config only set a\n" +
			"new cluster's starting values.\n" +
			"--meta-voters N: how many nodes vote in the metadata Raft group (1 to 9; 3 or 5 in\n" +
			"production). The metadata leader promotes non-voters or demotes voters until the group\n" +
			"has N voters or every active node votes.\n" +
			"--dead-node-grace D: how long a node may be down before its replicas move to other\n" +
			"nodes and it leaves the metadata group (1s to 720h, e.g. 10m).\n" +
			"--default-log-ttl D: how long the log of a table without table.log.ttl keeps its rows\n" +
			"(1s or more, e.g. 72h).\n" +
			"--lake-snapshot-retention D: how long an Iceberg snapshot of a lake table stays after a\n" +
			"newer one replaced it, with the files only it holds (1ms or more, e.g. 24h).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &flussv1.SetClusterConfigRequest{}
			if cmd.Flags().Changed("meta-voters") {
				req.MetaVoters = &metaVoters
			}
			for _, d := range []struct {
				flag string
				v    time.Duration
				to   **int64
			}{{"dead-node-grace", grace, &req.DeadNodeGraceMs}, {"default-log-ttl", ttl, &req.DefaultLogTtlMs},
				{"lake-snapshot-retention", lakeRetention, &req.LakeSnapshotRetentionMs}} {
				if !cmd.Flags().Changed(d.flag) {
					continue
				}
				ms := d.v.Milliseconds()
				if time.Duration(ms)*time.Millisecond != d.v {
					return fmt.Errorf("--%s %v: give whole milliseconds", d.flag, d.v)
				}
				*d.to = &ms
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			res, err := newClient().Admin().SetClusterConfig(ctx, connect.NewRequest(req))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "meta_voters = %d\ndead_node_grace = %q\ndefault_log_ttl = %q\nlake_snapshot_retention = %q\n", res.Msg.MetaVoters,
				time.Duration(res.Msg.DeadNodeGraceMs)*time.Millisecond, time.Duration(res.Msg.DefaultLogTtlMs)*time.Millisecond,
				time.Duration(res.Msg.LakeSnapshotRetentionMs)*time.Millisecond)
			return nil
		},
	}
	cmd.Flags().Int32Var(&metaVoters, "meta-voters", 0, "voters of the metadata Raft group, 1 to 9")
	cmd.Flags().DurationVar(&grace, "dead-node-grace", 0, "how long a node may be down before its replicas move, 1s to 720h")
	cmd.Flags().DurationVar(&ttl, "default-log-ttl", 0, "retention of tables without table.log.ttl, 1s or more")
	cmd.Flags().DurationVar(&lakeRetention, "lake-snapshot-retention", 0, "how long a replaced Iceberg snapshot stays, 1ms or more")
	return cmd
}

// waitDrained polls the cluster until node id leads no bucket, printing
// how many it still leads to stderr as that changes, for at most wait. A
// node that does not report what it leads (down, or cut off and perhaps
// still leading) is not taken as drained.
func waitDrained(ctx context.Context, c *client.Client, id int32, wait time.Duration) error {
	return waitNode(ctx, c, id, wait, func(n *flussv1.NodeInfo) (bool, string, string) {
		if !reported(n) {
			return false, "did not report what it leads", "down or unreachable: see `fluss-node cluster status`"
		}
		return n.Leaders == 0, fmt.Sprintf("still leads %d bucket(s)", n.Leaders), `its log says why ("drain: bucket leadership cannot leave this node yet")`
	})
}

// waitDecommissioned polls the cluster until node id shows decommissioned
// (no assignment names it and it left the metadata group), printing what
// it still holds as that changes, for at most wait.
func waitDecommissioned(ctx context.Context, c *client.Client, id int32, wait time.Duration) error {
	return waitNode(ctx, c, id, wait, func(n *flussv1.NodeInfo) (bool, string, string) {
		switch {
		case n == nil, n.State == "decommissioned":
			// Not listed: forgotten (stopped for dead_node_grace after its
			// decommission finished); the call that began it found it.
			return true, "", ""
		case n.State != "decommissioning":
			return false, "is " + n.State + ", not decommissioning", "undrained meanwhile, or down: see `fluss-node cluster status`"
		}
		return false, fmt.Sprintf("still holds %d replica(s), metadata role %s", n.Replicas, n.MetaRole),
			`the metadata leader's log says why ("no active node to move to"), or the buckets' leaders' (a replica that cannot catch up)`
	})
}

// reported tells whether a node answered DescribeCluster's question for
// its replicas (nil: not listed): it reports its replication health (a
// binary from before that, at least its replicas).
func reported(n *flussv1.NodeInfo) bool {
	return n != nil && (n.UnderReplicated != nil || n.Replicas > 0)
}

// waitNode polls DescribeCluster every 500 ms, for at most wait, until
// check says node id (nil when not listed) is done. check also says what
// is left, printed to stderr each time it changes, and where to look if
// that is still so after wait (the error then).
func waitNode(ctx context.Context, c *client.Client, id int32, wait time.Duration, check func(*flussv1.NodeInfo) (done bool, left, hint string)) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var left, hint string
	for {
		info, err := c.DescribeCluster(ctx)
		if err == nil {
			var node *flussv1.NodeInfo
			for _, n := range info.Nodes {
				if n.Id == id {
					node = n
				}
			}
			done, l, h := check(node)
			if done {
				return nil
			}
			if l != left {
				fmt.Fprintf(os.Stderr, "node %d %s\n", id, l)
			}
			left, hint = l, h
		}
		select {
		case <-ctx.Done():
			if left != "" {
				return fmt.Errorf("node %d %s after %v: %s", id, left, wait, hint)
			}
			return fmt.Errorf("waiting for node %d: %w", id, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// parseNodeArg parses a node id argument (> 0).
func parseNodeArg(s string) (int32, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("NODE must be a node id > 0 (see `fluss-node cluster status`), got %q", s)
	}
	return int32(v), nil
}
