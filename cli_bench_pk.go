package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluss-node/fluss-node/rpc/client/bench"
)

// parseClients parses --clients: one number or a comma-separated list
// ("1,16,64"), one run per entry.
func parseClients(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--clients %q: want positive numbers, e.g. 1,16,64", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--clients %q: want positive numbers, e.g. 1,16,64", s)
	}
	return out, nil
}

// runPKBench runs one primary-key benchmark (bench.Upsert or bench.Lookup)
// and prints the runs it finished, also when it stopped on an error.
func runPKBench(cmd *cobra.Command, cfg *bench.PKConfig, clients, what string, run func(context.Context, bench.PKConfig) ([]bench.PKRun, error)) error {
	var err error
	if cfg.Clients, err = parseClients(clients); err != nil {
		return err
	}
	cfg.Server, cfg.Token = baseURL(), clientToken()
	ctx, cancel := cmdContext(cmd)
	defer cancel()
	runs, err := run(ctx, *cfg)
	if len(runs) > 0 {
		bench.PrintPK(cmd.OutOrStdout(), what, *cfg, runs)
	}
	return err
}

// pkBenchFlags registers the flags upsert and lookup share.
func pkBenchFlags(cmd *cobra.Command, c *bench.PKConfig, clients *string, table string, defaultClients string) {
	f := cmd.Flags()
	f.StringVar(&c.Table, "table", table, "primary-key table to (re)create and fill")
	f.IntVar(&c.Buckets, "buckets", 16, "buckets of the table")
	f.StringVar(clients, "clients", defaultClients, "concurrent clients: one number, or a list (one run each), e.g. 1,16,64")
	f.IntVar(&c.Keys, "keys", 100_000, "distinct primary keys")
	f.DurationVar(&c.Duration, "duration", 10*time.Second, "how long each run sends")
	f.StringVar(&c.Protocol, "protocol", "proto", "proto (Connect over HTTP/1.1), grpc or h2c (over shared h2c connections) or json (Connect JSON)")
}

func benchUpsertCmd() *cobra.Command {
	var cfg bench.PKConfig
	var clients string
	cmd := &cobra.Command{
		Use:   "upsert",
		Short: "Upsert rows of random keys into a 10-column primary-key table from concurrent clients",
		Example: `  fluss-node bench upsert --clients 1,16,64 --batch 1
  fluss-node bench upsert --clients 8 --batch 500 --keys 1000000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPKBench(cmd, &cfg, clients, "upsert", bench.Upsert)
		},
	}
	pkBenchFlags(cmd, &cfg, &clients, "bench.upsert", "1,16,64")
	cmd.Flags().IntVar(&cfg.BatchRows, "batch", 1, "rows per request")
	return cmd
}

func benchLookupCmd() *cobra.Command {
	var cfg bench.PKConfig
	var clients string
	cmd := &cobra.Command{
		Use:   "lookup",
		Short: "Load keys into a primary-key table, then do 1-key lookups of random keys from concurrent clients",
		Example: `  fluss-node bench lookup --keys 100000 --clients 1,16,64
  fluss-node bench lookup --clients 16 --redis 127.0.0.1:6379   # the same GETs against redis-server
  fluss-node bench lookup --clients 16 --batched                # also through one batching client`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPKBench(cmd, &cfg, clients, "lookup", bench.Lookup)
		},
	}
	pkBenchFlags(cmd, &cfg, &clients, "bench.lookup", "1,16,64")
	cmd.Flags().StringVar(&cfg.Redis, "redis", "", "host:port of a redis-server: load the same rows (SET id row) and run the same clients doing GET")
	cmd.Flags().BoolVar(&cfg.Batched, "batched", false, "also run each client count as goroutines sharing one client that batches the lookups meeting in flight (client.Lookuper)")
	cmd.Flags().IntVar(&cfg.BatchedInflight, "batched-inflight", 0, "with --batched: requests the shared client keeps out at once (0: the Lookuper's default, 2)")
	cmd.Flags().DurationVar(&cfg.BatchedLinger, "batched-linger", 0, "with --batched: how long the shared client waits, after a request, for its goroutines' next lookups (0: the Lookuper's default, 1ms; negative: no wait)")
	return cmd
}
