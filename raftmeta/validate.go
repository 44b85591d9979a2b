package raftmeta

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// MaxBuckets bounds a table's bucket count.
const MaxBuckets = 4096

// MaxReplicationFactor bounds table.replication.factor.
const MaxReplicationFactor = 5

// Bounds of the cluster-wide settings (ClusterConfig). Every catalog write
// waits for a majority of the metadata voters: beyond nine the wait grows
// while few clusters need to survive more than four failed voters. A grace
// period under a second would move replicas on a missed heartbeat.
const (
	MaxMetaVoters    = 9
	MinDeadNodeGrace = time.Second
	MaxDeadNodeGrace = 30 * 24 * time.Hour
	MinDefaultLogTTL = time.Second
	// MinLakeSnapshotRetention: the setting is held in milliseconds.
	MinLakeSnapshotRetention = time.Millisecond
)

// ValidateMetaVoters checks a target number of metadata voters.
func ValidateMetaVoters(n int) error {
	if n < 1 || n > MaxMetaVoters {
		return fmt.Errorf("%w: meta_voters must be 1 to %d, got %d", ErrInvalid, MaxMetaVoters, n)
	}
	return nil
}

// ValidateDeadNodeGrace checks a dead-node grace period.
func ValidateDeadNodeGrace(d time.Duration) error {
	if d < MinDeadNodeGrace || d > MaxDeadNodeGrace {
		return fmt.Errorf("%w: dead_node_grace must be %v to %v, got %v", ErrInvalid, MinDeadNodeGrace, MaxDeadNodeGrace, d)
	}
	return nil
}

// ValidateDefaultLogTTL checks a default log retention.
func ValidateDefaultLogTTL(d time.Duration) error {
	if d < MinDefaultLogTTL {
		return fmt.Errorf("%w: default_log_ttl must be at least %v, got %v", ErrInvalid, MinDefaultLogTTL, d)
	}
	return nil
}

// ValidateLakeSnapshotRetention checks the retention of replaced lake
// snapshots.
func ValidateLakeSnapshotRetention(d time.Duration) error {
	if d < MinLakeSnapshotRetention {
		return fmt.Errorf("%w: lake_snapshot_retention must be at least %v, got %v", ErrInvalid, MinLakeSnapshotRetention, d)
	}
	return nil
}

// Validate checks the fields of c that are set.
func (c ClusterConfig) Validate() error {
	if c.MetaVoters != 0 {
		if err := ValidateMetaVoters(c.MetaVoters); err != nil {
			return err
		}
	}
	if c.DeadNodeGrace != 0 {
		if err := ValidateDeadNodeGrace(c.DeadNodeGrace); err != nil {
			return err
		}
	}
	if c.DefaultLogTTL != 0 {
		if err := ValidateDefaultLogTTL(c.DefaultLogTTL); err != nil {
			return err
		}
	}
	if c.LakeSnapshotRetention != 0 {
		return ValidateLakeSnapshotRetention(c.LakeSnapshotRetention)
	}
	return nil
}

// merge returns c with the fields set in change; with onlyIfUnset, only
// those c does not have.
func (c ClusterConfig) merge(change ClusterConfig, onlyIfUnset bool) ClusterConfig {
	if change.MetaVoters != 0 && (!onlyIfUnset || c.MetaVoters == 0) {
		c.MetaVoters = change.MetaVoters
	}
	if change.DeadNodeGrace != 0 && (!onlyIfUnset || c.DeadNodeGrace == 0) {
		c.DeadNodeGrace = change.DeadNodeGrace
	}
	if change.DefaultLogTTL != 0 && (!onlyIfUnset || c.DefaultLogTTL == 0) {
		c.DefaultLogTTL = change.DefaultLogTTL
	}
	if change.LakeSnapshotRetention != 0 && (!onlyIfUnset || c.LakeSnapshotRetention == 0) {
		c.LakeSnapshotRetention = change.LakeSnapshotRetention
	}
	return c
}

var (
	objectNameRE     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,199}$`)
	partitionValueRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)
)

// ValidateDatabaseName checks a database name: letters, digits, '_' and
// '-', not starting with '-', at most 200 characters.
func ValidateDatabaseName(name string) error {
	if !objectNameRE.MatchString(name) {
		return fmt.Errorf("%w: database name %q is not allowed: use 1 to 200 letters, digits, '_' or '-' (not first); '.' and '$' are reserved", ErrInvalid, name)
	}
	return nil
}

// ValidateTableName checks a table name by the same rule as databases.
func ValidateTableName(name string) error {
	if !objectNameRE.MatchString(name) {
		return fmt.Errorf("%w: table name %q is not allowed: use 1 to 200 letters, digits, '_' or '-' (not first); '.' and '$' are reserved", ErrInvalid, name)
	}
	return nil
}

// BuildTable validates spec and returns the catalog entry it describes,
// with ID 0, schema id 1, the default bucket count and bucket keys filled
// in, and the properties as the user gave them. Every error wraps
// ErrInvalid and names the offending input.
func BuildTable(spec TableSpec) (*Table, error) {
	if err := ValidateDatabaseName(spec.Database); err != nil {
		return nil, err
	}
	if err := ValidateTableName(spec.Name); err != nil {
		return nil, err
	}
	full := spec.Database + "." + spec.Name
	schema := &record.Schema{ID: 1, Columns: slices.Clone(spec.Columns), PrimaryKey: slices.Clone(spec.PrimaryKey)}
	if err := schema.Validate(); err != nil {
		return nil, fmt.Errorf("%w: table %s: %w", ErrInvalid, full, err)
	}
	t := &Table{
		Database: spec.Database, Name: spec.Name, Schemas: []*record.Schema{schema},
		PartitionKeys: slices.Clone(spec.PartitionKeys), BucketKeys: slices.Clone(spec.BucketKeys),
		BucketCount: spec.BucketCount, Properties: maps.Clone(spec.Properties), Comment: spec.Comment,
	}
	if t.Properties == nil {
		t.Properties = map[string]string{}
	}
	switch {
	case t.BucketCount == 0:
		t.BucketCount = 1
	case t.BucketCount < 0 || t.BucketCount > MaxBuckets:
		return nil, fmt.Errorf("%w: table %s: bucket count %d must be between 1 and %d", ErrInvalid, full, spec.BucketCount, MaxBuckets)
	}
	if err := checkPartitionKeys(full, schema, t.PartitionKeys); err != nil {
		return nil, err
	}
	if err := checkBucketKeys(full, schema, t); err != nil {
		return nil, err
	}
	if err := checkProperties(full, schema, t); err != nil {
		return nil, err
	}
	return t, nil
}

func checkPartitionKeys(full string, s *record.Schema, keys []string) error {
	for i, k := range keys {
		c := s.Index(k)
		if c < 0 {
			return fmt.Errorf("%w: table %s: partition key %q is not a column", ErrInvalid, full, k)
		}
		if slices.Contains(keys[:i], k) {
			return fmt.Errorf("%w: table %s: partition key %q is listed twice", ErrInvalid, full, k)
		}
		switch kind := s.Columns[c].Type.Kind; kind {
		case record.KindString, record.KindInt, record.KindBigInt, record.KindDate:
		default:
			return fmt.Errorf("%w: table %s: partition key %q is %s; partition keys must be STRING, INT, BIGINT or DATE", ErrInvalid, full, k, s.Columns[c].Type)
		}
		if s.HasPrimaryKey() && !slices.Contains(s.PrimaryKey, k) {
			return fmt.Errorf("%w: table %s: partition key %q must be part of the primary key %v", ErrInvalid, full, k, s.PrimaryKey)
		}
	}
	return nil
}

func checkBucketKeys(full string, s *record.Schema, t *Table) error {
	var allowed []string // nil: any column (log tables)
	if s.HasPrimaryKey() {
		for _, k := range s.PrimaryKey {
			if !slices.Contains(t.PartitionKeys, k) {
				allowed = append(allowed, k)
			}
		}
		if len(allowed) == 0 {
			return fmt.Errorf("%w: table %s: the primary key %v needs at least one column that is not a partition key", ErrInvalid, full, s.PrimaryKey)
		}
		if len(t.BucketKeys) == 0 {
			t.BucketKeys = slices.Clone(allowed)
			return nil
		}
	}
	for i, k := range t.BucketKeys {
		c := s.Index(k)
		if c < 0 {
			return fmt.Errorf("%w: table %s: bucket key %q is not a column", ErrInvalid, full, k)
		}
		if slices.Contains(t.BucketKeys[:i], k) {
			return fmt.Errorf("%w: table %s: bucket key %q is listed twice", ErrInvalid, full, k)
		}
		if slices.Contains(t.PartitionKeys, k) {
			return fmt.Errorf("%w: table %s: bucket key %q is a partition key; every row of a partition would land in one bucket", ErrInvalid, full, k)
		}
		if allowed != nil && !slices.Contains(allowed, k) {
			return fmt.Errorf("%w: table %s: bucket key %q must be a primary-key column that is not a partition key (one of %v)", ErrInvalid, full, k, allowed)
		}
	}
	return nil
}

// Aggregation functions of fields.<col>.agg and the column kinds they take
// (nil: any kind).
var aggFunctions = map[string][]record.Kind{
	"sum":                      numericKinds,
	"product":                  numericKinds,
	"max":                      orderedKinds,
	"min":                      orderedKinds,
	"last_value":               nil,
	"last_value_ignore_nulls":  nil,
	"last_non_null_value":      nil,
	"first_value":              nil,
	"first_value_ignore_nulls": nil,
	"first_non_null_value":     nil,
	"listagg":                  {record.KindString},
	"string_agg":               {record.KindString},
	"bool_and":                 {record.KindBoolean},
	"bool_or":                  {record.KindBoolean},
}

var (
	numericKinds = []record.Kind{record.KindTinyInt, record.KindSmallInt, record.KindInt, record.KindBigInt,
		record.KindFloat, record.KindDouble, record.KindDecimal}
	orderedKinds = append(slices.Clone(numericKinds), record.KindString, record.KindDate, record.KindTime,
		record.KindTimestamp, record.KindTimestampLTZ)
	versionKinds = []record.Kind{record.KindInt, record.KindBigInt, record.KindTimestamp, record.KindTimestampLTZ}
)

// oneOf checks v case-insensitively against allowed.
func oneOf(full, key, v string, allowed ...string) error {
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return nil
		}
	}
	return fmt.Errorf("%w: table %s: property %s=%q: want one of %s", ErrInvalid, full, key, v, strings.Join(allowed, ", "))
}

func intIn(full, key, v string, lo, hi int) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		return fmt.Errorf("%w: table %s: property %s=%q: want an integer from %d to %d", ErrInvalid, full, key, v, lo, hi)
	}
	return nil
}

func boolProp(full, key, v string) error {
	return oneOf(full, key, v, "true", "false")
}

func durationProp(full, key, v string) error {
	if d, err := ParseDuration(v); err != nil || d <= 0 {
		return fmt.Errorf("%w: table %s: property %s=%q: want a positive duration such as 7d, 168h or 30min", ErrInvalid, full, key, v)
	}
	return nil
}

// ParseDuration accepts a Go duration ("168h", "1h30m") or Fluss's style of
// a number and one unit: ms, s, m/min, h, d (e.g. "7d", "30 min").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("duration %q: no leading number", s)
	}
	var unit time.Duration
	switch strings.ToLower(strings.TrimSpace(s[i:])) {
	case "ms", "milli", "millis", "millisecond", "milliseconds":
		unit = time.Millisecond
	case "", "s", "sec", "secs", "second", "seconds":
		unit = time.Second
	case "m", "min", "mins", "minute", "minutes":
		unit = time.Minute
	case "h", "hour", "hours":
		unit = time.Hour
	case "d", "day", "days":
		unit = 24 * time.Hour
	default:
		return 0, fmt.Errorf("duration %q: unknown unit %q", s, s[i:])
	}
	if n > int64(1<<63-1)/int64(unit) {
		return 0, fmt.Errorf("duration %q overflows", s)
	}
	return time.Duration(n) * unit, nil
}

var autoPartitionKeys = []string{"enabled", "time-unit", "num-precreate", "num-retention", "time-zone", "key"}

func checkProperties(full string, s *record.Schema, t *Table) error {
	props := t.Properties
	pk := s.HasPrimaryKey()
	engine := strings.ToLower(props["table.merge-engine"])
	// Sorted keys: the first offending key is reported deterministically.
	for _, key := range slices.Sorted(maps.Keys(props)) {
		v := props[key]
		var err error
		switch {
		case key == "table.log.ttl":
			err = durationProp(full, key, v)
		case key == "table.log.format":
			err = oneOf(full, key, v, "ARROW")
		case key == "table.log.arrow.compression.type":
			err = oneOf(full, key, v, "NONE", "LZ4_FRAME", "ZSTD")
		case key == "table.log.arrow.compression.zstd.level":
			err = intIn(full, key, v, 1, 22)
		case key == "table.log.tiered.local-segments":
			err = intIn(full, key, v, 1, 1<<20)
		case key == "table.replication.factor":
			err = intIn(full, key, v, 1, MaxReplicationFactor)
		case key == "table.merge-engine":
			if !pk {
				return fmt.Errorf("%w: table %s: table.merge-engine applies only to primary-key tables; declare a primary key", ErrInvalid, full)
			}
			err = oneOf(full, key, v, "last_row", "first_row", "versioned", "aggregation")
		case key == "table.merge-engine.versioned.ver-column":
			if engine != "versioned" {
				return fmt.Errorf("%w: table %s: %s needs table.merge-engine=versioned", ErrInvalid, full, key)
			}
			err = checkVersionColumn(full, s, v)
		case key == "table.delete.behavior":
			err = oneOf(full, key, v, "allow", "ignore", "disable")
		case key == "table.changelog.image":
			err = oneOf(full, key, v, "FULL", "WAL")
		case key == "table.datalake.enabled":
			err = boolProp(full, key, v)
		case key == "table.datalake.freshness":
			err = durationProp(full, key, v)
		case key == PropLakeFormat:
			err = oneOf(full, key, v, "iceberg", "parquet")
		case strings.HasPrefix(key, "table.datalake."):
			// Other table.datalake.* keys (Fluss's): stored, unused.
		case strings.HasPrefix(key, "table.auto-partition."):
			err = checkAutoPartition(full, t, key, v)
		case strings.HasPrefix(key, "table."):
			return fmt.Errorf("%w: table %s: unknown table property %q (known: table.log.ttl, table.log.format, table.log.arrow.compression.type, table.log.arrow.compression.zstd.level, table.replication.factor, table.merge-engine, table.merge-engine.versioned.ver-column, table.delete.behavior, table.changelog.image, table.datalake.*, table.auto-partition.*)", ErrInvalid, full, key)
		case strings.HasPrefix(key, "fields."):
			err = checkFieldProperty(full, s, engine, key, v)
		}
		if err != nil {
			return err
		}
	}
	if engine == "versioned" && props["table.merge-engine.versioned.ver-column"] == "" {
		return fmt.Errorf("%w: table %s: table.merge-engine=versioned needs table.merge-engine.versioned.ver-column naming an INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ column", ErrInvalid, full)
	}
	return nil
}

func checkVersionColumn(full string, s *record.Schema, col string) error {
	i := s.Index(col)
	if i < 0 {
		return fmt.Errorf("%w: table %s: version column %q is not a column", ErrInvalid, full, col)
	}
	if !slices.Contains(versionKinds, s.Columns[i].Type.Kind) {
		return fmt.Errorf("%w: table %s: version column %q is %s; it must be INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ", ErrInvalid, full, col, s.Columns[i].Type)
	}
	return nil
}

func checkAutoPartition(full string, t *Table, key, v string) error {
	sub := strings.TrimPrefix(key, "table.auto-partition.")
	if !slices.Contains(autoPartitionKeys, sub) {
		return fmt.Errorf("%w: table %s: unknown property %q (known: table.auto-partition.%s)", ErrInvalid, full, key, strings.Join(autoPartitionKeys, ", table.auto-partition."))
	}
	switch sub {
	case "enabled":
		if err := boolProp(full, key, v); err != nil {
			return err
		}
		if strings.EqualFold(v, "true") {
			if len(t.PartitionKeys) == 0 {
				return fmt.Errorf("%w: table %s: table.auto-partition.enabled needs partition keys", ErrInvalid, full)
			}
			// The cross-property rules: the properties are checked one by
			// one, and enabled is the one every enabled table has.
			_, err := autoPartitionTimeKey(full, t)
			return err
		}
	case "time-unit":
		return oneOf(full, key, v, "YEAR", "QUARTER", "MONTH", "DAY", "HOUR")
	case "num-precreate": // each is a partition: at most a table's worth
		return intIn(full, key, v, 0, MaxPartitionsPerTable)
	case "num-retention":
		return intIn(full, key, v, 0, 1<<20)
	case "time-zone":
		_, err := autoPartitionZone(full, v)
		return err
	case "key":
		return checkAutoPartitionKeyName(full, t, v)
	}
	return nil
}

func checkAutoPartitionKeyName(full string, t *Table, v string) error {
	if !slices.Contains(t.PartitionKeys, v) {
		return fmt.Errorf("%w: table %s: table.auto-partition.key=%q is not a partition key", ErrInvalid, full, v)
	}
	return nil
}

// autoPartitionTimeKey returns the partition key auto-partitioning cuts by
// time: table.auto-partition.key, or the only partition key. It must be a
// STRING column (a name such as "2024111110" fits no INT, BIGINT or DATE).
func autoPartitionTimeKey(full string, t *Table) (string, error) {
	k, ok := t.Properties["table.auto-partition.key"]
	switch {
	case ok:
		if err := checkAutoPartitionKeyName(full, t, k); err != nil {
			return "", err
		}
	case len(t.PartitionKeys) == 1:
		k = t.PartitionKeys[0]
	default:
		return "", fmt.Errorf("%w: table %s: table.auto-partition.enabled=true with several partition keys %v needs table.auto-partition.key naming the time key", ErrInvalid, full, t.PartitionKeys)
	}
	s := t.Schema()
	c := s.Index(k)
	if c < 0 {
		return "", fmt.Errorf("%w: table %s: auto-partition time key %q is not a column", ErrInvalid, full, k)
	}
	if kind := s.Columns[c].Type.Kind; kind != record.KindString {
		return "", fmt.Errorf("%w: table %s: auto-partition time key %q is %s; with table.auto-partition.enabled=true it must be STRING", ErrInvalid, full, k, s.Columns[c].Type)
	}
	return k, nil
}

// autoPartitionZone loads table.auto-partition.time-zone. "" and "Local"
// are refused: they would mean the machine's own zone, which differs
// between nodes.
func autoPartitionZone(full, v string) (*time.Location, error) {
	if v == "" || strings.EqualFold(v, "Local") {
		return nil, fmt.Errorf("%w: table %s: property table.auto-partition.time-zone=%q: want an IANA time zone such as UTC or Asia/Tokyo", ErrInvalid, full, v)
	}
	loc, err := time.LoadLocation(v)
	if err != nil {
		return nil, fmt.Errorf("%w: table %s: property table.auto-partition.time-zone=%q: not a known IANA time zone (such as UTC or Asia/Tokyo): %v", ErrInvalid, full, v, err)
	}
	return loc, nil
}

// checkFieldProperty checks fields.<col>.agg and fields.<col>.listagg-delimiter.
func checkFieldProperty(full string, s *record.Schema, engine, key, v string) error {
	rest := strings.TrimPrefix(key, "fields.")
	dot := strings.LastIndexByte(rest, '.')
	if dot <= 0 {
		return fmt.Errorf("%w: table %s: property %q: want fields.<column>.agg", ErrInvalid, full, key)
	}
	col, opt := rest[:dot], rest[dot+1:]
	i := s.Index(col)
	if i < 0 {
		return fmt.Errorf("%w: table %s: property %q names column %q, which does not exist", ErrInvalid, full, key, col)
	}
	if !s.HasPrimaryKey() {
		return fmt.Errorf("%w: table %s: %s applies only to primary-key tables with table.merge-engine=aggregation", ErrInvalid, full, key)
	}
	if engine != "aggregation" {
		return fmt.Errorf("%w: table %s: %s needs table.merge-engine=aggregation", ErrInvalid, full, key)
	}
	switch opt {
	case "agg":
		if slices.Contains(s.PrimaryKey, col) {
			return fmt.Errorf("%w: table %s: %s: primary-key column %q cannot be aggregated", ErrInvalid, full, key, col)
		}
		kinds, ok := aggFunctions[strings.ToLower(v)]
		if !ok {
			return fmt.Errorf("%w: table %s: %s=%q: unknown aggregate function (want one of %s)", ErrInvalid, full, key, v, strings.Join(slices.Sorted(maps.Keys(aggFunctions)), ", "))
		}
		if kinds != nil && !slices.Contains(kinds, s.Columns[i].Type.Kind) {
			return fmt.Errorf("%w: table %s: %s=%s cannot aggregate column %q of type %s", ErrInvalid, full, key, v, col, s.Columns[i].Type)
		}
	case "listagg-delimiter", "string_agg-delimiter":
	default:
		return fmt.Errorf("%w: table %s: unknown property %q (want fields.%s.agg)", ErrInvalid, full, key, col)
	}
	return nil
}

// PartitionName checks values against t's partition keys and returns the
// partition's name: the values in partition-key order joined with '$'.
func PartitionName(t *Table, values map[string]string) (string, error) {
	if len(t.PartitionKeys) == 0 {
		return "", fmt.Errorf("%w: table %s is not partitioned", ErrInvalid, t.FullName())
	}
	if len(values) != len(t.PartitionKeys) {
		return "", fmt.Errorf("%w: table %s: a partition needs exactly one value for each partition key %v, got %d values", ErrInvalid, t.FullName(), t.PartitionKeys, len(values))
	}
	parts := make([]string, len(t.PartitionKeys))
	for i, k := range t.PartitionKeys {
		v, ok := values[k]
		if !ok {
			return "", fmt.Errorf("%w: table %s: partition value for key %q is missing", ErrInvalid, t.FullName(), k)
		}
		if !partitionValueRE.MatchString(v) {
			return "", fmt.Errorf("%w: table %s: partition value %q of key %q is not allowed: use 1 to 200 letters, digits, '_' or '-'", ErrInvalid, t.FullName(), v, k)
		}
		if err := checkPartitionValue(t, k, v); err != nil {
			return "", err
		}
		parts[i] = v
	}
	return strings.Join(parts, "$"), nil
}

func checkPartitionValue(t *Table, key, v string) error {
	s := t.Schema()
	c := s.Index(key)
	if c < 0 {
		return nil
	}
	var err error
	switch s.Columns[c].Type.Kind {
	case record.KindInt:
		_, err = strconv.ParseInt(v, 10, 32)
	case record.KindBigInt:
		_, err = strconv.ParseInt(v, 10, 64)
	case record.KindDate:
		_, err = time.Parse(time.DateOnly, v)
	}
	if err != nil {
		return fmt.Errorf("%w: table %s: partition value %q of key %q is not a valid %s", ErrInvalid, t.FullName(), v, key, s.Columns[c].Type)
	}
	return nil
}

// ValidateNewColumns checks columns to append to schema cur: at least one, each
// nullable, with a legal new name and a valid type, and the result within
// record.MaxColumns.
func ValidateNewColumns(full string, cur *record.Schema, cols []record.Column) error {
	if len(cols) == 0 {
		return fmt.Errorf("%w: table %s: no columns to add", ErrInvalid, full)
	}
	if len(cur.Columns)+len(cols) > record.MaxColumns {
		return fmt.Errorf("%w: table %s: %d columns after adding, at most %d allowed", ErrInvalid, full, len(cur.Columns)+len(cols), record.MaxColumns)
	}
	for i, c := range cols {
		if !record.ValidColumnName(c.Name) {
			return fmt.Errorf("%w: table %s: column name %q is not allowed (letters, digits and '_', starting with a letter or '_', at most 128)", ErrInvalid, full, c.Name)
		}
		if cur.Index(c.Name) >= 0 || slices.ContainsFunc(cols[:i], func(o record.Column) bool { return o.Name == c.Name }) {
			return fmt.Errorf("%w: table %s: column %q already exists", ErrInvalid, full, c.Name)
		}
		if !c.Nullable {
			return fmt.Errorf("%w: table %s: added column %q must be nullable (rows written before it have no value)", ErrInvalid, full, c.Name)
		}
		if c.Type.ArrowType() == nil {
			return fmt.Errorf("%w: table %s: added column %q has no valid type", ErrInvalid, full, c.Name)
		}
	}
	next := &record.Schema{Columns: append(slices.Clone(cur.Columns), cols...), PrimaryKey: cur.PrimaryKey}
	if err := next.Validate(); err != nil {
		return fmt.Errorf("%w: table %s: %v", ErrInvalid, full, err)
	}
	return nil
}
