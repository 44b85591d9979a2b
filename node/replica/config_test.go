package replica

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

func TestTuningDefaults(t *testing.T) {
	tu := RaftTuning{}.withDefaults()
	c, err := tu.raftConfig("n1", newHCLogger(nil, "raft"))
	if err != nil {
		t.Fatalf("default tuning does not validate: %v", err)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"TrailingLogs disables compaction", c.TrailingLogs == math.MaxUint64},
		{"CommitTimeout 2s", c.CommitTimeout == 2*time.Second},
		{"no buffered apply channel", !c.BatchApplyCh},
		{"snapshot on start", !c.NoSnapshotRestoreOnStart},
		{"MaxAppendEntries 256", c.MaxAppendEntries == 256},
		{"lease <= heartbeat", c.LeaderLeaseTimeout <= c.HeartbeatTimeout},
		{"8 MiB entries", tu.MaxEntryBytes == 8<<20},
	}
	for _, ck := range checks {
		if !ck.ok {
			t.Errorf("%s: config %+v", ck.name, c)
		}
	}
	bad := RaftTuning{HeartbeatTimeout: time.Second, LeaderLeaseTimeout: 2 * time.Second}.withDefaults()
	if _, err := bad.raftConfig("n1", newHCLogger(nil, "raft")); err == nil {
		t.Fatal("lease longer than heartbeat accepted")
	}
}

// TestLeaseOutlastsPump: whatever heartbeat timeout a node is configured
// with, the default lease spans at least two heartbeat-pump intervals (the
// node pumps every 2/5 of the heartbeat timeout), so one late pump does not
// make a healthy leader step down. A fixed 1 s lease broke this for heartbeat
// timeouts above 2.5 s: every leader stepped down between two pumps.
func TestLeaseOutlastsPump(t *testing.T) {
	for _, hb := range []time.Duration{250 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second} {
		tu := RaftTuning{HeartbeatTimeout: hb, ElectionTimeout: hb}.withDefaults()
		if _, err := tu.raftConfig("n1", newHCLogger(nil, "raft")); err != nil {
			t.Fatalf("heartbeat %v: default tuning does not validate: %v", hb, err)
		}
		if pump := hb * 2 / 5; tu.LeaderLeaseTimeout < 2*pump {
			t.Errorf("heartbeat %v: lease %v is shorter than two pump intervals (%v)", hb, tu.LeaderLeaseTimeout, 2*pump)
		}
	}
}

func TestHCLogForwardsWarnings(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLogger(slog.New(slog.NewTextHandler(&buf, nil)), "raft")
	l.Info("chatty info", "k", 1)
	l.Debug("chatty debug")
	l.Warn("disk slow", "ms", 42)
	l.Error("lost quorum")
	out := buf.String()
	for _, want := range []string{"level=WARN msg=\"disk slow\"", "ms=42", "level=ERROR msg=\"lost quorum\""} {
		if !strings.Contains(out, want) {
			t.Errorf("slog output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "chatty") {
		t.Errorf("info/debug forwarded:\n%s", out)
	}
}
