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

// clusterOpsCmds are the cluster operations of `fluss-node cluster`:
// drain, undrain and rebalance (AdminService DrainNode, UndrainNode,
// Rebalance). Each returns once the metadata leader applied the change;
// the nodes then converge (watch `cluster status`).
func clusterOpsCmds() []*cobra.Command {
	var wait time.Duration
	drain := nodeStateCmd("drain NODE", "Move every bucket leadership off a node and place nothing new on it (until undrain)",
		func(id int32) string {
			if wait > 0 {
				return fmt.Sprintf("node %d is draining and leads no bucket", id)
			}
			return fmt.Sprintf("node %d is draining; `fluss-node cluster status` shows its leaders going to 0 (or use --wait)", id)
		},
		func(ctx context.Context, c *client.Client, id int32) error {
			if wait < 0 {
				return fmt.Errorf("--wait must be 0 (do not wait) or more, got %v", wait)
			}
			if _, err := c.Admin().DrainNode(ctx, connect.NewRequest(&flussv1.DrainNodeRequest{NodeId: id})); err != nil {
				return err
			}
			if wait == 0 {
				return nil
			}
			return waitDrained(ctx, c, id, wait)
		})
	drain.Flags().DurationVar(&wait, "wait", 0, "wait up to this long until the node leads no bucket, and fail if it still does (0: return at once)")
	undrain := nodeStateCmd("undrain NODE", "Return a draining node to active: it leads and receives buckets again",
		func(id int32) string { return fmt.Sprintf("node %d is active", id) },
		func(ctx context.Context, c *client.Client, id int32) error {
			_, err := c.Admin().UndrainNode(ctx, connect.NewRequest(&flussv1.UndrainNodeRequest{NodeId: id}))
			return err
		})
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
	return []*cobra.Command{drain, undrain, rebalance}
}

// waitDrained polls the cluster until node id leads no bucket, printing
// how many it still leads to stderr as that changes, for at most wait. A
// node that does not report what it leads (down, or cut off and perhaps
// still leading) is not taken as drained.
func waitDrained(ctx context.Context, c *client.Client, id int32, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	const unknown = -1
	last := int32(-2) // nothing printed yet
	for {
		info, err := c.DescribeCluster(ctx)
		if err == nil {
			leads := int32(unknown)
			for _, n := range info.Nodes {
				// A node that answered reports its replication health (a
				// binary from before it, at least its replicas).
				if n.Id == id && (n.UnderReplicated != nil || n.Replicas > 0) {
					leads = n.Leaders
				}
			}
			if leads == 0 {
				return nil
			}
			if leads != last {
				if leads == unknown {
					fmt.Fprintf(os.Stderr, "node %d does not report what it leads\n", id)
				} else {
					fmt.Fprintf(os.Stderr, "node %d still leads %d bucket(s)\n", id, leads)
				}
				last = leads
			}
		}
		select {
		case <-ctx.Done():
			switch {
			case last > 0:
				return fmt.Errorf("node %d still leads %d bucket(s) after %v: its log says why (\"drain: bucket leadership cannot leave this node yet\")", id, last, wait)
			case last == unknown:
				return fmt.Errorf("node %d did not report what it leads within %v (down or unreachable: see `fluss-node cluster status`)", id, wait)
			}
			return fmt.Errorf("waiting for node %d to lead no bucket: %w", id, err)
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
