package raftmeta

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// Table properties the data path reads (Fluss's names).
const (
	PropCompression = "table.log.arrow.compression.type"
	PropZstdLevel   = "table.log.arrow.compression.zstd.level"
)

// LogCompression is the table's log compression and ZSTD level (default
// ZSTD level 3, as Fluss). Errors wrap ErrInvalid.
func (t *Table) LogCompression() (record.Compression, int, error) {
	c := record.CompressionZSTD
	if v, ok := t.Properties[PropCompression]; ok {
		var err error
		if c, err = record.ParseCompression(v); err != nil {
			return 0, 0, fmt.Errorf("%w: table %s property %s=%q: %v", ErrInvalid, t.FullName(), PropCompression, v, err)
		}
	}
	level := 3
	if v, ok := t.Properties[PropZstdLevel]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, 0, fmt.Errorf("%w: table %s property %s=%q is not an integer", ErrInvalid, t.FullName(), PropZstdLevel, v)
		}
		level = n
	}
	return c, level, nil
}

// Table properties AlterTable may change (MutableProperty).
const (
	PropLogTTL        = "table.log.ttl"
	PropLocalSegments = "table.log.tiered.local-segments"
	PropLakeEnabled   = "table.datalake.enabled"
	PropLakeFreshness = "table.datalake.freshness"
	// PropLakeFormat is fixed once set: the metadata leader sets it from
	// its [tiering] lake_format when a table's lake is turned on without
	// one (node: lakeFormatFor).
	PropLakeFormat     = "table.datalake.format"
	PropAutoPrecreate  = "table.auto-partition.num-precreate"
	PropAutoRetention  = "table.auto-partition.num-retention"
	PropReplication    = "table.replication.factor"
	mutablePropsListed = PropLogTTL + ", " + PropLocalSegments + ", " + PropCompression + ", " + PropZstdLevel + ", " +
		PropLakeEnabled + " (to true), " + PropLakeFreshness + ", " + PropLakeFormat + " (once, on a table without one), " + PropAutoPrecreate + ", " + PropAutoRetention +
		", " + PropReplication + ", and keys outside table.* and fields.*"
)

// MutableProperty reports whether table property key may change after the
// table is created: the ones the server reads afresh on each use
// (retention, tiering, compression of new batches, partition upkeep), the
// replication factor (the controller adds or removes replicas to match)
// and user keys outside table.* and fields.*. Not those fixed in stored data or in how rows merge (the merge
// engine, changelog image, bucket and partition layout, the lake's format).
func MutableProperty(key string) bool {
	switch key {
	case PropLogTTL, PropLocalSegments, PropCompression, PropZstdLevel,
		PropLakeEnabled, PropLakeFreshness, PropAutoPrecreate, PropAutoRetention, PropReplication:
		return true
	}
	return !strings.HasPrefix(key, "table.") && !strings.HasPrefix(key, "fields.")
}

// AlterProperties returns t's properties with set applied and reset
// removed, after checking the change: at least one key, none both set and
// reset, each MutableProperty (the compression not on a primary-key table),
// table.datalake.enabled never turned off once on (rows that retention
// dropped from the log are only in the lake, and the union read would no
// longer see them), and the result valid as a whole (CreateTable's rules).
// Errors wrap ErrInvalid.
func AlterProperties(t *Table, set map[string]string, reset []string) (map[string]string, error) {
	full := t.FullName()
	if len(set) == 0 && len(reset) == 0 {
		return nil, fmt.Errorf("%w: alter table %s: no property to set or reset", ErrInvalid, full)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if slices.Contains(reset, k) {
			return nil, fmt.Errorf("%w: alter table %s: property %q is both set and reset", ErrInvalid, full, k)
		}
	}
	for _, k := range append(slices.Sorted(maps.Keys(set)), reset...) {
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%w: alter table %s: empty property key", ErrInvalid, full)
		}
		if k == PropLakeFormat && t.Properties[PropLakeFormat] == "" && !slices.Contains(reset, k) {
			continue // set once, on a table created before it had one
		}
		if !MutableProperty(k) {
			return nil, fmt.Errorf("%w: alter table %s: property %q cannot change after the table is created (these can: %s)", ErrInvalid, full, k, mutablePropsListed)
		}
		if (k == PropCompression || k == PropZstdLevel) && t.HasPrimaryKey() {
			// A primary-key bucket's state machine takes its changelog's
			// compression when the replica opens (replica.PKConfig).
			return nil, fmt.Errorf("%w: alter table %s: property %q cannot change on a primary-key table", ErrInvalid, full, k)
		}
	}
	props := withProperties(t.Properties, set, reset)
	if strings.EqualFold(t.Properties[PropLakeEnabled], "true") && !strings.EqualFold(props[PropLakeEnabled], "true") {
		return nil, fmt.Errorf("%w: alter table %s: %s cannot be turned off once on: rows retention dropped from the log are only in the lake, and reads would no longer see them", ErrInvalid, full, PropLakeEnabled)
	}
	nt := *t
	nt.Properties = props
	if err := checkProperties(full, nt.Schema(), &nt); err != nil {
		return nil, err
	}
	return props, nil
}

// withProperties returns a copy of props with set applied and reset
// removed.
func withProperties(props, set map[string]string, reset []string) map[string]string {
	out := maps.Clone(props)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, set)
	for _, k := range reset {
		delete(out, k)
	}
	return out
}
