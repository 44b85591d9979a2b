package main

import (
	"context"
	"fmt"
	"strconv"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// nodeStateCmd is a command that changes one node's state with call and
// prints done (a format with the node id).
func nodeStateCmd(use, short, done string, call func(context.Context, *client.Client, int32) error) *cobra.Command {
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
			fmt.Fprintf(cmd.OutOrStdout(), done, id)
			return nil
		},
	}
}

// clusterOpsCmds are the cluster operations of `fluss-node cluster`:
// drain, undrain and rebalance (AdminService DrainNode, UndrainNode,
// Rebalance). Each returns once the metadata leader applied the change;
// the nodes then converge (watch `cluster status`).
func clusterOpsCmds() []*cobra.Command {
	drain := nodeStateCmd("drain NODE", "Move every bucket leadership off a node and place nothing new on it (until undrain)",
		"node %d is draining; `fluss-node cluster status` shows its leaders going to 0\n",
		func(ctx context.Context, c *client.Client, id int32) error {
			_, err := c.Admin().DrainNode(ctx, connect.NewRequest(&flussv1.DrainNodeRequest{NodeId: id}))
			return err
		})
	undrain := nodeStateCmd("undrain NODE", "Return a draining node to active: it leads and receives buckets again",
		"node %d is active\n",
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

// parseNodeArg parses a node id argument (> 0).
func parseNodeArg(s string) (int32, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("NODE must be a node id > 0 (see `fluss-node cluster status`), got %q", s)
	}
	return int32(v), nil
}
