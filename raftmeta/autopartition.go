package raftmeta

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TimeUnit is the span of time one auto-created partition covers.
type TimeUnit uint8

// The time units of table.auto-partition.time-unit. The zero TimeUnit is
// not a unit.
const (
	TimeUnitYear TimeUnit = iota + 1
	TimeUnitQuarter
	TimeUnitMonth
	TimeUnitDay
	TimeUnitHour
)

var timeUnitNames = [...]string{TimeUnitYear: "YEAR", TimeUnitQuarter: "QUARTER", TimeUnitMonth: "MONTH", TimeUnitDay: "DAY", TimeUnitHour: "HOUR"}

// String is the unit's property value: YEAR, QUARTER, MONTH, DAY or HOUR.
func (u TimeUnit) String() string {
	if u == 0 || int(u) >= len(timeUnitNames) {
		return "TimeUnit(" + strconv.Itoa(int(u)) + ")"
	}
	return timeUnitNames[u]
}

// AutoPartition is a table's auto-partitioning settings, parsed.
type AutoPartition struct {
	// Unit is the span of one partition (default DAY).
	Unit TimeUnit
	// Precreate is how many partitions exist ahead, counting the current
	// one (default 2).
	Precreate int
	// Retention is how many partitions before the current one are kept
	// (default 7).
	Retention int
	// Zone is where the current time is cut into units (default UTC).
	Zone *time.Location
	// Key is the partition key whose value is the time.
	Key string
}

// AutoPartitionOf returns t's settings and whether auto-partitioning is
// enabled. A table without table.auto-partition.enabled=true gets the zero
// AutoPartition and false; an enabled one is checked as BuildTable checks
// it, so a table stored before a rule was added may fail here. Errors wrap
// ErrInvalid.
func AutoPartitionOf(t *Table) (AutoPartition, bool, error) {
	const prefix = "table.auto-partition."
	full := t.FullName()
	if v, ok := t.Properties[prefix+"enabled"]; !ok || !strings.EqualFold(v, "true") {
		if ok {
			if err := boolProp(full, prefix+"enabled", v); err != nil {
				return AutoPartition{}, false, err
			}
		}
		return AutoPartition{}, false, nil
	}
	for _, key := range slices.Sorted(maps.Keys(t.Properties)) {
		if strings.HasPrefix(key, prefix) {
			if err := checkAutoPartition(full, t, key, t.Properties[key]); err != nil {
				return AutoPartition{}, false, err
			}
		}
	}
	ap := AutoPartition{Unit: TimeUnitDay, Precreate: 2, Retention: 7, Zone: time.UTC}
	if v, ok := t.Properties[prefix+"time-unit"]; ok {
		for u, name := range timeUnitNames {
			if name != "" && strings.EqualFold(v, name) {
				ap.Unit = TimeUnit(u)
			}
		}
	}
	// Checked above: the values parse.
	if v, ok := t.Properties[prefix+"num-precreate"]; ok {
		ap.Precreate, _ = strconv.Atoi(strings.TrimSpace(v))
	}
	if v, ok := t.Properties[prefix+"num-retention"]; ok {
		ap.Retention, _ = strconv.Atoi(strings.TrimSpace(v))
	}
	if v, ok := t.Properties[prefix+"time-zone"]; ok {
		loc, err := autoPartitionZone(full, v)
		if err != nil {
			return AutoPartition{}, false, err
		}
		ap.Zone = loc
	}
	key, err := autoPartitionTimeKey(full, t)
	if err != nil {
		return AutoPartition{}, false, err
	}
	ap.Key = key
	return ap, true, nil
}

// PlanAutoPartitions returns the partitions to create (their values maps,
// in time order) and the names of the partitions to drop (sorted by time,
// then name), given the existing partitions and now.
//
// Creation: with exactly one partition key, the Precreate units starting
// with the one holding now, skipping those that exist; with several keys
// nothing (the other values are unknown). Dropping: partitions whose
// time-key value is a name in ap.Unit's format (YEAR 2024, QUARTER 20244,
// MONTH 202411, DAY 20241111, HOUR 2024111110) for a unit starting before
// the current unit minus Retention units; other values are never dropped.
// Partitions of another table (TableID != t.ID) are ignored. A Key that is
// not a partition key of t or an unknown Unit plans nothing.
func PlanAutoPartitions(t *Table, ap AutoPartition, existing []*Partition, now time.Time) (create []map[string]string, drop []string) {
	ki := slices.Index(t.PartitionKeys, ap.Key)
	if ki < 0 || ap.Unit < TimeUnitYear || ap.Unit > TimeUnitHour {
		return nil, nil
	}
	if ap.Zone == nil {
		ap.Zone = time.UTC
	}
	cur := ap.unitStart(now)

	names := make(map[string]bool, len(existing))
	type victim struct{ value, name string }
	var old []victim
	cutoff := ap.format(ap.step(cur, -ap.Retention))
	for _, p := range existing {
		if p == nil || p.TableID != t.ID {
			continue
		}
		names[p.Name] = true
		v, ok := p.Values[ap.Key]
		if !ok && p.Values == nil {
			if parts := strings.Split(p.Name, "$"); len(parts) == len(t.PartitionKeys) {
				v, ok = parts[ki], true
			}
		}
		// Names of one unit have one width of digits: their order as
		// strings is their order in time.
		if ok && ap.parses(v) && v < cutoff {
			old = append(old, victim{v, p.Name})
		}
	}
	slices.SortFunc(old, func(a, b victim) int { return cmp.Or(cmp.Compare(a.value, b.value), cmp.Compare(a.name, b.name)) })
	for _, o := range old {
		drop = append(drop, o.name)
	}

	if len(t.PartitionKeys) == 1 {
		for i := range ap.Precreate {
			values := map[string]string{ap.Key: ap.format(ap.step(cur, i))}
			name, err := PartitionName(t, values)
			if err != nil || names[name] {
				continue // exists, or a value the key cannot hold
			}
			names[name] = true // HOUR: a repeated hour at the end of DST
			create = append(create, values)
		}
	}
	return create, drop
}

// unitStart returns the start of the unit holding now, in ap.Zone. For
// YEAR to DAY it is the civil date of the start in UTC (calendar
// arithmetic on it is immune to DST); for HOUR it is the instant.
func (ap AutoPartition) unitStart(now time.Time) time.Time {
	l := now.In(ap.Zone)
	y, m, d := l.Date()
	switch ap.Unit {
	case TimeUnitYear:
		return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
	case TimeUnitQuarter:
		return time.Date(y, (m-1)/3*3+1, 1, 0, 0, 0, 0, time.UTC)
	case TimeUnitMonth:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	case TimeUnitDay:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	}
	// The local hour starts the local minutes and seconds ago (whatever
	// the zone's offset, half hours included).
	return l.Add(-(time.Duration(l.Minute())*time.Minute + time.Duration(l.Second())*time.Second + time.Duration(l.Nanosecond())))
}

// step returns the start of the unit n units after the one starting at
// start (a unitStart result).
func (ap AutoPartition) step(start time.Time, n int) time.Time {
	switch ap.Unit {
	case TimeUnitYear:
		return start.AddDate(n, 0, 0)
	case TimeUnitQuarter:
		return start.AddDate(0, 3*n, 0)
	case TimeUnitMonth:
		return start.AddDate(0, n, 0)
	case TimeUnitDay:
		return start.AddDate(0, 0, n)
	}
	return start.Add(time.Duration(n) * time.Hour)
}

// format returns the partition value of the unit starting at start.
func (ap AutoPartition) format(start time.Time) string {
	switch ap.Unit {
	case TimeUnitYear:
		return start.Format("2006")
	case TimeUnitQuarter:
		return start.Format("2006") + strconv.Itoa((int(start.Month())-1)/3+1)
	case TimeUnitMonth:
		return start.Format("200601")
	case TimeUnitDay:
		return start.Format("20060102")
	}
	return start.In(ap.Zone).Format("2006010215")
}

// parses reports whether v is a partition value in ap.Unit's format.
func (ap AutoPartition) parses(v string) bool {
	var layout string
	switch ap.Unit {
	case TimeUnitYear:
		layout = "2006"
	case TimeUnitQuarter:
		return len(v) == 5 && allDigits(v[:4]) && v[4] >= '1' && v[4] <= '4'
	case TimeUnitMonth:
		layout = "200601"
	case TimeUnitDay:
		layout = "20060102"
	case TimeUnitHour:
		layout = "2006010215"
	default:
		return false
	}
	if len(v) != len(layout) || !allDigits(v) {
		return false
	}
	_, err := time.Parse(layout, v)
	return err == nil
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
