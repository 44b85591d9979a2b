package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fluss-node/fluss-node/node"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// recoverCmd is `fluss-node recover`: the offline recovery of a stopped
// node's data directory after nodes were lost for good (node.Recover).
func recoverCmd() *cobra.Command {
	var (
		config, dataDir, positions string
		lost                       []int32
		dryRun                     bool
	)
	cmd := &cobra.Command{
		Use:   "recover --lost N[,N...]",
		Short: "Recover a stopped node's data after other nodes were lost for good (their copies are given up)",
		Long: "recover lets a cluster that lost a majority of its metadata voters, or of some buckets' replicas,\n" +
			"run again from what the surviving nodes hold. Stop every surviving node, run recover on each\n" +
			"with the same --lost list, then start them. On this node's data directory it:\n" +
			"  - fences the lost nodes (<data-dir>/fenced-nodes): this node refuses their raft requests,\n" +
			"    so that one started again on its old data stops instead of disturbing the cluster;\n" +
			"  - recovers the metadata group to its surviving members, if its surviving voters are a minority;\n" +
			"  - makes this node's replica of a bucket the bucket's only voter, where it is the one surviving\n" +
			"    voter of a bucket whose voters were mostly lost, and sets aside a non-voting copy beside it;\n" +
			"    where two or more voters survive and are a minority (four replicas or more), only with\n" +
			"    --positions: the dry-run reports of every survivor, of which the most up-to-date copy wins.\n" +
			"What only the lost nodes held is gone. The lost nodes must never start again with their data\n" +
			"directories: give their machines empty ones and join them as new nodes. The cluster replaces\n" +
			"the lost nodes' replicas on the live nodes at once (fenced, they have no grace to wait out).\n" +
			"See docs/OPERATIONS.md, \"A majority of nodes died for good\".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(lost) == 0 {
				return errors.New("recover: --lost names the nodes lost for good (e.g. --lost 2,3)")
			}
			cfg := node.Default()
			if config != "" {
				if err := node.LoadFile(config, &cfg); err != nil {
					return err
				}
			}
			if dataDir != "" {
				cfg.DataDir = dataDir
			}
			ids := make([]raftmeta.NodeID, 0, len(lost))
			for _, id := range lost {
				if id <= 0 {
					return errors.New("recover: node ids are positive")
				}
				ids = append(ids, raftmeta.NodeID(id))
			}
			o := node.RecoverOptions{Lost: ids, DryRun: dryRun}
			if positions != "" {
				f, err := os.Open(positions)
				if err != nil {
					return fmt.Errorf("recover: %w", err)
				}
				defer f.Close()
				o.Positions = f
			}
			return node.Recover(cfg, o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&config, "config", "", "the node's TOML config file (for its data_dir)")
	fl.StringVar(&dataDir, "data-dir", "", "the node's data directory (default: the config's, else ./fluss-data)")
	fl.Int32SliceVar(&lost, "lost", nil, "ids of the nodes lost for good (repeat or comma-separate)")
	fl.BoolVar(&dryRun, "dry-run", false, "report what would be done, change nothing")
	fl.StringVar(&positions, "positions", "", "`FILE` holding every surviving node's report (their --dry-run output): a bucket with two or more surviving voters, a minority, is then recovered on the most up-to-date one")
	return cmd
}
