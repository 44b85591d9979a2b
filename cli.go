package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// serverAddr and token are the --server and --token flags of every
// client command.
var serverAddr, token string

// addClientCommands registers the commands that talk to a running node.
func addClientCommands(root *cobra.Command) {
	def := os.Getenv("FLUSS_SERVER")
	if def == "" {
		def = "127.0.0.1:9123"
	}
	root.PersistentFlags().StringVar(&serverAddr, "server", def, "address of any node's client API, or several separated by commas, tried in turn (or $FLUSS_SERVER)")
	// Not defaulted from $FLUSS_TOKEN: the help would print the secret.
	root.PersistentFlags().StringVar(&token, "token", "", "bearer token for a server with [auth] users (default $FLUSS_TOKEN)")
	root.AddCommand(dbCmd(), tableCmd(), appendCmd(), scanCmd(), clusterCmd(), benchCmd(), upsertCmd(), deleteCmd(), lookupCmd(), prefixLookupCmd(), limitScanCmd(), partitionCmd())
}

// newClient connects to --server (to one of its addresses, see client.New).
func newClient() *client.Client {
	return client.New(baseURL(), client.WithToken(clientToken()))
}

// clientToken is --token, or $FLUSS_TOKEN.
func clientToken() string {
	if token != "" {
		return token
	}
	return os.Getenv("FLUSS_TOKEN")
}

// cmdContext is cancelled by SIGINT/SIGTERM.
func cmdContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}

func dbCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "db", Short: "Create, drop and list databases"}
	var comment string
	var ifNotExists, ifExists, cascade bool
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a database", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			_, err := newClient().Admin().CreateDatabase(ctx, connect.NewRequest(&flussv1.CreateDatabaseRequest{
				Name: args[0], Comment: comment, IgnoreIfExists: ifNotExists}))
			return reportDDL(cmd, err, ifNotExists, "created database "+args[0], "database "+args[0]+" exists")
		},
	}
	create.Flags().StringVar(&comment, "comment", "", "database comment")
	create.Flags().BoolVar(&ifNotExists, "if-not-exists", false, "succeed if the database exists")
	drop := &cobra.Command{
		Use: "drop NAME", Short: "Drop a database", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			err := newClient().DropDatabase(ctx, args[0], ifExists, cascade)
			return reportDDL(cmd, err, ifExists, "dropped database "+args[0], "database "+args[0]+" does not exist")
		},
	}
	drop.Flags().BoolVar(&ifExists, "if-exists", false, "succeed if the database does not exist")
	drop.Flags().BoolVar(&cascade, "cascade", false, "drop the database's tables too")
	list := &cobra.Command{
		Use: "list", Short: "List databases", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			dbs, err := newClient().ListDatabases(ctx)
			for _, d := range dbs {
				fmt.Fprintln(cmd.OutOrStdout(), d)
			}
			return err
		},
	}
	cmd.AddCommand(create, drop, list)
	return cmd
}

// reportDDL prints what a successful create or drop did. With
// --if-not-exists or --if-exists the server does not say whether it acted, so
// the line states only what holds now.
func reportDDL(cmd *cobra.Command, err error, conditional bool, did, holds string) error {
	if err != nil {
		return err
	}
	if conditional {
		fmt.Fprintln(cmd.OutOrStdout(), holds)
	} else {
		fmt.Fprintln(cmd.OutOrStdout(), did)
	}
	return nil
}

func tableCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "table", Short: "Create, describe, alter, drop and list tables"}
	var (
		schema, primaryKey, partitionBy, bucketKey, comment string
		buckets                                             int32
		props                                               []string
		ifNotExists, ifExists                               bool
	)
	create := &cobra.Command{
		Use:   "create DB.TABLE",
		Short: "Create a table",
		Example: `  fluss-node table create shop.orders --schema "id BIGINT NOT NULL, amount DECIMAL(10,2), ts TIMESTAMP(3)" --buckets 4
  fluss-node table create shop.users --schema "id BIGINT NOT NULL, name STRING" --primary-key id
  fluss-node table create shop.carts --schema "user_id BIGINT NOT NULL, item STRING NOT NULL, qty INT, PRIMARY KEY (user_id, item)"
  fluss-node table create shop.views --schema "id BIGINT NOT NULL, country STRING DICTIONARY"
  fluss-node table create shop.events --schema "id BIGINT, dt STRING NOT NULL" --partition-by dt \
      --set table.auto-partition.enabled=true --set table.auto-partition.time-unit=DAY`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cols, pk, err := parseSchemaFlag(schema)
			if err != nil {
				return fmt.Errorf("--schema: %w", err)
			}
			switch {
			case pk != nil && primaryKey != "":
				return fmt.Errorf("the primary key is given twice: in --schema and with --primary-key")
			case pk == nil:
				pk = splitList(primaryKey)
			}
			if buckets < 0 || cmd.Flags().Changed("buckets") && buckets == 0 {
				return fmt.Errorf("--buckets %d: a table has at least 1 bucket", buckets)
			}
			req := &flussv1.CreateTableRequest{
				Table:          args[0],
				Schema:         &flussv1.Schema{Columns: cols, PrimaryKey: pk},
				PartitionKeys:  splitList(partitionBy),
				BucketKeys:     splitList(bucketKey),
				BucketCount:    buckets,
				Properties:     map[string]string{},
				Comment:        comment,
				IgnoreIfExists: ifNotExists,
			}
			if req.Properties, err = parseSetFlags(props); err != nil {
				return err
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			id, err := newClient().CreateTable(ctx, req)
			return reportDDL(cmd, err, ifNotExists,
				fmt.Sprintf("created %s (table id %d)", args[0], id),
				fmt.Sprintf("table %s exists (table id %d)", args[0], id))
		},
	}
	f := create.Flags()
	f.StringVar(&schema, "schema", "", `columns, e.g. "id BIGINT NOT NULL, name STRING" (required); a STRING or BYTES column may end in DICTIONARY to be stored dictionary-encoded; may include "PRIMARY KEY (id)" instead of --primary-key`)
	f.StringVar(&primaryKey, "primary-key", "", "primary key columns, comma-separated (makes a primary-key table)")
	f.StringVar(&partitionBy, "partition-by", "", "partition key columns, comma-separated (STRING, INT, BIGINT or DATE; a write creates the partitions its rows name)")
	f.StringVar(&bucketKey, "bucket-key", "", "bucket key columns, comma-separated")
	f.Int32Var(&buckets, "buckets", 0, "number of buckets (default 1)")
	f.StringArrayVar(&props, "set", nil, "table property key=value (repeatable), e.g. table.log.ttl=24h")
	f.StringVar(&comment, "comment", "", "table comment")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "succeed if the table exists")
	create.MarkFlagRequired("schema")

	list := &cobra.Command{
		Use: "list DB", Short: "List the tables of a database", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			tables, err := newClient().ListTables(ctx, args[0])
			for _, t := range tables {
				fmt.Fprintln(cmd.OutOrStdout(), t)
			}
			return err
		},
	}
	describe := &cobra.Command{
		Use: "describe DB.TABLE", Short: "Show a table's schema, properties and buckets (leader, replicas, in-sync replicas)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			c := newClient()
			t, err := c.GetTable(ctx, args[0])
			if err != nil {
				return err
			}
			layout, err := c.GetTableLayoutInSync(ctx, args[0])
			if err != nil {
				return err
			}
			printTable(cmd.OutOrStdout(), args[0], t, layout)
			return nil
		},
	}
	drop := &cobra.Command{
		Use: "drop DB.TABLE", Short: "Drop a table and its data", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			err := newClient().DropTable(ctx, args[0], ifExists)
			return reportDDL(cmd, err, ifExists, "dropped table "+args[0], "table "+args[0]+" does not exist")
		},
	}
	drop.Flags().BoolVar(&ifExists, "if-exists", false, "succeed if the table does not exist")
	var (
		addColumns string
		setProps   []string
		resetProps []string
	)
	alter := &cobra.Command{
		Use:   "alter DB.TABLE",
		Short: "Add nullable columns to a table (a new schema version; earlier rows read them as null), or change table properties",
		Example: `  fluss-node table alter shop.orders --add-columns "note STRING, discount DECIMAL(10,2)"
  fluss-node table alter shop.orders --set table.log.ttl=3d --reset table.log.arrow.compression.type`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if addColumns == "" && len(setProps) == 0 && len(resetProps) == 0 {
				return errors.New("nothing to alter: give --add-columns, --set or --reset")
			}
			var cols []*flussv1.Column
			if addColumns != "" {
				var pk []string
				var err error
				cols, pk, err = parseSchemaFlag(addColumns)
				if err == nil && pk != nil {
					err = errors.New("PRIMARY KEY: a primary key is set when the table is created, not altered")
				}
				if err != nil {
					return fmt.Errorf("--add-columns: %w", err)
				}
			}
			set, err := parseSetFlags(setProps)
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			res, err := newClient().AlterTable(ctx, &flussv1.AlterTableRequest{
				Table: args[0], AddColumns: cols, SetProperties: set, ResetProperties: resetProps,
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "altered %s (schema %d)\n", args[0], res.GetSchemaId())
			return nil
		},
	}
	alter.Flags().StringVar(&addColumns, "add-columns", "", `columns to append, e.g. "note STRING, score DOUBLE" (each nullable)`)
	alter.Flags().StringArrayVar(&setProps, "set", nil, "table property key=value to set (repeatable), e.g. table.log.ttl=3d; only properties that may change after creation (table.log.ttl, table.log.tiered.local-segments, compression of a log table, table.datalake.enabled (on) and freshness, table.auto-partition.num-precreate and num-retention, table.replication.factor, keys outside table.* and fields.*)")
	alter.Flags().StringArrayVar(&resetProps, "reset", nil, "table property to remove, back to its default (repeatable)")
	cmd.AddCommand(create, list, describe, alter, drop)
	return cmd
}

// parseSetFlags turns repeated --set key=value flags into a map.
func parseSetFlags(flags []string) (map[string]string, error) {
	out := make(map[string]string, len(flags))
	for _, p := range flags {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("--set %q: want key=value", p)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

func printTable(w io.Writer, name string, t *flussv1.GetTableResponse, layout []*flussv1.BucketLayout) {
	fmt.Fprintf(w, "table %s (id %d, schema %d)\n", name, t.TableId, t.SchemaId)
	if t.Comment != "" {
		fmt.Fprintf(w, "comment: %s\n", t.Comment)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COLUMN\tTYPE\tNULL\tCOMMENT")
	for _, c := range t.Schema.GetColumns() {
		null := "NULL"
		if !c.GetNullable() {
			null = "NOT NULL"
		}
		typ := c.Type
		if c.GetDictionary() {
			typ += " DICTIONARY"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, typ, null, c.Comment)
	}
	tw.Flush()
	if pk := t.Schema.GetPrimaryKey(); len(pk) > 0 {
		fmt.Fprintf(w, "primary key: %s\n", strings.Join(pk, ", "))
	}
	if len(t.PartitionKeys) > 0 {
		fmt.Fprintf(w, "partitioned by: %s\n", strings.Join(t.PartitionKeys, ", "))
	}
	fmt.Fprintf(w, "buckets: %d", t.BucketCount)
	if len(t.BucketKeys) > 0 {
		fmt.Fprintf(w, " by %s", strings.Join(t.BucketKeys, ", "))
	}
	fmt.Fprintln(w)
	keys := make([]string, 0, len(t.Properties))
	for k := range t.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		fmt.Fprintln(w, "properties:")
	}
	for _, k := range keys {
		fmt.Fprintf(w, "  %s = %s\n", k, t.Properties[k])
	}
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tBUCKET\tLEADER\tREPLICAS\tIN SYNC")
	for _, b := range layout {
		part := b.Partition
		if part == "" {
			part = "-"
		}
		inSync := "?" // no leader, or it did not answer
		if len(b.InSyncReplicas) > 0 {
			inSync = fmt.Sprint(b.InSyncReplicas)
			if len(b.InSyncReplicas) < len(b.Replicas) {
				inSync += " under-replicated"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%s\n", part, b.Bucket, b.Leader, b.Replicas, inSync)
	}
	tw.Flush()
}

func appendCmd() *cobra.Command {
	var rowFlags []string
	var batch int
	cmd := &cobra.Command{
		Use:   "append DB.TABLE",
		Short: "Append rows to a log table: NDJSON on stdin, or --row",
		Example: `  echo '{"id": 1, "name": "a"}' | fluss-node append shop.events
  fluss-node append shop.events --row '{"id": 2, "name": "b"}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			c := newClient()
			var total int64
			err := flagOrStdin(cmd, "row", rowFlags, batch, func(rows [][]byte) error {
				if len(rows) == 0 {
					return nil
				}
				res, err := c.Append(ctx, args[0], client.JSONArray(rows))
				for _, r := range res {
					total += int64(r.Count)
				}
				return err
			})
			fmt.Fprintf(cmd.ErrOrStderr(), "appended %s\n", plural(total, "row"))
			return err
		},
	}
	cmd.Flags().StringArrayVar(&rowFlags, "row", nil, "a row as a JSON object (repeatable); stdin is not read then")
	cmd.Flags().IntVar(&batch, "batch", 1000, "rows per request")
	return cmd
}

// maxNDJSONLine is the longest stdin line readNDJSON takes: one row, which
// must fit in one batch (limits.max_batch_bytes, 16 MiB by default).
const maxNDJSONLine = 16 << 20

// readNDJSON calls send with up to batch non-empty lines at a time. A UTF-8
// byte order mark before the first line (as some editors write) is skipped.
func readNDJSON(r io.Reader, batch int, send func([][]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxNDJSONLine)
	var rows [][]byte
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		if !json.Valid(b) {
			return fmt.Errorf("stdin line %d is not valid JSON", line)
		}
		rows = append(rows, append([]byte(nil), b...))
		if len(rows) >= batch {
			if err := send(rows); err != nil {
				return err
			}
			rows = rows[:0]
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("stdin line %d is longer than %d MiB: one row must fit in one batch (the server's limits.max_batch_bytes, 16 MiB by default)", line+1, maxNDJSONLine>>20)
		}
		return fmt.Errorf("read stdin: %w", err)
	}
	return send(rows)
}

// parseFrom parses scan's --from: earliest, latest, ts:MILLIS (epoch
// milliseconds), ts:TIME (RFC 3339, with its zone: 2026-12-06T16:00:00Z)
// or ago:DURATION (that long before now: ago:15m).
func parseFrom(from string) (flussv1.ScanRequest_From, int64, error) {
	return parseFromAt(from, time.Now())
}

func parseFromAt(from string, now time.Time) (flussv1.ScanRequest_From, int64, error) {
	switch f := strings.ToLower(from); {
	case f == "earliest":
		return flussv1.ScanRequest_EARLIEST, 0, nil
	case f == "latest":
		return flussv1.ScanRequest_LATEST, 0, nil
	case strings.HasPrefix(f, "ts:"):
		v := from[len("ts:"):]
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			return flussv1.ScanRequest_TIMESTAMP, ms, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return flussv1.ScanRequest_TIMESTAMP, t.UnixMilli(), nil
		}
	case strings.HasPrefix(f, "ago:"):
		if d, err := time.ParseDuration(f[len("ago:"):]); err == nil && d >= 0 {
			return flussv1.ScanRequest_TIMESTAMP, now.Add(-d).UnixMilli(), nil
		}
	}
	return 0, 0, fmt.Errorf("--from %q: want earliest, latest, ts:MILLIS (epoch milliseconds), ts:TIME (RFC 3339 with a zone, e.g. ts:2026-12-06T16:00:00Z) or ago:DURATION (e.g. ago:15m)", from)
}

func scanCmd() *cobra.Command {
	var from, columns, where, partition string
	var limit int64
	var follow bool
	cmd := &cobra.Command{
		Use:   "scan DB.TABLE",
		Short: "Read a table's rows as NDJSON on stdout",
		Example: `  fluss-node scan shop.orders --columns id,amount --where "amount > 100" --limit 10
  fluss-node scan shop.orders --from latest --follow`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit %d: want a number of rows (0: no limit)", limit)
			}
			req := &flussv1.ScanRequest{Table: args[0], Columns: splitList(columns), Filter: where, Follow: follow, Partition: partition}
			var err error
			if req.From, req.TimestampMs, err = parseFrom(from); err != nil {
				return err
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			var n int64
			err = newClient().Scan(ctx, req, func(r *flussv1.ScanResponse) error {
				var rows []json.RawMessage
				if len(r.Rows) > 0 {
					if err := json.Unmarshal(r.Rows, &rows); err != nil {
						return fmt.Errorf("bad rows from server: %w", err)
					}
				}
				for _, row := range rows {
					if limit > 0 && n >= limit {
						return client.ErrStop
					}
					out.Write(row)
					out.WriteByte('\n')
					n++
				}
				if follow {
					out.Flush()
				}
				if limit > 0 && n >= limit {
					return client.ErrStop
				}
				return nil
			})
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "earliest", "where to start: earliest, latest, ts:MILLIS, ts:TIME (RFC 3339, e.g. ts:2026-12-06T16:00:00Z) or ago:DURATION (e.g. ago:15m)")
	f.StringVar(&columns, "columns", "", "columns to read, comma-separated (default all)")
	f.StringVar(&where, "where", "", `filter in SQL: comparisons, [NOT] IN, [NOT] BETWEEN, [NOT] [I]LIKE, IS [NOT] NULL, AND/OR/NOT, e.g. "amount > 100 AND city IN ('a','b') AND name LIKE 'an%'" (README: Filters)`)
	f.Int64Var(&limit, "limit", 0, "stop after this many rows (0: no limit)")
	f.BoolVar(&follow, "follow", false, "keep reading new rows until interrupted")
	f.StringVar(&partition, "partition", "", "read only this partition of a partitioned table (default all; following, also the partitions created meanwhile)")
	return cmd
}

func clusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect and operate the cluster: status, drain, undrain, decommission, rebalance, config"}
	status := &cobra.Command{
		Use: "status", Short: "Show nodes, roles, replicas, leaders and replication health", Args: cobra.NoArgs,
		Long: `Show every node: its state, metadata role, bucket replicas and leaders,
the buckets it leads that are under-replicated (fewer replicas in sync with
it than assigned; raft.replica_max_lag) and the replicas assigned to it
that it has not open (OFFLINE: failing to open, see its log, or opening).
"?" where a node did not answer. The last line sums them, and counts the
buckets no replica leads among the nodes that answered (an election, or a
bucket that lost the majority of its replicas: see fluss-node recover).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			c, err := newClient().DescribeCluster(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "cluster %s, metadata leader: node %d, meta_voters: %d, dead_node_grace: %v, default_log_ttl: %v, lake_snapshot_retention: %v\n",
				c.ClusterId, c.MetaLeader, c.MetaVoters, time.Duration(c.DeadNodeGraceMs)*time.Millisecond, time.Duration(c.DefaultLogTtlMs)*time.Millisecond,
				time.Duration(c.LakeSnapshotRetentionMs)*time.Millisecond)
			tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tSTATE\tMETA\tREPLICAS\tLEADERS\tUNDER-REPLICATED\tOFFLINE\tCLIENT\tPEER\tVERSION")
			var under, offline int32
			var silent []int32
			for _, n := range c.Nodes {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", n.Id, n.State, n.MetaRole, n.Replicas, n.Leaders,
					optCount(n.UnderReplicated), optCount(n.OfflineReplicas), n.ClientAddr, n.PeerAddr, n.Version)
				if n.UnderReplicated == nil {
					silent = append(silent, n.Id)
				}
				under += n.GetUnderReplicated()
				offline += n.GetOfflineReplicas()
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(w, "replication: %d under-replicated bucket(s), %d offline replica(s), %d bucket(s) without a leader", under, offline, c.LeaderlessBuckets)
			if c.LostBuckets > 0 {
				fmt.Fprintf(w, ", %d of them lost every replica (see `fluss-node cluster restore-bucket`)", c.LostBuckets)
			}
			if len(silent) > 0 {
				fmt.Fprintf(w, "; not reported by node(s) %v", silent)
			}
			fmt.Fprintln(w)
			return nil
		},
	}
	cmd.AddCommand(append([]*cobra.Command{status}, clusterOpsCmds()...)...)
	return cmd
}

// optCount renders a count a node may not have reported ("?").
func optCount(n *int32) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprint(*n)
}

// plural renders n things: "1 row", "2 rows".
func plural(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// splitList splits a comma-separated flag value; "" is nil.
func splitList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}
