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

// apSpec is a log table with STRING keys region and dt, a DATE day and an
// INT n, partitioned by keys, with the given properties.
func apSpec(keys []string, props map[string]string) TableSpec {
	return TableSpec{
		Database: "db", Name: "ap",
		Columns: []record.Column{
			col("region", record.KindString, true), col("dt", record.KindString, true),
			col("day", record.KindDate, true), col("n", record.KindInt, true), col("v", record.KindDouble, true),
		},
		PartitionKeys: keys,
		Properties:    props,
	}
}

func apTable(t *testing.T, keys []string, props map[string]string) *Table {
	t.Helper()
	tb, err := BuildTable(apSpec(keys, props))
	if err != nil {
		t.Fatal(err)
	}
	tb.ID = 7
	return tb
}

// parts returns partitions of tb named names; values come from the names.
func parts(tb *Table, names ...string) []*Partition {
	out := make([]*Partition, len(names))
	for i, n := range names {
		vs := strings.Split(n, "$")
		values := map[string]string{}
		for j, k := range tb.PartitionKeys {
			values[k] = vs[j]
		}
		out[i] = &Partition{ID: int64(100 + i), TableID: tb.ID, Name: n, Values: values}
	}
	return out
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestBuildTableAutoPartitionRules(t *testing.T) {
	on := func(kv ...string) map[string]string {
		m := map[string]string{"table.auto-partition.enabled": "true"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	bad := []struct {
		name string
		spec TableSpec
		want string
	}{
		{"unknown zone", apSpec([]string{"dt"}, on("table.auto-partition.time-zone", "Mars/Olympus")), `table.auto-partition.time-zone="Mars/Olympus": not a known IANA time zone`},
		{"unknown zone while disabled", apSpec([]string{"dt"}, map[string]string{"table.auto-partition.time-zone": "UTC+8"}), `time-zone="UTC+8"`},
		{"empty zone", apSpec([]string{"dt"}, on("table.auto-partition.time-zone", "")), `time-zone="": want an IANA time zone`},
		{"local zone", apSpec([]string{"dt"}, on("table.auto-partition.time-zone", "Local")), `time-zone="Local": want an IANA time zone`},
		{"several keys without key", apSpec([]string{"region", "dt"}, on()), "several partition keys [region dt] needs table.auto-partition.key"},
		{"several keys, key not a partition key", apSpec([]string{"region", "dt"}, on("table.auto-partition.key", "v")), `table.auto-partition.key="v" is not a partition key`},
		{"DATE time key", apSpec([]string{"day"}, on()), `auto-partition time key "day" is DATE; with table.auto-partition.enabled=true it must be STRING`},
		{"INT time key named", apSpec([]string{"region", "n"}, on("table.auto-partition.key", "n")), `auto-partition time key "n" is INT`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildTable(tc.spec)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	good := []struct {
		name string
		spec TableSpec
	}{
		{"one key, zone", apSpec([]string{"dt"}, on("table.auto-partition.time-zone", "Asia/Tokyo"))},
		{"several keys with key", apSpec([]string{"region", "dt", "n"}, on("table.auto-partition.key", "dt"))},
		{"disabled: several keys, no key", apSpec([]string{"region", "dt"}, map[string]string{"table.auto-partition.enabled": "false"})},
		{"disabled: DATE key", apSpec([]string{"day"}, map[string]string{"table.auto-partition.time-unit": "MONTH"})},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := BuildTable(tc.spec); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAutoPartitionOf(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		keys  []string
		props map[string]string
		want  AutoPartition
		on    bool
	}{
		{"absent", []string{"dt"}, nil, AutoPartition{}, false},
		{"disabled", []string{"dt"}, map[string]string{"table.auto-partition.enabled": "FALSE", "table.auto-partition.time-unit": "HOUR"}, AutoPartition{}, false},
		{"defaults", []string{"dt"}, map[string]string{"table.auto-partition.enabled": "True"},
			AutoPartition{Unit: TimeUnitDay, Precreate: 2, Retention: 7, Zone: time.UTC, Key: "dt"}, true},
		{"all set", []string{"region", "dt"}, map[string]string{
			"table.auto-partition.enabled": "true", "table.auto-partition.time-unit": "quarter",
			"table.auto-partition.num-precreate": " 0", "table.auto-partition.num-retention": "12",
			"table.auto-partition.time-zone": "Asia/Tokyo", "table.auto-partition.key": "dt",
		}, AutoPartition{Unit: TimeUnitQuarter, Precreate: 0, Retention: 12, Zone: tokyo, Key: "dt"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, on, err := AutoPartitionOf(apTable(t, tc.keys, tc.props))
			if err != nil || on != tc.on {
				t.Fatalf("AutoPartitionOf = %+v, %v, %v; want enabled=%v", got, on, err, tc.on)
			}
			if got.Unit != tc.want.Unit || got.Precreate != tc.want.Precreate || got.Retention != tc.want.Retention ||
				got.Key != tc.want.Key || got.Zone.String() != tc.want.Zone.String() {
				t.Fatalf("AutoPartitionOf = %+v, want %+v", got, tc.want)
			}
		})
	}

	// A table stored before a rule existed is reported, not planned.
	tb := apTable(t, []string{"dt"}, map[string]string{"table.auto-partition.enabled": "true"})
	for k, v := range map[string]string{"table.auto-partition.time-zone": "Nowhere/City", "table.auto-partition.num-retention": "-1", "table.auto-partition.time-unit": "WEEK"} {
		bad := *tb
		bad.Properties = maps.Clone(tb.Properties)
		bad.Properties[k] = v
		if _, on, err := AutoPartitionOf(&bad); !errors.Is(err, ErrInvalid) || on || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: AutoPartitionOf = %v, %v; want ErrInvalid naming %s", k, v, on, err, k)
		}
	}
	bad := *tb
	bad.Properties = map[string]string{"table.auto-partition.enabled": "yes"}
	if _, on, err := AutoPartitionOf(&bad); !errors.Is(err, ErrInvalid) || on {
		t.Errorf("enabled=yes: AutoPartitionOf = %v, %v; want ErrInvalid", on, err)
	}
	day := apTable(t, []string{"day"}, nil)
	day.Properties = map[string]string{"table.auto-partition.enabled": "true"}
	if _, on, err := AutoPartitionOf(day); !errors.Is(err, ErrInvalid) || on || !strings.Contains(err.Error(), "must be STRING") {
		t.Errorf("DATE key: AutoPartitionOf = %v, %v; want ErrInvalid", on, err)
	}

	if s := TimeUnitHour.String(); s != "HOUR" {
		t.Errorf("TimeUnitHour.String() = %q", s)
	}
	if s := TimeUnit(0).String(); s != "TimeUnit(0)" {
		t.Errorf("TimeUnit(0).String() = %q", s)
	}
}

func TestPlanAutoPartitions(t *testing.T) {
	tests := []struct {
		name       string
		keys       []string // default [dt]
		unit, zone string
		precreate  string
		retention  string
		existing   []string
		now        string
		create     []string // names
		drop       []string
	}{
		// Names around boundaries.
		{name: "year rollover", unit: "YEAR", precreate: "3", now: "2024-12-31T23:59:59Z", create: []string{"2024", "2025", "2026"}},
		{name: "quarter Q4 to Q1", unit: "QUARTER", precreate: "3", now: "2024-12-15T00:00:00Z", create: []string{"20244", "20251", "20252"}},
		{name: "quarter last second of Q1", unit: "QUARTER", precreate: "2", now: "2024-03-31T23:59:59Z", create: []string{"20241", "20242"}},
		{name: "quarter first second of Q2", unit: "QUARTER", precreate: "1", now: "2024-04-01T00:00:00Z", create: []string{"20242"}},
		{name: "month Dec to Jan", unit: "MONTH", precreate: "3", now: "2024-12-31T12:00:00Z", create: []string{"202412", "202501", "202502"}},
		{name: "month from the 31st", unit: "MONTH", precreate: "3", now: "2024-01-31T12:00:00Z", create: []string{"202401", "202402", "202403"}},
		{name: "day leap year", unit: "DAY", precreate: "3", now: "2024-02-28T12:00:00Z", create: []string{"20240228", "20240229", "20240301"}},
		{name: "day common year", unit: "day", precreate: "2", now: "2023-02-28T12:00:00Z", create: []string{"20230228", "20230301"}},
		{name: "day Dec to Jan", unit: "DAY", precreate: "2", now: "2024-12-31T23:59:00Z", create: []string{"20241231", "20250101"}},
		{name: "hour 23 rollover", unit: "HOUR", precreate: "3", now: "2024-12-31T23:30:00Z", create: []string{"2024123123", "2025010100", "2025010101"}},
		{name: "hour leap day", unit: "hour", precreate: "2", now: "2024-02-28T23:00:00Z", create: []string{"2024022823", "2024022900"}},
		{name: "default unit DAY, precreate 2", now: "2024-11-11T10:00:00Z", create: []string{"20241111", "20241112"}},

		// Time zones.
		{name: "day in Tokyo", unit: "DAY", zone: "Asia/Tokyo", now: "2024-11-11T23:30:00Z", create: []string{"20241112", "20241113"}},
		{name: "day in Los Angeles", unit: "DAY", zone: "America/Los_Angeles", precreate: "1", now: "2024-11-11T05:00:00Z", create: []string{"20241110"}},
		{name: "year in Tokyo", unit: "YEAR", zone: "Asia/Tokyo", precreate: "1", now: "2024-12-31T15:00:00Z", create: []string{"2025"}},
		{name: "hour in a half-hour zone", unit: "HOUR", zone: "Asia/Kolkata", now: "2024-11-11T18:45:00Z", create: []string{"2024111200", "2024111201"}},
		{name: "day over spring DST", unit: "DAY", zone: "America/New_York", precreate: "3", now: "2024-03-10T04:30:00Z", create: []string{"20240309", "20240310", "20240311"}},
		{name: "hour over spring DST (02 does not exist)", unit: "HOUR", zone: "America/New_York", precreate: "3", now: "2024-03-10T06:30:00Z", create: []string{"2024031001", "2024031003", "2024031004"}},
		{name: "hour over autumn DST (01 twice)", unit: "HOUR", zone: "America/New_York", precreate: "3", now: "2024-11-03T05:30:00Z", create: []string{"2024110301", "2024110302"}},
		{name: "day over autumn DST", unit: "DAY", zone: "America/New_York", precreate: "3", now: "2024-11-03T04:30:00Z", create: []string{"20241103", "20241104", "20241105"}},
		{name: "retention over the 25-hour day", unit: "DAY", zone: "America/New_York", precreate: "0", retention: "1", now: "2024-11-04T05:30:00Z",
			existing: []string{"20241102", "20241103", "20241104"}, drop: []string{"20241102"}},

		// Precreate skips existing partitions.
		{name: "precreate skips existing", unit: "DAY", precreate: "3", now: "2024-11-11T00:00:00Z",
			existing: []string{"20241111", "20241113"}, create: []string{"20241112"}},
		{name: "precreate all exist", unit: "DAY", precreate: "2", now: "2024-11-11T00:00:00Z", existing: []string{"20241111", "20241112"}},
		{name: "precreate 0", unit: "MONTH", precreate: "0", now: "2024-11-11T00:00:00Z"},

		// Retention.
		{name: "retention day", unit: "DAY", precreate: "3", retention: "3", now: "2024-11-11T08:00:00Z",
			existing: []string{"20241101", "20241107", "20241108", "20241109", "20241110", "20241111", "manual", "20241399", "2024110", "202411070", "20991231"},
			create:   []string{"20241112", "20241113"}, drop: []string{"20241101", "20241107"}},
		{name: "retention 0 drops all history", unit: "DAY", precreate: "1", retention: "0", now: "2024-11-11T08:00:00Z",
			existing: []string{"20241110", "20241111", "20241112"}, drop: []string{"20241110"}},
		{name: "retention month over new year", unit: "MONTH", precreate: "1", retention: "2", now: "2025-01-15T00:00:00Z",
			existing: []string{"202409", "202410", "202411", "202412", "202501", "20241015", "202413"}, drop: []string{"202409", "202410"}},
		{name: "retention quarter", unit: "QUARTER", precreate: "1", retention: "1", now: "2025-02-01T00:00:00Z",
			existing: []string{"20243", "20244", "20251", "20245", "20240"}, drop: []string{"20243"}},
		{name: "retention year", unit: "YEAR", precreate: "1", retention: "1", now: "2025-06-01T00:00:00Z",
			existing: []string{"2022", "2023", "2024", "2025", "999"}, drop: []string{"2022", "2023"}},
		{name: "retention hour over midnight", unit: "HOUR", precreate: "1", retention: "2", now: "2024-11-11T00:10:00Z",
			existing: []string{"2024111020", "2024111021", "2024111022", "2024111023", "2024111100", "2024111024"}, drop: []string{"2024111020", "2024111021"}},
		{name: "retention in the zone", unit: "DAY", zone: "Asia/Tokyo", precreate: "0", retention: "1", now: "2024-11-11T23:30:00Z",
			existing: []string{"20241110", "20241111", "20241112"}, drop: []string{"20241110"}},
		{name: "retention beyond year 0", unit: "YEAR", precreate: "0", retention: "1048576", now: "2024-11-11T00:00:00Z", existing: []string{"0001", "2000"}},

		// Several partition keys: retention only, on the time key.
		{name: "multi-key", keys: []string{"region", "dt"}, unit: "DAY", precreate: "3", retention: "1", now: "2024-11-11T08:00:00Z",
			existing: []string{"us$20241109", "eu$20241110", "eu$20241109", "eu$manual", "20241101$20241111", "eu$20241111"},
			drop:     []string{"eu$20241109", "us$20241109"}},
		{name: "multi-key, time key first", keys: []string{"dt", "region"}, unit: "MONTH", precreate: "3", retention: "0", now: "2024-11-11T08:00:00Z",
			existing: []string{"202410$eu", "202411$eu", "manual$202401"}, drop: []string{"202410$eu"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := tc.keys
			props := map[string]string{"table.auto-partition.enabled": "true"}
			if len(keys) == 0 {
				keys = []string{"dt"}
			} else {
				props["table.auto-partition.key"] = "dt"
			}
			for k, v := range map[string]string{"time-unit": tc.unit, "time-zone": tc.zone, "num-precreate": tc.precreate, "num-retention": tc.retention} {
				if v != "" {
					props["table.auto-partition."+k] = v
				}
			}
			tb := apTable(t, keys, props)
			ap, on, err := AutoPartitionOf(tb)
			if err != nil || !on {
				t.Fatalf("AutoPartitionOf = %v, %v", on, err)
			}
			existing := parts(tb, tc.existing...)
			create, drop := PlanAutoPartitions(tb, ap, existing, at(tc.now))
			var names []string
			for _, v := range create {
				name, err := PartitionName(tb, v)
				if err != nil {
					t.Fatalf("created values %v: %v", v, err)
				}
				names = append(names, name)
			}
			if !slices.Equal(names, tc.create) {
				t.Errorf("create = %q, want %q", names, tc.create)
			}
			if !slices.Equal(drop, tc.drop) {
				t.Errorf("drop = %q, want %q", drop, tc.drop)
			}
			// The plan does not depend on the order of existing.
			slices.Reverse(existing)
			create2, drop2 := PlanAutoPartitions(tb, ap, existing, at(tc.now))
			if !slices.EqualFunc(create, create2, maps.Equal) || !slices.Equal(drop, drop2) {
				t.Errorf("reversed existing: plan %v %q, want %v %q", create2, drop2, create, drop)
			}
		})
	}
}

func TestPlanAutoPartitionsEdges(t *testing.T) {
	tb := apTable(t, []string{"dt"}, map[string]string{"table.auto-partition.enabled": "true", "table.auto-partition.num-retention": "1"})
	ap, _, err := AutoPartitionOf(tb)
	if err != nil {
		t.Fatal(err)
	}
	now := at("2024-11-11T08:00:00Z")

	// Partitions of another table, nil entries and a partition stored
	// without values (name only) of the right table.
	other := parts(tb, "20241101", "20241111")
	for _, p := range other {
		p.TableID = 8
	}
	noValues := &Partition{ID: 1, TableID: tb.ID, Name: "20241102"}
	create, drop := PlanAutoPartitions(tb, ap, append(other, nil, noValues), now)
	if !slices.Equal(drop, []string{"20241102"}) || len(create) != 2 || create[0]["dt"] != "20241111" {
		t.Errorf("plan = %v %q, want both days created and only 20241102 dropped", create, drop)
	}

	// Settings that do not fit the table plan nothing.
	for _, bad := range []AutoPartition{
		{Unit: TimeUnitDay, Precreate: 2, Retention: 0, Key: "region"},
		{Unit: 0, Precreate: 2, Key: "dt"},
		{Unit: TimeUnitHour + 1, Precreate: 2, Key: "dt"},
	} {
		if c, d := PlanAutoPartitions(tb, bad, parts(tb, "20241101"), now); c != nil || d != nil {
			t.Errorf("PlanAutoPartitions(%+v) = %v %q, want nothing", bad, c, d)
		}
	}

	// A nil zone is UTC.
	ap.Zone = nil
	if c, _ := PlanAutoPartitions(tb, ap, nil, at("2024-11-11T23:30:00Z")); len(c) != 2 || c[0]["dt"] != "20241111" {
		t.Errorf("nil zone: create = %v", c)
	}

	// The values maps are fresh: editing one does not change another plan.
	c1, _ := PlanAutoPartitions(tb, ap, nil, now)
	c1[0]["dt"] = "x"
	if c2, _ := PlanAutoPartitions(tb, ap, nil, now); c2[0]["dt"] != "20241111" {
		t.Errorf("plans share values maps: %v", c2)
	}
}
