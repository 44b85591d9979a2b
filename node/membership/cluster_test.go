package membership

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// syncBuffer is a log sink safe for memberlist's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testNode struct {
	*Membership
	logs *syncBuffer
}

func testMeta(id int32) Meta {
	return Meta{
		ID:         id,
		ClientAddr: fmt.Sprintf("127.0.0.1:%d", 19000+id),
		PeerAddr:   fmt.Sprintf("127.0.0.1:%d", 29000+id),
		Version:    "test-1",
		State:      StateJoining,
	}
}

// startNode starts a member on 127.0.0.1:0 with the local profile; it is
// shut down at the end of the test.
func startNode(t *testing.T, id int32, change func(*Config)) *testNode {
	t.Helper()
	logs := &syncBuffer{}
	cfg := Config{
		BindAddr: "127.0.0.1:0",
		Profile:  ProfileLocal,
		Meta:     testMeta(id),
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if change != nil {
		change(&cfg)
	}
	m, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start node %d: %v", id, err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("Shutdown node %d: %v", id, err)
		}
	})
	return &testNode{Membership: m, logs: logs}
}

func joinTo(t *testing.T, n *testNode, seed *testNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := n.Join(ctx, []string{seed.GossipAddr()}); err != nil || c != 1 {
		t.Fatalf("node %d join via %s: contacted %d, %v", n.Local().ID, seed.GossipAddr(), c, err)
	}
}

// waitFor polls cond until it returns nil or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func memberByID(ms []Member, id int32) (Member, bool) {
	for _, m := range ms {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// waitEvent reads n's events until one matches, or fails after timeout.
func waitEvent(t *testing.T, n *testNode, timeout time.Duration, match func(Event) bool) Event {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-n.Events():
			if !ok {
				t.Fatal("events closed")
			}
			if match(ev) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("node %d: no matching event within %v", n.Local().ID, timeout)
		}
	}
}

// startCluster starts n nodes (ids 1..n) and joins 2..n through node 1.
func startCluster(t *testing.T, n int) []*testNode {
	t.Helper()
	nodes := make([]*testNode, n)
	for i := range nodes {
		nodes[i] = startNode(t, int32(i+1), nil)
	}
	for _, nd := range nodes[1:] {
		joinTo(t, nd, nodes[0])
	}
	waitAllSee(t, nodes, len(nodes))
	return nodes
}

func waitAllSee(t *testing.T, nodes []*testNode, want int) {
	t.Helper()
	waitFor(t, 10*time.Second, func() error {
		for _, nd := range nodes {
			alive := 0
			for _, m := range nd.Members() {
				if m.Status == StatusAlive {
					alive++
				}
			}
			if alive != want {
				return fmt.Errorf("node %d sees %d alive members, want %d", nd.Local().ID, alive, want)
			}
		}
		return nil
	})
}

func TestJoinThroughOneSeed(t *testing.T) {
	nodes := startCluster(t, 3)
	for _, nd := range nodes {
		ms := nd.Members()
		if len(ms) != 3 {
			t.Fatalf("node %d: %d members, want 3", nd.Local().ID, len(ms))
		}
		for i, m := range ms {
			want := testMeta(int32(i + 1))
			if m.Meta != want {
				t.Errorf("node %d sees member %d meta %+v, want %+v", nd.Local().ID, i+1, m.Meta, want)
			}
			if m.GossipAddr != nodes[i].GossipAddr() {
				t.Errorf("node %d sees member %d at %s, want %s", nd.Local().ID, i+1, m.GossipAddr, nodes[i].GossipAddr())
			}
			if m.Status != StatusAlive {
				t.Errorf("node %d sees member %d %v, want alive", nd.Local().ID, i+1, m.Status)
			}
		}
		if l := nd.Local(); l.Status != StatusAlive || l.GossipAddr == "" || strings.HasSuffix(l.GossipAddr, ":0") {
			t.Errorf("Local() = %+v: want alive with the bound port", l)
		}
	}
}

func TestSetStatePropagates(t *testing.T) {
	nodes := startCluster(t, 3)
	if err := nodes[1].SetState(StateActive); err != nil {
		t.Fatalf("SetState: %v", err)
	}
	if got := nodes[1].Local().State; got != StateActive {
		t.Fatalf("Local().State = %q after SetState", got)
	}
	for _, nd := range []*testNode{nodes[0], nodes[2]} {
		ev := waitEvent(t, nd, 10*time.Second, func(ev Event) bool {
			return ev.Type == EventUpdate && ev.Member.ID == 2 && ev.Member.State == StateActive
		})
		if ev.Member.ClientAddr != testMeta(2).ClientAddr {
			t.Errorf("update event carries meta %+v", ev.Member.Meta)
		}
		m, _ := memberByID(nd.Members(), 2)
		if m.State != StateActive {
			t.Errorf("node %d: Members() shows node 2 %q after the update event", nd.Local().ID, m.State)
		}
	}
	if err := nodes[1].SetState("sleeping"); !errors.Is(err, ErrInvalidMeta) {
		t.Fatalf("SetState(unknown) = %v, want ErrInvalidMeta", err)
	}
	meta := testMeta(2)
	meta.ClientAddr = "127.0.0.1:1"
	meta.State = StateDraining
	if err := nodes[1].UpdateMeta(meta); err != nil {
		t.Fatalf("UpdateMeta: %v", err)
	}
	waitFor(t, 10*time.Second, func() error {
		m, _ := memberByID(nodes[0].Members(), 2)
		if m.Meta != meta {
			return fmt.Errorf("node 1 sees %+v", m.Meta)
		}
		return nil
	})
	meta.ID = 5
	if err := nodes[1].UpdateMeta(meta); !errors.Is(err, ErrInvalidMeta) {
		t.Fatalf("UpdateMeta with another id = %v, want ErrInvalidMeta", err)
	}
}

func TestFailureAndLeave(t *testing.T) {
	nodes := startCluster(t, 3)

	// Node 3 dies without a word.
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes[:2] {
		waitEvent(t, nd, 15*time.Second, func(ev Event) bool { return ev.Type == EventFailed && ev.Member.ID == 3 })
		if m, _ := memberByID(nd.Members(), 3); m.Status != StatusDead {
			t.Fatalf("node %d sees node 3 %v, want dead", nd.Local().ID, m.Status)
		}
	}

	// Node 2 leaves politely.
	if err := nodes[1].Leave(5 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if l := nodes[1].Local(); l.Status != StatusLeft || l.State != StateLeft {
		t.Fatalf("Local() after Leave = %+v", l)
	}
	waitEvent(t, nodes[0], 10*time.Second, func(ev Event) bool {
		t.Logf("event %v %d %v %s", ev.Type, ev.Member.ID, ev.Member.Status, ev.Member.State)
		return ev.Type == EventLeave && ev.Member.ID == 2
	})
	m, _ := memberByID(nodes[0].Members(), 2)
	if m.Status != StatusLeft || m.State != StateLeft {
		t.Fatalf("node 1 sees node 2 as %v/%q, want left/left", m.Status, m.State)
	}
	if err := nodes[1].Leave(time.Second); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
}

func TestShutdownLifecycle(t *testing.T) {
	n := startNode(t, 1, nil)
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if err := n.Leave(time.Second); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Leave after Shutdown = %v, want ErrShutdown", err)
	}
	if err := n.SetState(StateActive); !errors.Is(err, ErrShutdown) {
		t.Fatalf("SetState after Shutdown = %v, want ErrShutdown", err)
	}
	if _, err := n.Join(context.Background(), []string{"127.0.0.1:1"}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Join after Shutdown = %v, want ErrShutdown", err)
	}
	// Events is closed: the loop ends.
	for range n.Events() {
	}
}

func TestSecretKey(t *testing.T) {
	keyA := []byte("0123456789abcdef")
	keyB := []byte("fedcba9876543210")
	seed := startNode(t, 1, func(c *Config) { c.SecretKey = keyA })

	cases := []struct {
		name string
		id   int32
		key  []byte
		ok   bool
	}{
		{"wrong key", 2, keyB, false},
		{"no key", 3, nil, false},
		{"right key", 4, keyA, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := startNode(t, c.id, func(cfg *Config) { cfg.SecretKey = c.key })
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			_, err := n.Join(ctx, []string{seed.GossipAddr()})
			if c.ok {
				if err != nil {
					t.Fatalf("join with the right key: %v", err)
				}
				waitFor(t, 10*time.Second, func() error {
					if m, ok := memberByID(seed.Members(), c.id); !ok || m.Status != StatusAlive {
						return fmt.Errorf("seed does not see node %d alive", c.id)
					}
					return nil
				})
				return
			}
			if !errors.Is(err, ErrJoin) {
				t.Fatalf("join = %v, want ErrJoin", err)
			}
			if _, ok := memberByID(seed.Members(), c.id); ok {
				t.Fatalf("seed lists node %d that has the wrong key", c.id)
			}
			if ms := n.Members(); len(ms) != 1 {
				t.Fatalf("rejected node sees %d members, want only itself", len(ms))
			}
		})
	}
}

func TestDuplicateIDRejected(t *testing.T) {
	nodes := startCluster(t, 2)
	dup := startNode(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := dup.Join(ctx, []string{nodes[1].GossipAddr()})
	if !errors.Is(err, ErrIDConflict) {
		t.Fatalf("join of a second process with id 1 = %v, want ErrIDConflict", err)
	}
	if !strings.Contains(err.Error(), "node_id") {
		t.Errorf("error %q does not tell the user what to fix", err)
	}
	if ctx.Err() != nil {
		t.Errorf("conflict was retried until the context ended")
	}
	ev := waitEvent(t, nodes[1], 5*time.Second, func(ev Event) bool { return ev.Type == EventConflict })
	if ev.Member.ID != 1 || ev.Member.GossipAddr != dup.GossipAddr() {
		t.Errorf("conflict event names %d at %s, want 1 at %s", ev.Member.ID, ev.Member.GossipAddr, dup.GossipAddr())
	}
	if !strings.Contains(nodes[1].logs.String(), "node id conflict") {
		t.Errorf("no conflict log line on the seed:\n%s", nodes[1].logs.String())
	}
	for _, nd := range nodes {
		m, _ := memberByID(nd.Members(), 1)
		if m.GossipAddr != nodes[0].GossipAddr() || m.Status != StatusAlive {
			t.Errorf("node %d sees id 1 as %+v, want the original at %s", nd.Local().ID, m, nodes[0].GossipAddr())
		}
	}
}

func TestBootstrapExpect(t *testing.T) {
	nodes := []*testNode{startNode(t, 3, nil), startNode(t, 1, nil), startNode(t, 2, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	results := make([][]Member, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Go(func() { results[i], errs[i] = nd.BootstrapExpect(ctx, 3) })
	}
	// A static start: every node is told the others (join list).
	for i, nd := range nodes {
		var seeds []string
		for j, o := range nodes {
			if j != i {
				seeds = append(seeds, o.GossipAddr())
			}
		}
		if _, err := nd.Join(ctx, seeds); err != nil {
			t.Fatalf("join: %v", err)
		}
	}
	wg.Wait()
	for i := range nodes {
		if errs[i] != nil {
			t.Fatalf("node %d BootstrapExpect: %v", nodes[i].Local().ID, errs[i])
		}
		var ids []int32
		for _, m := range results[i] {
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, []int32{1, 2, 3}) {
			t.Fatalf("node %d got %v, want [1 2 3]", nodes[i].Local().ID, ids)
		}
		if !slices.EqualFunc(results[i], results[0], func(a, b Member) bool { return a.Meta == b.Meta && a.GossipAddr == b.GossipAddr }) {
			t.Fatalf("node %d saw another set than node %d", nodes[i].Local().ID, nodes[0].Local().ID)
		}
	}

	// The smallest id bootstraps and becomes active; a late node must not
	// bootstrap a second cluster.
	if err := nodes[1].SetState(StateActive); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		if m, _ := memberByID(nodes[0].Members(), 1); m.State != StateActive {
			return fmt.Errorf("seed sees node 1 %q", m.State)
		}
		return nil
	})
	late := startNode(t, 4, nil)
	joinTo(t, late, nodes[0])
	_, err := late.BootstrapExpect(ctx, 3)
	if !errors.Is(err, ErrClusterExists) {
		t.Fatalf("late BootstrapExpect = %v, want ErrClusterExists", err)
	}

	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	lonely := startNode(t, 9, nil)
	if _, err := lonely.BootstrapExpect(short, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("BootstrapExpect alone = %v, want DeadlineExceeded", err)
	}
}

func TestAdvertiseAndJoinErrors(t *testing.T) {
	n := startNode(t, 1, func(c *Config) { c.Advertise = "127.0.0.1" })
	if addr := n.GossipAddr(); !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("GossipAddr = %q, want 127.0.0.1 and the bound port", addr)
	}
	if _, err := n.Join(context.Background(), nil); !errors.Is(err, ErrJoin) {
		t.Fatalf("Join(no seeds) = %v, want ErrJoin", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// Port 1 on loopback: nobody answers; Join retries until ctx ends.
	_, err := n.Join(ctx, []string{"127.0.0.1:1"})
	if !errors.Is(err, ErrJoin) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Join(unreachable) = %v, want ErrJoin wrapping DeadlineExceeded", err)
	}
	if _, err := Start(Config{BindAddr: "127.0.0.1:0", Profile: ProfileLocal, Meta: Meta{ID: 2}, Advertise: "no-such-host.invalid:1"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Start with unresolvable advertise = %v, want ErrInvalidConfig", err)
	}
}

// TestLeaveNoticeAfterDead: when memberlist's leave broadcast overtakes the
// leave notice, the member is first recorded dead and then corrected to left.
func TestLeaveNoticeAfterDead(t *testing.T) {
	n := startNode(t, 1, nil)
	d := &delegate{m: n.Membership}
	meta, _ := testMeta(7).MarshalBinary()
	node := &memberlist.Node{Name: "7", Addr: net.ParseIP("127.0.0.1"), Port: 7777, Meta: meta}
	d.NotifyJoin(node)
	d.NotifyLeave(node)
	if m, _ := memberByID(n.Members(), 7); m.Status != StatusDead {
		t.Fatalf("before the notice: %v, want dead", m.Status)
	}
	d.NotifyMsg(appendLeaveNotice(nil, 7))
	if m, _ := memberByID(n.Members(), 7); m.Status != StatusLeft {
		t.Fatalf("after the notice: %v, want left", m.Status)
	}
	waitEvent(t, n, 5*time.Second, func(ev Event) bool { return ev.Type == EventLeave && ev.Member.ID == 7 })
	d.NotifyMsg([]byte("garbage")) // ignored, logged
	if !strings.Contains(n.logs.String(), "ignoring gossip user message") {
		t.Fatalf("garbage user message not logged")
	}
	// Back again: a later failure is a failure.
	d.NotifyJoin(node)
	d.NotifyLeave(node)
	if m, _ := memberByID(n.Members(), 7); m.Status != StatusDead {
		t.Fatalf("after rejoin and failure: %v, want dead", m.Status)
	}
}

// TestLeaveNoticeFirst: the notice arrives while memberlist still holds the
// member alive (its UDP leave broadcast lost or late): the member is left at
// once, the gossip of its "left" meta and memberlist's own leave keep it
// left without a second event, and a member that comes back in another
// state and then vanishes has failed.
func TestLeaveNoticeFirst(t *testing.T) {
	n := startNode(t, 1, nil)
	d := &delegate{m: n.Membership}
	memberNode := func(state string) *memberlist.Node {
		meta := testMeta(7)
		meta.State = state
		b, _ := meta.MarshalBinary()
		return &memberlist.Node{Name: "7", Addr: net.ParseIP("127.0.0.1"), Port: 7777, Meta: b}
	}
	status := func() Member {
		m, _ := memberByID(n.Members(), 7)
		return m
	}
	d.NotifyJoin(memberNode(StateActive))
	waitEvent(t, n, 5*time.Second, func(ev Event) bool { return ev.Type == EventJoin && ev.Member.ID == 7 })

	d.NotifyMsg(appendLeaveNotice(nil, 7))
	if m := status(); m.Status != StatusLeft || m.State != StateLeft {
		t.Fatalf("after the notice: %v/%q, want left/left", m.Status, m.State)
	}
	waitEvent(t, n, 5*time.Second, func(ev Event) bool { return ev.Type == EventLeave && ev.Member.ID == 7 })

	d.NotifyUpdate(memberNode(StateLeft))
	if m := status(); m.Status != StatusLeft {
		t.Fatalf("after the gossip of its left meta: %v, want left", m.Status)
	}
	d.NotifyLeave(memberNode(StateLeft))
	if m := status(); m.Status != StatusLeft {
		t.Fatalf("after memberlist's leave: %v, want left", m.Status)
	}
	select {
	case ev := <-n.Events():
		t.Fatalf("event %v %v after the member was already reported left", ev.Type, ev.Member.Status)
	case <-time.After(100 * time.Millisecond):
	}

	// Restarted in another state: alive again, and a later loss is a failure.
	d.NotifyJoin(memberNode(StateJoining))
	if m := status(); m.Status != StatusAlive {
		t.Fatalf("after coming back: %v, want alive", m.Status)
	}
	d.NotifyLeave(memberNode(StateJoining))
	if m := status(); m.Status != StatusDead {
		t.Fatalf("after coming back and vanishing: %v, want dead", m.Status)
	}
}

// TestConcurrentStateChanges: state and meta changes from several
// goroutines at once (a node's register loop and its Close do this) are
// safe (CI runs it under -race: memberlist's UpdateNode reads the local
// node's state without its lock, so concurrent calls raced), and a change
// made after them reaches the peer.
func TestConcurrentStateChanges(t *testing.T) {
	nodes := startCluster(t, 2)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 5 {
				if i%2 == 0 {
					_ = nodes[1].SetState(StateActive)
				} else {
					meta := testMeta(2)
					meta.State = StateDraining
					_ = nodes[1].UpdateMeta(meta)
				}
			}
		})
	}
	wg.Wait()
	if err := nodes[1].SetState(StateActive); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		if m, _ := memberByID(nodes[0].Members(), 2); m.State != StateActive {
			return fmt.Errorf("node 1 sees node 2 %q", m.State)
		}
		return nil
	})
}
