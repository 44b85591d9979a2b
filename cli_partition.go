package main

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// partitionCmd manages the partitions of a partitioned table. Writes
// create the partitions their rows name; these commands create them ahead
// of time, drop them with their data, and list them.
func partitionCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "partition", Short: "Create, drop and list the partitions of a partitioned table"}
	var ifNotExists, ifExists bool
	create := &cobra.Command{
		Use:     "create DB.TABLE KEY=VALUE...",
		Short:   "Create a partition: one value per partition key",
		Example: `  fluss-node partition create shop.events dt=2026-12-03`,
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := partitionValues(args[1:])
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			p, err := newClient().CreatePartition(ctx, args[0], values, ifNotExists)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "partition %s of %s (id %d)\n", p.GetName(), args[0], p.GetId())
			return nil
		},
	}
	create.Flags().BoolVar(&ifNotExists, "if-not-exists", false, "succeed if the partition exists")
	drop := &cobra.Command{
		Use:     "drop DB.TABLE KEY=VALUE...",
		Short:   "Drop a partition and its data",
		Example: `  fluss-node partition drop shop.events dt=2026-11-01`,
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := partitionValues(args[1:])
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			err = newClient().DropPartition(ctx, args[0], values, ifExists)
			name := strings.Join(args[1:], ",") + " of " + args[0]
			return reportDDL(cmd, err, ifExists, "dropped partition "+name, "partition "+name+" does not exist")
		},
	}
	drop.Flags().BoolVar(&ifExists, "if-exists", false, "succeed if the partition does not exist")
	list := &cobra.Command{
		Use:     "list DB.TABLE [KEY=VALUE...]",
		Short:   "List a table's partitions (those with the given values)",
		Example: `  fluss-node partition list shop.events`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := partitionValues(args[1:])
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			ps, err := newClient().ListPartitions(ctx, args[0], values)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PARTITION\tID\tVALUES")
			for _, p := range ps {
				keys := make([]string, 0, len(p.GetValues()))
				for k := range p.GetValues() {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for i, k := range keys {
					keys[i] = k + "=" + p.GetValues()[k]
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\n", p.GetName(), p.GetId(), strings.Join(keys, " "))
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(create, drop, list)
	return cmd
}

// partitionValues parses KEY=VALUE arguments.
func partitionValues(args []string) (map[string]string, error) {
	out := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want KEY=VALUE (a partition key and its value)", a)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%q: partition key %s given twice", a, k)
		}
		out[k] = v
	}
	return out, nil
}
