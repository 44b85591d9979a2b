package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluss-node/fluss-node/rpc/client/bench"
)

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure throughput and latency of a running server (prints a table)"}
	var cpuProfile string
	var stopProfile func() error
	cmd.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this load generator (not the server) to `FILE` (go tool pprof)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) (err error) {
		stopProfile, err = startCPUProfile(cpuProfile)
		return err
	}
	cmd.PersistentPostRunE = func(*cobra.Command, []string) error { return stopProfile() }
	var p bench.ProduceConfig
	produce := &cobra.Command{
		Use:   "produce",
		Short: "Append sample rows from concurrent clients for a while",
		Example: `  fluss-node bench produce --format arrow --batch 2000 --clients 8 --buckets 16
  fluss-node bench produce --format json --batch 1 --clients 64 --buckets 16
  fluss-node bench produce --format json --batch 1 --clients 64 --buckets 16 --appender`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.Server, p.Token = baseURL(), clientToken()
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			r, err := bench.Produce(ctx, p)
			if err != nil {
				return err
			}
			bench.PrintProduce(cmd.OutOrStdout(), p, r)
			return nil
		},
	}
	f := produce.Flags()
	f.StringVar(&p.Table, "table", "bench.produce", "table to (re)create and fill")
	f.IntVar(&p.Buckets, "buckets", 16, "buckets of the table")
	f.IntVar(&p.Clients, "clients", 8, "concurrent clients")
	f.IntVar(&p.BatchRows, "batch", 1000, "rows per request")
	f.StringVar(&p.Format, "format", "arrow", "arrow (client-compressed) or json")
	f.StringVar(&p.Compression, "compression", "zstd", "arrow buffer compression: zstd, lz4 or none")
	f.DurationVar(&p.Duration, "duration", 10*time.Second, "how long to send")
	f.BoolVar(&p.Wide, "wide", false, "20 columns instead of 10")
	f.BoolVar(&p.Dictionary, "dictionary", false, "store the low-cardinality strings (event_type, country) dictionary-encoded")
	f.StringVar(&p.Spread, "spread", "turn", "how requests choose buckets: turn (request i of client w to bucket (w + i·clients) mod buckets: evenly spread, each client on one bucket when clients is a multiple of buckets) or random (as rows of a table bucketed by a key)")
	f.BoolVar(&p.Direct, "direct", true, "send each request straight to its bucket's leader (the Go client's routing); --direct=false sends all to --server, which forwards")
	f.StringVar(&p.Protocol, "protocol", "proto", "proto (Connect over HTTP/1.1), grpc (gRPC over shared h2c connections), h2c (Connect proto over shared h2c connections) or json (Connect JSON)")
	f.BoolVar(&p.Appender, "appender", false, "with --format json --batch 1: the clients are goroutines appending single rows through one shared batching client (client.Appender), as an application using Fluss's append writer does")
	f.IntVar(&p.Inflight, "appender-inflight", 0, "with --appender: requests the shared client keeps out at once (0: the Appender's default, 1)")
	f.DurationVar(&p.Linger, "appender-linger", 0, "with --appender: how long the shared client waits, after a request, for its goroutines' next rows (0: the Appender's default, 1ms; negative: no wait)")

	var fc bench.FetchConfig
	var columns string
	fetch := &cobra.Command{
		Use:   "fetch",
		Short: "Load a 20-column table, then compare a full fetch with a projected one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc.Server, fc.Token = baseURL(), clientToken()
			fc.Columns = splitList(columns)
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			r, err := bench.Fetch(ctx, fc)
			if err != nil {
				return err
			}
			bench.PrintFetch(cmd.OutOrStdout(), fc, r)
			return nil
		},
	}
	f = fetch.Flags()
	f.StringVar(&fc.Table, "table", "bench.fetch", "table to (re)create and fill")
	f.IntVar(&fc.Buckets, "buckets", 4, "buckets of the table")
	f.IntVar(&fc.Rows, "rows", 1_000_000, "rows to load")
	f.StringVar(&columns, "columns", "user_id,amount", "columns of the projected read")
	f.StringVar(&fc.Format, "format", "arrow", "arrow or json")
	f.BoolVar(&fc.Dictionary, "dictionary", false, "store the low-cardinality strings (event_type, country) dictionary-encoded")
	cmd.AddCommand(produce, fetch, benchUpsertCmd(), benchLookupCmd())
	return cmd
}

// startCPUProfile starts a CPU profile into path (none when path is empty)
// and returns the function that stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// baseURL is --server as a URL (or a comma-separated list; client.New
// takes either).
func baseURL() string {
	if strings.Contains(serverAddr, "://") {
		return serverAddr
	}
	return fmt.Sprintf("http://%s", serverAddr)
}
