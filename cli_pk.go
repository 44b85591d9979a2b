package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// The primary-key table commands: upsert, delete, lookup, prefix-lookup
// and limit-scan. Rows and keys come as NDJSON on stdin or as repeatable
// flags; results go to stdout as NDJSON, counts to stderr.

// flagOrStdin calls send with the flag values as one batch when there are
// any, else with the NDJSON lines of stdin in batches of batch.
func flagOrStdin(cmd *cobra.Command, flag string, values []string, batch int, send func([][]byte) error) error {
	if batch <= 0 {
		return fmt.Errorf("--batch %d: want a positive number", batch)
	}
	if len(values) == 0 {
		return readNDJSON(cmd.InOrStdin(), batch, send)
	}
	rows := make([][]byte, len(values))
	for i, v := range values {
		b := bytes.TrimSpace([]byte(v))
		if !json.Valid(b) {
			return fmt.Errorf("--%s %q is not valid JSON", flag, v)
		}
		rows[i] = b
	}
	return send(rows)
}

// writeNDJSON writes the elements of a JSON array one per line (compacted).
func writeNDJSON(w *bufio.Writer, array []byte) (int, error) {
	var items []json.RawMessage
	if len(bytes.TrimSpace(array)) > 0 {
		if err := json.Unmarshal(array, &items); err != nil {
			return 0, fmt.Errorf("bad rows from server: %w", err)
		}
	}
	var buf bytes.Buffer
	for _, it := range items {
		buf.Reset()
		if err := json.Compact(&buf, it); err != nil {
			return 0, fmt.Errorf("bad row from server: %w", err)
		}
		buf.WriteByte('\n')
		if _, err := w.Write(buf.Bytes()); err != nil {
			return 0, err
		}
	}
	return len(items), nil
}

func upsertCmd() *cobra.Command {
	var rowFlags []string
	var columns string
	var batch int
	cmd := &cobra.Command{
		Use:   "upsert DB.TABLE",
		Short: "Insert or update rows of a primary-key table: NDJSON on stdin, or --row",
		Example: `  echo '{"id": 1, "name": "a"}' | fluss-node upsert shop.users
  fluss-node upsert shop.users --row '{"id": 1, "name": "b"}'
  fluss-node upsert shop.users --columns id,name --row '{"id": 1, "name": "c"}'   # partial update`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			c := newClient()
			target := splitList(columns)
			var total int64
			err := flagOrStdin(cmd, "row", rowFlags, batch, func(rows [][]byte) error {
				if len(rows) == 0 {
					return nil
				}
				res, err := c.Upsert(ctx, args[0], client.JSONArray(rows), target)
				for _, r := range res {
					total += int64(r.Count)
				}
				return err
			})
			fmt.Fprintf(cmd.ErrOrStderr(), "upserted %s\n", plural(total, "row"))
			return err
		},
	}
	cmd.Flags().StringArrayVar(&rowFlags, "row", nil, "a row as a JSON object (repeatable); stdin is not read then")
	cmd.Flags().StringVar(&columns, "columns", "", "write only these columns, comma-separated, primary key included (partial update)")
	cmd.Flags().IntVar(&batch, "batch", 1000, "rows per request")
	return cmd
}

func deleteCmd() *cobra.Command {
	var keyFlags []string
	var batch int
	cmd := &cobra.Command{
		Use:   "delete DB.TABLE",
		Short: "Delete rows of a primary-key table by key: NDJSON keys on stdin, or --key",
		Example: `  echo '{"id": 1}' | fluss-node delete shop.users
  fluss-node delete shop.users --key '{"id": 2}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			c := newClient()
			var sent, removed int64
			err := flagOrStdin(cmd, "key", keyFlags, batch, func(keys [][]byte) error {
				if len(keys) == 0 {
					return nil
				}
				res, err := c.Delete(ctx, args[0], client.JSONArray(keys))
				for _, r := range res {
					sent += int64(r.Count)
					removed += int64(r.ChangelogRecords)
				}
				return err
			})
			fmt.Fprintln(cmd.ErrOrStderr(), deletedLine(sent, removed))
			return err
		},
	}
	cmd.Flags().StringArrayVar(&keyFlags, "key", nil, `a primary key as a JSON object, e.g. '{"id":1}' (repeatable); stdin is not read then`)
	cmd.Flags().IntVar(&batch, "batch", 1000, "keys per request")
	return cmd
}

// deletedLine says what a delete did: of the keys sent, how many removed a
// row (the delete of an absent key, or on a table whose
// table.delete.behavior is ignore, changes nothing).
func deletedLine(sent, removed int64) string {
	if removed == sent {
		return "deleted " + plural(sent, "key")
	}
	return fmt.Sprintf("deleted %d of %s; %d removed nothing (absent, or the table ignores deletes)", removed, plural(sent, "key"), sent-removed)
}

func lookupCmd() *cobra.Command {
	return keyReadCmd(&cobra.Command{
		Use:   "lookup DB.TABLE",
		Short: "Read the current rows of primary keys as NDJSON, one line per key (null: no row)",
		Example: `  fluss-node lookup shop.users --key '{"id": 1}' --key '{"id": 2}'
  seq 1 100 | sed 's/.*/{"id": &}/' | fluss-node lookup shop.users --columns id,name`,
	}, `a primary key as a JSON object, e.g. '{"id":1}' (repeatable); stdin is not read then`, "keys per request", 1000,
		func(ctx context.Context, c *client.Client, table string, keys [][]byte, cols []string, out *bufio.Writer) error {
			rows, err := c.Lookup(ctx, table, client.JSONArray(keys), cols)
			if err != nil {
				return err
			}
			n, err := writeNDJSON(out, rows)
			if err == nil && n != len(keys) {
				err = fmt.Errorf("server answered %d rows for %d keys", n, len(keys))
			}
			return err
		})
}

func prefixLookupCmd() *cobra.Command {
	return keyReadCmd(&cobra.Command{
		Use:     "prefix-lookup DB.TABLE",
		Short:   "Read every row whose bucket key equals a prefix, as NDJSON (the bucket key must be a prefix of the primary key)",
		Example: `  fluss-node prefix-lookup shop.orders --key '{"user_id": 1}'`,
	}, `a bucket-key prefix as a JSON object, e.g. '{"user_id":1}' (repeatable); stdin is not read then`, "prefixes per request", 100,
		func(ctx context.Context, c *client.Client, table string, prefixes [][]byte, cols []string, out *bufio.Writer) error {
			res, err := c.PrefixLookup(ctx, table, client.JSONArray(prefixes), cols)
			if err != nil {
				return err
			}
			for _, r := range res {
				if _, err := writeNDJSON(out, r.Rows); err != nil {
					return err
				}
			}
			return nil
		})
}

// keyReadCmd completes cmd (Use, Short, Example set) into a command that
// reads JSON keys from repeated --key flags or NDJSON stdin, in requests of
// --batch keys, and runs read for each with the --columns projection,
// writing NDJSON to stdout.
func keyReadCmd(cmd *cobra.Command, keyHelp, batchHelp string, defaultBatch int,
	read func(ctx context.Context, c *client.Client, table string, keys [][]byte, cols []string, out *bufio.Writer) error) *cobra.Command {
	var keyFlags []string
	var columns string
	var batch int
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cancel := cmdContext(cmd)
		defer cancel()
		c := newClient()
		cols := splitList(columns)
		out := bufio.NewWriter(cmd.OutOrStdout())
		defer out.Flush()
		return flagOrStdin(cmd, "key", keyFlags, batch, func(keys [][]byte) error {
			if len(keys) == 0 {
				return nil
			}
			return read(ctx, c, args[0], keys, cols, out)
		})
	}
	cmd.Flags().StringArrayVar(&keyFlags, "key", nil, keyHelp)
	cmd.Flags().StringVar(&columns, "columns", "", "columns to return, comma-separated (default all)")
	cmd.Flags().IntVar(&batch, "batch", defaultBatch, batchHelp)
	return cmd
}

func limitScanCmd() *cobra.Command {
	var limit, bucket int32
	var partition string
	cmd := &cobra.Command{
		Use:   "limit-scan DB.TABLE",
		Short: "Print up to --limit rows as NDJSON: current values of a primary-key table, latest rows of a log table",
		Example: `  fluss-node limit-scan shop.users --limit 10
  fluss-node limit-scan shop.users --bucket 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit <= 0 {
				return fmt.Errorf("--limit %d: want a positive number of rows", limit)
			}
			ctx, cancel := cmdContext(cmd)
			defer cancel()
			var b *int32
			if bucket >= 0 {
				b = &bucket
			}
			rows, err := newClient().LimitScanRequest(ctx, &flussv1.LimitScanRequest{Table: args[0], Partition: partition, Bucket: b, Limit: limit})
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			if _, err := writeNDJSON(out, rows); err != nil {
				return err
			}
			return out.Flush()
		},
	}
	cmd.Flags().Int32Var(&limit, "limit", 100, "rows to return at most")
	cmd.Flags().Int32Var(&bucket, "bucket", -1, "read only this bucket (default every bucket)")
	cmd.Flags().StringVar(&partition, "partition", "", "the partition to read (required for a partitioned table)")
	return cmd
}
