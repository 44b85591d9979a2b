package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestProbeReportsMembersWithoutJoining: a probe of one member's gossip
// address returns every alive member with its peer address, and no member
// ever counts the probe among its members.
func TestProbeReportsMembersWithoutJoining(t *testing.T) {
	a := startNode(t, 1, nil)
	b := startNode(t, 2, nil)
	joinTo(t, b, a)
	waitFor(t, 5*time.Second, func() error {
		if n := len(a.Members()); n != 2 {
			return fmt.Errorf("node 1 sees %d members", n)
		}
		return nil
	})
	// Advertise is honoured as Start honours it (the probe binds the
	// bind host; 0.0.0.0 without a private IP needs it).
	cfg := Config{BindAddr: "127.0.0.1:0", Advertise: "127.0.0.1", Profile: ProfileLocal, Logger: slog.New(slog.DiscardHandler)}
	got, err := Probe(cfg, []string{a.GossipAddr()})
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 {
		t.Fatalf("Probe returned %+v, want members 1 and 2", got)
	}
	for _, mb := range got {
		if want := testMeta(mb.ID).PeerAddr; mb.PeerAddr != want {
			t.Errorf("member %d: peer address %q, want %q", mb.ID, mb.PeerAddr, want)
		}
		if mb.Status != StatusAlive || mb.GossipAddr == "" {
			t.Errorf("member %d: %+v", mb.ID, mb)
		}
	}
	// Give a wrongly admitted probe time to show up in the gossip.
	time.Sleep(500 * time.Millisecond)
	for _, n := range []*testNode{a, b} {
		if ms := n.Members(); len(ms) != 2 {
			t.Errorf("node %d has %d members after the probe: %+v", n.Local().ID, len(ms), ms)
		}
	}
}

// TestProbeNeedsTheSameKey: a cluster with gossip encryption answers a
// probe with its key and no probe without it.
func TestProbeNeedsTheSameKey(t *testing.T) {
	key := []byte("0123456789abcdef")
	a := startNode(t, 1, func(c *Config) { c.SecretKey = key })
	cfg := Config{BindAddr: "127.0.0.1:0", Profile: ProfileLocal, Logger: slog.New(slog.DiscardHandler)}
	if got, err := Probe(cfg, []string{a.GossipAddr()}); err == nil {
		t.Fatalf("Probe without the key returned %+v", got)
	}
	cfg.SecretKey = key
	if got, err := Probe(cfg, []string{a.GossipAddr()}); err != nil || len(got) != 1 || got[0].ID != 1 {
		t.Fatalf("Probe with the key: %+v, %v", got, err)
	}
}

// TestProbeOfNonGossipAddress: an address that does not speak gossip (a
// listener that closes every connection, as a peer port answers bytes it
// does not understand) is an error, soon.
func TestProbeOfNonGossipAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	cfg := Config{BindAddr: "127.0.0.1:0", Profile: ProfileLocal, Logger: slog.New(slog.DiscardHandler)}
	got, err := Probe(cfg, []string{l.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "no members") || errors.Is(err, ErrUnreachable) {
		t.Fatalf("Probe of a non-gossip address: %+v, %v", got, err)
	}
	// Nothing listening: unreachable, which says nothing of the kind of
	// address.
	addr := l.Addr().String()
	l.Close()
	if got, err := Probe(cfg, []string{addr}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Probe of a closed port: %+v, %v; want ErrUnreachable", got, err)
	}
}
