package membership

import (
	"bytes"
	"context"
	"log/slog"
)

// slogWriter turns memberlist's "[LEVEL] memberlist: message" lines into
// slog records.
// probeRefusal starts memberlist's warning when NotifyAlive refuses the
// alive message of a Probe's throwaway member (probeNamePrefix).
var probeRefusal = []byte("ignoring alive message for '" + probeNamePrefix)

type slogWriter struct {
	logger  *slog.Logger
	verbose bool // pass DEBUG and INFO too
}

func (w *slogWriter) Write(p []byte) (int, error) {
	n := len(p)
	for line := range bytes.Lines(p) {
		w.writeLine(bytes.TrimRight(line, "\r\n"))
	}
	return n, nil
}

func (w *slogWriter) writeLine(line []byte) {
	if len(line) == 0 {
		return
	}
	level := slog.LevelInfo
	if line[0] == '[' {
		if end := bytes.IndexByte(line, ']'); end > 0 {
			switch string(line[1:end]) {
			case "TRACE", "DEBUG":
				level = slog.LevelDebug
			case "INFO":
				level = slog.LevelInfo
			case "WARN":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			}
			line = bytes.TrimLeft(line[end+1:], " ")
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	if level == slog.LevelWarn && bytes.HasPrefix(line, probeRefusal) {
		// A joining node's Probe, refused by NotifyAlive by design.
		level = slog.LevelDebug
	}
	if level < slog.LevelWarn && !w.verbose {
		return
	}
	w.logger.Log(context.Background(), level, string(line), "component", "memberlist")
}
