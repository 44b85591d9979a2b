package raftmeta

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := NewHCLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4})), hclog.Warn)
	l.Info("dropped info")
	l.Debug("dropped debug")
	n := l.Named("raft").With("group", "meta")
	n.Warn("kept warn", "peer", "2")
	n.Error("kept error")
	out := buf.String()
	if strings.Contains(out, "dropped") {
		t.Fatalf("below-level messages were logged:\n%s", out)
	}
	for _, want := range []string{`msg="kept warn"`, "logger=raft", "group=meta", "peer=2", "level=ERROR"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if l.IsInfo() || !l.IsWarn() || n.Name() != "raft" {
		t.Fatalf("IsInfo=%v IsWarn=%v Name=%q", l.IsInfo(), l.IsWarn(), n.Name())
	}
	l.SetLevel(hclog.Debug)
	buf.Reset()
	l.StandardLogger(nil).Print("via std logger")
	l.Debug("now kept")
	if !strings.Contains(buf.String(), "via std logger") || !strings.Contains(buf.String(), "now kept") {
		t.Fatalf("after SetLevel(Debug):\n%s", buf.String())
	}
}
