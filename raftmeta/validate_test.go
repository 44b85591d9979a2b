package raftmeta

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/logstore/record"
)

func col(name string, k record.Kind, nullable bool) record.Column {
	return record.Column{Name: name, Type: record.Type{Kind: k}, Nullable: nullable}
}

// pkSpec is a valid primary-key table: PK (id, dt), partitioned by dt.
func pkSpec() TableSpec {
	return TableSpec{
		Database: "db", Name: "t",
		Columns: []record.Column{
			col("id", record.KindBigInt, false),
			col("dt", record.KindString, false),
			col("ver", record.KindBigInt, false),
			col("amount", record.KindDouble, true),
			col("name", record.KindString, true),
			col("ok", record.KindBoolean, true),
			col("ts", record.KindTimestamp, true),
		},
		PrimaryKey:    []string{"id", "dt"},
		PartitionKeys: []string{"dt"},
	}
}

func logSpec() TableSpec {
	return TableSpec{
		Database: "db", Name: "log",
		Columns: []record.Column{col("id", record.KindBigInt, true), col("dt", record.KindDate, true), col("f", record.KindFloat, true)},
	}
}

func TestBuildTableErrors(t *testing.T) {
	tests := []struct {
		name   string
		base   func() TableSpec
		mutate func(s *TableSpec)
		want   string // substring of the message; it names the offending input
	}{
		{"db name with dot", pkSpec, func(s *TableSpec) { s.Database = "a.b" }, `database name "a.b"`},
		{"db name empty", pkSpec, func(s *TableSpec) { s.Database = "" }, `database name ""`},
		{"table name with dollar", pkSpec, func(s *TableSpec) { s.Name = "t$changelog" }, `table name "t$changelog"`},
		{"table name leading dash", pkSpec, func(s *TableSpec) { s.Name = "-t" }, `table name "-t"`},
		{"table name too long", pkSpec, func(s *TableSpec) { s.Name = strings.Repeat("x", 201) }, `table name "xxx`},
		{"no columns", pkSpec, func(s *TableSpec) { s.Columns = nil; s.PrimaryKey = nil; s.PartitionKeys = nil }, "at least one column"},
		{"bad column name", logSpec, func(s *TableSpec) { s.Columns[0].Name = "a b" }, `column name "a b"`},
		{"nullable pk", pkSpec, func(s *TableSpec) { s.Columns[0].Nullable = true }, `primary key column "id" must be NOT NULL`},
		{"negative buckets", pkSpec, func(s *TableSpec) { s.BucketCount = -1 }, "bucket count -1"},
		{"too many buckets", pkSpec, func(s *TableSpec) { s.BucketCount = 4097 }, "bucket count 4097"},
		{"partition key missing", logSpec, func(s *TableSpec) { s.PartitionKeys = []string{"zz"} }, `partition key "zz" is not a column`},
		{"partition key twice", logSpec, func(s *TableSpec) { s.PartitionKeys = []string{"dt", "dt"} }, `partition key "dt" is listed twice`},
		{"partition key float", logSpec, func(s *TableSpec) { s.PartitionKeys = []string{"f"} }, `partition key "f" is FLOAT`},
		{"pk partition key outside pk", pkSpec, func(s *TableSpec) { s.PartitionKeys = []string{"name"} }, `partition key "name" must be part of the primary key`},
		{"pk only partition keys", pkSpec, func(s *TableSpec) { s.PrimaryKey = []string{"dt"} }, "needs at least one column that is not a partition key"},
		{"bucket key missing", logSpec, func(s *TableSpec) { s.BucketKeys = []string{"nope"} }, `bucket key "nope" is not a column`},
		{"bucket key twice", logSpec, func(s *TableSpec) { s.BucketKeys = []string{"id", "id"} }, `bucket key "id" is listed twice`},
		{"bucket key is partition key", logSpec, func(s *TableSpec) { s.PartitionKeys = []string{"dt"}; s.BucketKeys = []string{"dt"} }, `bucket key "dt" is a partition key`},
		{"pk bucket key outside pk", pkSpec, func(s *TableSpec) { s.BucketKeys = []string{"name"} }, `bucket key "name" must be a primary-key column`},
		{"pk bucket key is partition key", pkSpec, func(s *TableSpec) { s.BucketKeys = []string{"dt"} }, `bucket key "dt" is a partition key`},
		{"unknown table property", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.nope": "1"} }, `unknown table property "table.nope"`},
		{"ttl garbage", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.log.ttl": "forever"} }, `table.log.ttl="forever"`},
		{"ttl negative", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.log.ttl": "-1h"} }, `table.log.ttl="-1h"`},
		{"log format", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.log.format": "INDEXED"} }, `table.log.format="INDEXED"`},
		{"compression type", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.log.arrow.compression.type": "GZIP"} }, `"GZIP": want one of NONE, LZ4_FRAME, ZSTD`},
		{"zstd level 0", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.log.arrow.compression.zstd.level": "0"} }, `zstd.level="0": want an integer from 1 to 22`},
		{"zstd level 23", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.log.arrow.compression.zstd.level": "23"} }, `zstd.level="23"`},
		{"replication 0", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.replication.factor": "0"} }, `table.replication.factor="0"`},
		{"replication 6", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.replication.factor": "6"} }, `table.replication.factor="6"`},
		{"merge engine on log table", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.merge-engine": "first_row"} }, "only to primary-key tables"},
		{"merge engine unknown", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.merge-engine": "newest"} }, `table.merge-engine="newest"`},
		{"versioned without column", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.merge-engine": "versioned"} }, "needs table.merge-engine.versioned.ver-column"},
		{"versioned missing column", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "zz"}
		}, `version column "zz" is not a column`},
		{"versioned string column", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "name"}
		}, `version column "name" is STRING`},
		{"ver-column without versioned", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine.versioned.ver-column": "ver"}
		}, "needs table.merge-engine=versioned"},
		{"agg without aggregation engine", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"fields.amount.agg": "sum"} }, "fields.amount.agg needs table.merge-engine=aggregation"},
		{"agg on log table", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"fields.id.agg": "sum"} }, "only to primary-key tables"},
		{"agg unknown column", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine": "aggregation", "fields.zz.agg": "sum"}
		}, `names column "zz", which does not exist`},
		{"agg unknown function", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine": "aggregation", "fields.amount.agg": "median"}
		}, `fields.amount.agg="median": unknown aggregate function`},
		{"agg on pk column", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine": "aggregation", "fields.id.agg": "sum"}
		}, `primary-key column "id" cannot be aggregated`},
		{"agg type mismatch", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine": "aggregation", "fields.name.agg": "sum"}
		}, `cannot aggregate column "name" of type STRING`},
		{"bool_and on number", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine": "aggregation", "fields.amount.agg": "bool_and"}
		}, `cannot aggregate column "amount"`},
		{"unknown fields option", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine": "aggregation", "fields.amount.weight": "2"}
		}, `unknown property "fields.amount.weight"`},
		{"fields without option", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"fields.amount": "sum"} }, `property "fields.amount": want fields.<column>.agg`},
		{"delete behavior", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.delete.behavior": "sometimes"} }, `table.delete.behavior="sometimes"`},
		{"changelog image", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.changelog.image": "HALF"} }, `table.changelog.image="HALF"`},
		{"datalake enabled", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.datalake.enabled": "yes"} }, `table.datalake.enabled="yes"`},
		{"datalake freshness", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.datalake.freshness": "soon"} }, `table.datalake.freshness="soon"`},
		{"auto partition unpartitioned", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.auto-partition.enabled": "true"} }, "table.auto-partition.enabled needs partition keys"},
		{"auto partition unit", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.auto-partition.time-unit": "WEEK"} }, `table.auto-partition.time-unit="WEEK"`},
		{"auto partition unknown", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.auto-partition.speed": "1"} }, `unknown property "table.auto-partition.speed"`},
		{"auto partition key", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.auto-partition.key": "id"} }, `table.auto-partition.key="id" is not a partition key`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.base()
			tc.mutate(&s)
			_, err := BuildTable(s)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("message %q does not contain %q", err.Error(), tc.want)
			}
		})
	}
}

func TestBuildTableAccepts(t *testing.T) {
	tests := []struct {
		name   string
		base   func() TableSpec
		mutate func(s *TableSpec)
		check  func(t *testing.T, tb *Table)
	}{
		{"pk defaults", pkSpec, func(*TableSpec) {}, func(t *testing.T, tb *Table) {
			if tb.BucketCount != 1 || !slices.Equal(tb.BucketKeys, []string{"id"}) || tb.Schema().ID != 1 || tb.ID != 0 {
				t.Fatalf("table = %+v", tb)
			}
			if len(tb.Properties) != 0 {
				t.Fatalf("defaults were written into properties: %v", tb.Properties)
			}
		}},
		{"log defaults", logSpec, func(*TableSpec) {}, func(t *testing.T, tb *Table) {
			if len(tb.BucketKeys) != 0 || tb.BucketCount != 1 {
				t.Fatalf("table = %+v", tb)
			}
		}},
		{"log bucket key and partition", logSpec, func(s *TableSpec) {
			s.PartitionKeys = []string{"dt"}
			s.BucketKeys = []string{"id"}
			s.BucketCount = 4096
		}, nil},
		{"all properties", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{
				"table.log.ttl": "7d", "table.log.format": "arrow", "table.log.arrow.compression.type": "zstd",
				"table.log.arrow.compression.zstd.level": "22", "table.replication.factor": "5",
				"table.merge-engine": "aggregation", "fields.amount.agg": "sum", "fields.name.agg": "listagg",
				"fields.name.listagg-delimiter": ";", "fields.ok.agg": "bool_or", "fields.ts.agg": "max",
				"fields.ver.agg":        "last_value_ignore_nulls",
				"table.delete.behavior": "IGNORE", "table.changelog.image": "wal",
				"table.datalake.enabled": "true", "table.datalake.freshness": "3min", "table.datalake.format": "iceberg",
				"table.auto-partition.enabled": "true", "table.auto-partition.time-unit": "day",
				"table.auto-partition.num-precreate": "2", "table.auto-partition.num-retention": "7",
				"table.auto-partition.key": "dt",
				"owner":                    "team-a", "client.id": "x",
			}
		}, func(t *testing.T, tb *Table) {
			if len(tb.Properties) != 24 || tb.Properties["owner"] != "team-a" {
				t.Fatalf("properties not stored as given: %v", tb.Properties)
			}
		}},
		{"versioned", pkSpec, func(s *TableSpec) {
			s.Properties = map[string]string{"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "ts"}
		}, nil},
		{"first_row", pkSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.merge-engine": "FIRST_ROW"} }, nil},
		{"ttl go style", logSpec, func(s *TableSpec) { s.Properties = map[string]string{"table.log.ttl": "168h"} }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.base()
			tc.mutate(&s)
			in := maps.Clone(s.Properties)
			tb, err := BuildTable(s)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(tb.Properties, in) && in != nil {
				t.Fatalf("properties changed: %v -> %v", in, tb.Properties)
			}
			if tc.check != nil {
				tc.check(t, tb)
			}
		})
	}
}

func TestPartitionName(t *testing.T) {
	tb, err := BuildTable(TableSpec{Database: "d", Name: "t",
		Columns:       []record.Column{col("region", record.KindString, true), col("day", record.KindDate, true), col("n", record.KindInt, true)},
		PartitionKeys: []string{"region", "day", "n"}})
	if err != nil {
		t.Fatal(err)
	}
	name, err := PartitionName(tb, map[string]string{"day": "2026-01-02", "region": "eu", "n": "-3"})
	if err != nil || name != "eu$2026-01-02$-3" {
		t.Fatalf("PartitionName = %q, %v", name, err)
	}
	bad := []struct {
		values map[string]string
		want   string
	}{
		{map[string]string{"region": "eu", "day": "2026-01-02"}, "exactly one value"},
		{map[string]string{"region": "eu", "day": "2026-01-02", "x": "1"}, `key "n" is missing`},
		{map[string]string{"region": "e.u", "day": "2026-01-02", "n": "1"}, `value "e.u" of key "region"`},
		{map[string]string{"region": "eu", "day": "yesterday", "n": "1"}, `value "yesterday" of key "day" is not a valid DATE`},
		{map[string]string{"region": "eu", "day": "2026-01-02", "n": "1e3"}, `value "1e3" of key "n" is not a valid INT`},
	}
	for _, tc := range bad {
		if _, err := PartitionName(tb, tc.values); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PartitionName(%v) = %v, want ErrInvalid mentioning %q", tc.values, err, tc.want)
		}
	}
	un, _ := BuildTable(logSpec())
	if _, err := PartitionName(un, map[string]string{"a": "b"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("PartitionName on unpartitioned table = %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true},
		{"168h", 168 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true},
		{"30 min", 30 * time.Minute, true},
		{"500ms", 500 * time.Millisecond, true},
		{"10", 10 * time.Second, true},
		{"2 days", 48 * time.Hour, true},
		{"d", 0, false},
		{"7w", 0, false},
		{"99999999999999999d", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseDuration(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
