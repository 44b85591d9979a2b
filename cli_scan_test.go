package main

import (
	"strings"
	"testing"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
)

func TestParseFrom(t *testing.T) {
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
	} {
		from, ms, err := parseFrom(tt.in)
		if err != nil || from != tt.from || ms != tt.ms {
			t.Errorf("parseFrom(%q) = %v, %d, %v; want %v, %d", tt.in, from, ms, err, tt.from, tt.ms)
		}
	}
	for _, in := range []string{"", "yesterday", "ts:", "ts:2024-12-06", "ts:2024-12-06T16:00:00", "ts:12x"} {
		if _, _, err := parseFrom(in); err == nil || !strings.Contains(err.Error(), "ts:TIME") {
			t.Errorf("parseFrom(%q): err %v, want one naming the forms", in, err)
		}
	}
}
