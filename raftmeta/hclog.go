package raftmeta

import (
	"context"
	"io"
	"log"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// slogAdapter is an hclog.Logger that forwards to slog, so hashicorp/raft
// logs through the node's logger. Messages below the level are dropped
// before formatting.
type slogAdapter struct {
	l     *slog.Logger
	name  string
	args  []any
	level *atomic.Int32 // hclog.Level, shared by derived loggers
}

// NewHCLogger returns an hclog.Logger writing to l at level and above
// (hclog.Warn keeps raft's chatter out of the node's log).
func NewHCLogger(l *slog.Logger, level hclog.Level) hclog.Logger {
	if l == nil {
		l = slog.Default()
	}
	lv := new(atomic.Int32)
	lv.Store(int32(level))
	return &slogAdapter{l: l, level: lv}
}

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Info:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (a *slogAdapter) enabled(level hclog.Level) bool {
	return level >= hclog.Level(a.level.Load()) && level != hclog.Off
}

func (a *slogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if !a.enabled(level) {
		return
	}
	all := make([]any, 0, len(a.args)+len(args)+2)
	if a.name != "" {
		all = append(all, "logger", a.name)
	}
	all = append(all, a.args...)
	all = append(all, args...)
	a.l.Log(context.Background(), toSlog(level), msg, all...)
}

func (a *slogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *slogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *slogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *slogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *slogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *slogAdapter) IsTrace() bool                 { return a.enabled(hclog.Trace) }
func (a *slogAdapter) IsDebug() bool                 { return a.enabled(hclog.Debug) }
func (a *slogAdapter) IsInfo() bool                  { return a.enabled(hclog.Info) }
func (a *slogAdapter) IsWarn() bool                  { return a.enabled(hclog.Warn) }
func (a *slogAdapter) IsError() bool                 { return a.enabled(hclog.Error) }
func (a *slogAdapter) ImpliedArgs() []any            { return a.args }
func (a *slogAdapter) Name() string                  { return a.name }
func (a *slogAdapter) SetLevel(level hclog.Level)    { a.level.Store(int32(level)) }
func (a *slogAdapter) GetLevel() hclog.Level         { return hclog.Level(a.level.Load()) }

func (a *slogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.args = append(append([]any(nil), a.args...), args...)
	return &c
}

func (a *slogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (a *slogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *slogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *slogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return stdWriter{a}
}

type stdWriter struct{ a *slogAdapter }

func (w stdWriter) Write(p []byte) (int, error) {
	msg := string(p)
	if n := len(msg); n > 0 && msg[n-1] == '\n' {
		msg = msg[:n-1]
	}
	w.a.Log(hclog.Info, msg)
	return len(p), nil
}
