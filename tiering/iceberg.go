package tiering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"
)

// Iceberg metadata of the lake (DESIGN §9). Every lake table is also an
// Apache Iceberg table (format version 2) of a Hadoop catalog whose
// warehouse is the lake directory: its metadata lives in
// <lake_dir>/<db>/<table>/metadata/ (vN.metadata.json, version-hint.text,
// Avro manifests), and its data files are the lake files themselves,
// registered where they are (nothing is copied). Each bucket leader, after
// its lake pass, commits the difference between its bucket's files and the
// files of the bucket the table's current snapshot holds: files written
// are added, files compaction replaced are removed. A removed file stays on
// disk while a snapshot kept refers to it (the caller deletes it later), so
// a query planned on a recent snapshot still finds its files.
//
// Lake files carry no Parquet field ids: the table's name mapping
// (schema.name-mapping.default) maps their columns by name. A table with a
// column of a type Iceberg v2 cannot read as stored has no Iceberg
// metadata (ErrIcebergType): TIME and TIMESTAMP of precision 7-9
// (nanoseconds: Iceberg v3), and TIME(0-3) in files written before lake
// files stored it as microseconds (lakeStoredField).

// IcebergTableIDProperty is the Iceberg table property naming the
// fluss-node table whose lake it describes.
const IcebergTableIDProperty = "fluss.table-id"

// IcebergLake keeps the Iceberg metadata of the lake tables under one
// lake directory on the local filesystem (or a mount every node shares).
type IcebergLake struct {
	root string
	cat  *hadoop.Catalog
}

// OpenIcebergLake opens the Hadoop catalog rooted at the lake directory.
func OpenIcebergLake(root string) (*IcebergLake, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: %w", err)
	}
	cat, err := hadoop.NewCatalog("lake", abs, iceberg.Properties{})
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: %w", err)
	}
	return &IcebergLake{root: abs, cat: cat}, nil
}

// IcebergTable is what the Iceberg metadata of a lake table is made from.
type IcebergTable struct {
	Database, Name string
	ID             int64
	// Columns are the lake file columns (before __offset and __timestamp)
	// of each schema version of the table, oldest first: schemas only grow.
	Columns       []*arrow.Schema
	PartitionKeys []string
	// SnapshotRetention is how long a snapshot that is no longer current
	// is kept (the current one always is), with the files only it holds.
	SnapshotRetention time.Duration
}

// IcebergSync reports what SyncBucket did.
type IcebergSync struct {
	Added, Removed int
	Committed      bool // a new snapshot (or schema) was committed
	Expired        bool // snapshots past the retention were expired
}

// icebergAttempts bounds the commits SyncBucket tries when another
// committer (another bucket's leader) got in first.
const icebergAttempts = 8

// errCommit marks a failed commit: the catalog refused it, most often
// because another commit changed the table since it was loaded (iceberg-go
// reports that as table.ErrCommitFailed or as a failed requirement).
var errCommit = errors.New("commit")

// SyncBucket makes the data files of the Iceberg table of t that lie in
// bucket directory dir exactly files (names in the lake store), creating
// the table, or adding columns to it, as needed. A commit that fails is
// worked out again on the table's new metadata and tried again, after a
// short random pause: its changes are the difference to the table as it
// is then, so a commit that went through is not repeated.
func (l *IcebergLake) SyncBucket(ctx context.Context, t IcebergTable, dir string, files []LakeFile) (IcebergSync, error) {
	for attempt := 1; ; attempt++ {
		res, err := l.syncBucket(ctx, t, dir, files)
		if err == nil || !errors.Is(err, errCommit) || attempt == icebergAttempts {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(time.Duration(attempt) * (10*time.Millisecond + rand.N(40*time.Millisecond))):
		}
	}
}

func (l *IcebergLake) syncBucket(ctx context.Context, t IcebergTable, dir string, files []LakeFile) (IcebergSync, error) {
	var res IcebergSync
	fields, err := icebergFields(t)
	if err != nil {
		return res, err
	}
	tbl, err := l.table(ctx, t, fields)
	if err != nil {
		return res, err
	}
	held, err := l.bucketFiles(ctx, tbl, dir)
	if err != nil {
		return res, err
	}
	tx := tbl.NewTransaction()
	changed, err := l.evolveSchema(tx, tbl, t, fields)
	if err != nil {
		return res, err
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return res, fmt.Errorf("tiering: iceberg: %w", err)
	}
	want := make(map[string]bool, len(files))
	var add []iceberg.DataFile
	for _, f := range files {
		want[f.Name] = true
		if _, ok := held[f.Name]; ok {
			continue
		}
		df, err := l.dataFile(staged.Table, f)
		if err != nil {
			return res, err
		}
		add = append(add, df)
	}
	var remove []iceberg.DataFile
	for name, df := range held {
		if !want[name] {
			remove = append(remove, df)
		}
	}
	props := iceberg.Properties{"fluss.bucket-dir": dir}
	switch {
	case len(remove) > 0:
		err = tx.ReplaceDataFilesWithDataFiles(ctx, remove, add, props)
	case len(add) > 0:
		err = tx.AddDataFiles(ctx, add, props)
	case !changed:
		return res, expire(ctx, tbl, t.SnapshotRetention, &res)
	}
	if err != nil {
		return res, fmt.Errorf("tiering: iceberg: table %s.%s: %w", t.Database, t.Name, err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("tiering: iceberg: %w to table %s.%s: %w", errCommit, t.Database, t.Name, err)
	}
	res.Added, res.Removed, res.Committed = len(add), len(remove), true
	return res, expire(ctx, tbl, t.SnapshotRetention, &res)
}

// table loads t's Iceberg table, or creates it. The metadata of an
// Iceberg table left by an older table of the same name (dropped) is set
// aside in that table's lake directory, <db>/<table>/<old id>/metadata,
// for the record (it names its manifests by their old paths, so it no
// longer reads as a table; the old table's Parquet files do), and a new
// one is created.
func (l *IcebergLake) table(ctx context.Context, t IcebergTable, fields []arrow.Field) (*table.Table, error) {
	ident := table.Identifier{t.Database, t.Name}
	tbl, err := l.cat.LoadTable(ctx, ident)
	switch {
	case err == nil:
		id, perr := strconv.ParseInt(tbl.Properties().Get(IcebergTableIDProperty, ""), 10, 64)
		if perr == nil && id == t.ID {
			return tbl, nil
		}
		if perr != nil || id > t.ID {
			return nil, fmt.Errorf("tiering: iceberg: %s holds the Iceberg table of another table (%s = %q), not of table id %d",
				tbl.Location(), IcebergTableIDProperty, tbl.Properties().Get(IcebergTableIDProperty, ""), t.ID)
		}
		meta := filepath.Join(l.root, t.Database, t.Name, "metadata")
		old := filepath.Join(l.root, t.Database, t.Name, strconv.FormatInt(id, 10), "metadata")
		if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
			return nil, fmt.Errorf("tiering: iceberg: %w", err)
		}
		if err := os.Rename(meta, old); err != nil {
			return nil, fmt.Errorf("tiering: iceberg: set the metadata of dropped table id %d aside: %w", id, err)
		}
	case !errors.Is(err, catalog.ErrNoSuchTable):
		return nil, fmt.Errorf("tiering: iceberg: load table %s.%s: %w", t.Database, t.Name, err)
	}
	if err := l.cat.CreateNamespace(ctx, table.Identifier{t.Database}, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("tiering: iceberg: namespace %s: %w", t.Database, err)
	}
	schema, err := table.ArrowSchemaToIcebergWithFreshIDs(arrow.NewSchema(fields, nil), false)
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: schema of %s.%s: %w", t.Database, t.Name, err)
	}
	spec := iceberg.UnpartitionedSpec
	if len(t.PartitionKeys) > 0 {
		var fields []iceberg.PartitionField
		for i, k := range t.PartitionKeys {
			col, ok := schema.FindFieldByName(k)
			if !ok {
				return nil, fmt.Errorf("tiering: iceberg: partition column %s of %s.%s has no Iceberg type", k, t.Database, t.Name)
			}
			fields = append(fields, iceberg.PartitionField{SourceIDs: []int{col.ID}, FieldID: 1000 + i, Name: k, Transform: iceberg.IdentityTransform{}})
		}
		s := iceberg.NewPartitionSpec(fields...)
		spec = &s
	}
	mapping, err := json.Marshal(schema.NameMapping())
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: %w", err)
	}
	tbl, err = l.cat.CreateTable(ctx, ident, schema, catalog.WithPartitionSpec(spec), catalog.WithProperties(iceberg.Properties{
		IcebergTableIDProperty:                    strconv.FormatInt(t.ID, 10),
		"format-version":                          "2",
		table.DefaultNameMappingKey:               string(mapping),
		table.ManifestMergeEnabledKey:             "true",
		table.ManifestMinMergeCountKey:            "8", // a commit reads them all (BenchmarkIcebergSyncBucket)
		table.MetadataDeleteAfterCommitEnabledKey: "true",
		table.MetadataPreviousVersionsMaxKey:      "20",
	}))
	if err != nil {
		if errors.Is(err, catalog.ErrTableAlreadyExists) { // another node created it first
			return l.cat.LoadTable(ctx, ident)
		}
		return nil, fmt.Errorf("tiering: iceberg: create table %s.%s: %w", t.Database, t.Name, err)
	}
	return tbl, nil
}

// ErrIcebergType is the error of a table with a column whose type
// Iceberg v2 cannot read as lake files store it.
var ErrIcebergType = errors.New("a column type Iceberg cannot read as stored")

// icebergFields is the Iceberg table's columns: those of every schema
// version of t, in the order they were added, then __offset and
// __timestamp.
func icebergFields(t IcebergTable) ([]arrow.Field, error) {
	var fields []arrow.Field
	seen := map[string]bool{}
	for _, cols := range t.Columns {
		for _, f := range cols.Fields() {
			if seen[f.Name] {
				continue
			}
			f, _ = lakeStoredField(f)
			if !icebergReadable(f.Type) {
				return nil, fmt.Errorf("tiering: iceberg: table %s.%s: column %s is %s: %w", t.Database, t.Name, f.Name, f.Type, ErrIcebergType)
			}
			seen[f.Name] = true
			fields = append(fields, f)
		}
	}
	return append(fields, LakeSchema(arrow.NewSchema(nil, nil)).Fields()...), nil
}

// icebergReadable reports whether Iceberg v2 reads a lake file column of
// type dt as stored.
func icebergReadable(dt arrow.DataType) bool {
	switch dt := dt.(type) {
	case *arrow.Time32Type:
		return false
	case *arrow.Time64Type:
		return dt.Unit == arrow.Microsecond
	case *arrow.TimestampType:
		return dt.Unit != arrow.Nanosecond
	}
	_, err := table.ArrowTypeToIceberg(dt, false)
	return err == nil
}

// evolveSchema adds to the Iceberg table the columns of t's newer schema
// versions it lacks (schemas only grow by nullable columns), keeping the
// system columns last and the name mapping whole. It reports whether it
// added any.
func (l *IcebergLake) evolveSchema(tx *table.Transaction, tbl *table.Table, t IcebergTable, fields []arrow.Field) (bool, error) {
	current := tbl.Schema()
	var missing []arrow.Field
	for _, f := range fields {
		if _, ok := current.FindFieldByName(f.Name); !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return false, nil
	}
	u := tx.UpdateSchema(true, false)
	for _, f := range missing {
		typ, err := table.ArrowTypeToIceberg(f.Type, false)
		if err != nil {
			return false, fmt.Errorf("tiering: iceberg: column %s: %w", f.Name, err)
		}
		u = u.AddColumn([]string{f.Name}, typ, "", false, nil).MoveBefore([]string{f.Name}, []string{LakeOffsetColumn})
	}
	if err := u.Commit(); err != nil {
		return false, fmt.Errorf("tiering: iceberg: add columns to %s.%s: %w", t.Database, t.Name, err)
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return false, fmt.Errorf("tiering: iceberg: %w", err)
	}
	mapping, err := json.Marshal(staged.Schema().NameMapping())
	if err != nil {
		return false, fmt.Errorf("tiering: iceberg: %w", err)
	}
	if err := tx.SetProperties(iceberg.Properties{table.DefaultNameMappingKey: string(mapping)}); err != nil {
		return false, fmt.Errorf("tiering: iceberg: %w", err)
	}
	return true, nil
}

// bucketFiles returns the data files of tbl's current snapshot that lie
// in bucket directory dir, by lake store name.
func (l *IcebergLake) bucketFiles(ctx context.Context, tbl *table.Table, dir string) (map[string]iceberg.DataFile, error) {
	held := map[string]iceberg.DataFile{}
	if tbl.CurrentSnapshot() == nil {
		return held, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: list the files of %s: %w", tbl.Location(), err)
	}
	prefix := filepath.Join(l.root, filepath.FromSlash(dir)) + string(filepath.Separator)
	for _, task := range tasks {
		p := task.File.FilePath()
		if rest, ok := strings.CutPrefix(p, prefix); ok && !strings.ContainsRune(rest, filepath.Separator) {
			held[dir+"/"+rest] = task.File
		}
	}
	return held, nil
}

// dataFile describes lake file f for tbl from its Parquet footer:
// row count, size, column statistics, and the partition values, which
// identity partitioning reads from the statistics of the partition
// columns (every row of a lake file is of one partition).
func (l *IcebergLake) dataFile(tbl *table.Table, f LakeFile) (iceberg.DataFile, error) {
	p := filepath.Join(l.root, filepath.FromSlash(f.Name))
	fh, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: %w", err)
	}
	rdr, err := file.NewParquetReader(fh)
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: lake file %s: %w", f.Name, err)
	}
	defer rdr.Close()
	if n := rdr.NumRows(); n != f.NextOffset-f.FirstOffset {
		return nil, fmt.Errorf("tiering: iceberg: lake file %s holds %d rows, its name says %d", f.Name, n, f.NextOffset-f.FirstOffset)
	}
	// Files written before TIME(0-3) was stored as microseconds have it
	// as milliseconds, which Iceberg does not read.
	stored, err := pqarrow.FromParquet(rdr.MetaData().Schema, nil, rdr.MetaData().KeyValueMetadata())
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: lake file %s: %w", f.Name, err)
	}
	for _, c := range stored.Fields() {
		if !icebergReadable(c.Type) {
			return nil, fmt.Errorf("tiering: iceberg: lake file %s: column %s is %s: %w", f.Name, c.Name, c.Type, ErrIcebergType)
		}
	}
	df, err := table.DataFileFromMetadata(table.DataFileArgs{
		Schema:        tbl.Schema(),
		Spec:          tbl.Spec(),
		Format:        iceberg.ParquetFile,
		Metadata:      rdr.MetaData(),
		FilePath:      p,
		FileSize:      st.Size(),
		Content:       iceberg.EntryContentData,
		Properties:    tbl.Properties(),
		FormatVersion: tbl.Metadata().Version(),
	})
	if err != nil {
		return nil, fmt.Errorf("tiering: iceberg: lake file %s: %w", f.Name, err)
	}
	return df, nil
}

// expire drops the snapshots older than retention (keeping the current
// one), with the manifests and data files only they refer to.
func expire(ctx context.Context, tbl *table.Table, retention time.Duration, res *IcebergSync) error {
	snaps := tbl.Metadata().Snapshots()
	cutoff := time.Now().Add(-retention).UnixMilli()
	if len(snaps) < 2 || !slices.ContainsFunc(snaps, func(s table.Snapshot) bool { return s.TimestampMs < cutoff }) {
		return nil
	}
	tx := tbl.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithOlderThan(retention), table.WithRetainLast(1)); err != nil {
		return fmt.Errorf("tiering: iceberg: expire snapshots of %s: %w", tbl.Location(), err)
	}
	// Expired snapshots' manifests still name the files an earlier expiry
	// deleted (as removed entries), and deleting them again fails: such
	// failures, after the commit, are not.
	if after, err := tx.Commit(ctx); err != nil && (after == nil || !onlyNotExist(err)) {
		return fmt.Errorf("tiering: iceberg: expire snapshots of %s: %w", tbl.Location(), err)
	}
	res.Expired = true
	return nil
}

// onlyNotExist reports whether every error joined in err is a missing file.
func onlyNotExist(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyNotExist(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, fs.ErrNotExist)
}
