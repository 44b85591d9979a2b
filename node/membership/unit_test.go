package membership

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestEventQueueDropsOldest(t *testing.T) {
	q := newEventQueue(3)
	for i := int32(1); i <= 5; i++ {
		q.push(Event{Type: EventJoin, Member: Member{Meta: Meta{ID: i}}})
	}
	if got := q.dropped.Load(); got != 2 {
		t.Fatalf("dropped = %d, want 2", got)
	}
	q.close()
	q.push(Event{Type: EventJoin}) // after close: ignored, no panic
	var ids []int32
	for ev := range q.ch {
		ids = append(ids, ev.Member.ID)
	}
	if want := []int32{3, 4, 5}; !equalIDs(ids, want) {
		t.Fatalf("delivered %v, want the newest %v", ids, want)
	}
}

func TestEventQueueConcurrentProducers(t *testing.T) {
	q := newEventQueue(8)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				q.push(Event{Type: EventUpdate})
			}
		})
	}
	received := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range q.ch {
			received++
		}
	}()
	wg.Wait()
	q.close()
	<-done
	if uint64(received)+q.dropped.Load() != 400 {
		t.Fatalf("received %d + dropped %d != 400 pushed", received, q.dropped.Load())
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSlogWriter(t *testing.T) {
	cases := []struct {
		name    string
		verbose bool
		in      string
		want    string // substring of the output; "" means nothing logged
	}{
		{"warn passes", false, "[WARN] memberlist: Refuting a suspect message\n", "level=WARN msg=\"Refuting a suspect message\" component=memberlist"},
		{"err passes", false, "[ERR] memberlist: Conflicting address\n", "level=ERROR msg=\"Conflicting address\""},
		{"info filtered", false, "[INFO] memberlist: Marking 3 as failed\n", ""},
		{"debug filtered", false, "[DEBUG] memberlist: Stream connection\n", ""},
		{"info verbose", true, "[INFO] memberlist: Marking 3 as failed\n", "level=INFO msg=\"Marking 3 as failed\""},
		{"no level", true, "plain line\n", "level=INFO msg=\"plain line\""},
		{"a probe's refused alive message is no warning", false,
			"[WARN] memberlist: ignoring alive message for 'probe-ABC': node \"probe-ABC\" at 127.0.0.1:1: membership: corrupt node meta: empty\n", ""},
		{"a probe's refused alive message, verbose", true,
			"[WARN] memberlist: ignoring alive message for 'probe-ABC': corrupt node meta\n", "level=DEBUG msg=\"ignoring alive message for 'probe-ABC'"},
		{"another refused alive message warns", false,
			"[WARN] memberlist: ignoring alive message for '7': node id in use\n", "level=WARN msg=\"ignoring alive message for '7'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			w := &slogWriter{logger: l, verbose: c.verbose}
			n, err := w.Write([]byte(c.in))
			if err != nil || n != len(c.in) {
				t.Fatalf("Write = %d, %v", n, err)
			}
			out := buf.String()
			if c.want == "" && out != "" || !strings.Contains(out, c.want) {
				t.Fatalf("logged %q, want %q", out, c.want)
			}
		})
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	good := func() Config {
		return Config{BindAddr: "127.0.0.1:0", Profile: ProfileLocal, Meta: Meta{ID: 1}}
	}
	cases := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"key length", func(c *Config) { c.SecretKey = []byte("short") }, "16, 24 or 32"},
		{"profile", func(c *Config) { c.Profile = "wan" }, "profile"},
		{"id", func(c *Config) { c.Meta.ID = 0 }, "node id must be > 0"},
		{"state", func(c *Config) { c.Meta.State = "busy" }, "state \"busy\""},
		{"bind host", func(c *Config) { c.BindAddr = "localhost:0" }, "must be an IP"},
		{"bind port", func(c *Config) { c.BindAddr = "127.0.0.1:99999" }, "0..65535"},
		{"bind form", func(c *Config) { c.BindAddr = "127.0.0.1" }, "bind address"},
		{"meta size", func(c *Config) { c.Meta.Version = strings.Repeat("x", 600) }, "too large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good()
			c.change(&cfg)
			m, err := Start(cfg)
			if err == nil {
				_ = m.Shutdown()
				t.Fatal("Start accepted a bad config")
			}
			if !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrMetaTooLarge) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %q, want it to mention %q", err, c.want)
			}
		})
	}
}
