package main

import (
	"strings"
	"testing"
	"time"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
)

func TestParseFrom(t *testing.T) {
	now := time.UnixMilli(1733500800000)
	for _, tt := range []struct {
		in   string
		from flussv1.ScanRequest_From
		ms   int64
	}{
		{"earliest", flussv1.ScanRequest_EARLIEST, 0},
		{"LATEST", flussv1.ScanRequest_LATEST, 0},
		{"ts:1733500800000", flussv1.ScanRequest_TIMESTAMP, 1733500800000},
		{"ts:0", flussv1.ScanRequest_TIMESTAMP, 0},
		{"ts:2024-12-06T16:00:00Z", flussv1.ScanRequest_TIMESTAMP, 1733500800000},
		{"TS:2024-12-06T17:00:00.250+01:00", flussv1.ScanRequest_TIMESTAMP, 1733500800250},
		{"ago:15m", flussv1.ScanRequest_TIMESTAMP, 1733500800000 - 15*60*1000},
		{"AGO:1h30m", flussv1.ScanRequest_TIMESTAMP, 1733500800000 - 90*60*1000},
		{"ago:0s", flussv1.ScanRequest_TIMESTAMP, 1733500800000},
	} {
		from, ms, err := parseFromAt(tt.in, now)
		if err != nil || from != tt.from || ms != tt.ms {
			t.Errorf("parseFrom(%q) = %v, %d, %v; want %v, %d", tt.in, from, ms, err, tt.from, tt.ms)
		}
	}
	for _, in := range []string{"", "yesterday", "ts:", "ts:2024-12-06", "ts:2024-12-06T16:00:00", "ts:12x", "ago:", "ago:-5m", "ago:15"} {
		if _, _, err := parseFromAt(in, now); err == nil || !strings.Contains(err.Error(), "ago:DURATION") {
			t.Errorf("parseFrom(%q): err %v, want one naming the forms", in, err)
		}
	}
}
