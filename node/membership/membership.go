package membership

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Errors returned by Membership.
var (
	// ErrIDConflict: another live process already uses this node id.
	ErrIDConflict = errors.New("membership: node id already in use by another live process")
	// ErrShutdown: the Membership was shut down.
	ErrShutdown = errors.New("membership: shut down")
	// ErrJoin: no seed could be contacted before the context ended.
	ErrJoin = errors.New("membership: could not join the cluster")
	// ErrClusterExists: BootstrapExpect saw an active member; the cluster is
	// already bootstrapped and this node must join it instead.
	ErrClusterExists = errors.New("membership: cluster already bootstrapped (an active member exists)")
)

// Status is a member's liveness as this node sees it.
type Status uint8

// Statuses.
const (
	StatusAlive   Status = iota + 1
	StatusSuspect        // reserved: memberlist v0.5.4 reports no suspicion (doc.go)
	StatusDead           // declared failed by the failure detector
	StatusLeft           // left on purpose
)

func (s Status) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusSuspect:
		return "suspect"
	case StatusDead:
		return "dead"
	case StatusLeft:
		return "left"
	}
	return "unknown"
}

// Member is one node as seen through gossip.
type Member struct {
	Meta
	GossipAddr string // host:port of the member's gossip listener
	Status     Status
}

// Membership is this node's gossip membership. All methods are safe for
// concurrent use.
type Membership struct {
	cfg    Config
	name   string
	log    *slog.Logger
	events *eventQueue
	ml     *memberlist.Memberlist // set once after memberlist.Create

	life sync.Mutex // serializes Leave and Shutdown (memberlist panics on Leave after Shutdown)
	// update serializes memberlist's UpdateNode: it reads the local node's
	// state without memberlist's lock while another call's aliveNode writes
	// it. Taken before mu, never while holding it.
	update sync.Mutex

	mu         sync.Mutex
	local      Meta
	localBytes []byte
	gossipAddr string
	members    map[int32]Member
	changed    chan struct{}  // closed and replaced on every table change
	conflict   error          // last id conflict seen by the merge delegate
	leaving    map[int32]bool // ids that sent a leave notice since they last joined
	left       bool
	shut       bool
}

// Start opens the gossip listener and makes this node a one-member
// cluster; Join brings it into an existing one.
func Start(cfg Config) (*Membership, error) {
	host, port, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	localBytes, err := cfg.Meta.AppendBinary(nil)
	if err != nil {
		return nil, err
	}
	m := &Membership{
		cfg:        cfg,
		name:       strconv.FormatInt(int64(cfg.Meta.ID), 10),
		log:        cfg.Logger.With("component", "membership", "node", cfg.Meta.ID),
		events:     newEventQueue(cfg.EventBuffer),
		local:      cfg.Meta,
		localBytes: localBytes,
		members:    make(map[int32]Member),
		leaving:    make(map[int32]bool),
		changed:    make(chan struct{}),
	}
	mc := memberlistConfig(cfg.Profile)
	mc.Name = m.name
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = "", port
	if cfg.Advertise != "" {
		ip, aport, err := resolveAdvertise(cfg.Advertise)
		if err != nil {
			return nil, fmt.Errorf("%w: advertise %q: %w", ErrInvalidConfig, cfg.Advertise, err)
		}
		mc.AdvertiseAddr = ip
		if aport != 0 {
			mc.AdvertisePort = aport
		}
	}
	if len(cfg.SecretKey) > 0 {
		mc.SecretKey = slices.Clone(cfg.SecretKey)
	}
	mc.Label = cfg.Label
	d := &delegate{m: m}
	mc.Delegate, mc.Events, mc.Conflict, mc.Merge, mc.Alive = d, d, d, d, d
	mc.Logger = log.New(&slogWriter{logger: cfg.Logger, verbose: cfg.VerboseLog}, "", 0)
	mc.LogOutput = nil

	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("membership: start gossip on %s: %w", cfg.BindAddr, err)
	}
	ln := ml.LocalNode()
	addr := net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	m.mu.Lock()
	m.ml = ml
	m.gossipAddr = addr
	m.mu.Unlock()
	m.log.Debug("gossip started", "gossip_addr", addr)
	return m, nil
}

func resolveAdvertise(s string) (string, int, error) {
	host, port := s, 0
	if h, p, err := splitHostPort(s); err == nil {
		host, port = h, p
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), port, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
	if err != nil {
		return "", 0, err
	}
	if len(ips) == 0 {
		return "", 0, fmt.Errorf("host %q has no IP address", host)
	}
	return ips[0].String(), port, nil
}

// GossipAddr is the address (host:port) other members reach this one at;
// with BindAddr port 0 it names the port actually bound.
func (m *Membership) GossipAddr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gossipAddr
}

// Events delivers membership changes. The channel is closed by Shutdown.
// When the reader falls behind, the oldest events are dropped
// (DroppedEvents); re-read Members after any event.
func (m *Membership) Events() <-chan Event { return m.events.ch }

// DroppedEvents counts events dropped because the Events buffer was full.
func (m *Membership) DroppedEvents() uint64 { return m.events.dropped.Load() }

// Local returns this node as a member.
func (m *Membership) Local() Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := StatusAlive
	if m.left {
		st = StatusLeft
	}
	return Member{Meta: m.local, GossipAddr: m.gossipAddr, Status: st}
}

// Members returns every member seen since Start (self included), sorted by
// id. The result is a copy.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sortedLocked()
}

func (m *Membership) sortedLocked() []Member {
	out := make([]Member, 0, len(m.members))
	for _, mb := range m.members {
		out = append(out, mb)
	}
	slices.SortFunc(out, func(a, b Member) int { return int(a.ID) - int(b.ID) })
	return out
}

// changedCh returns a channel closed at the next change of the table.
func (m *Membership) changedCh() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Join contacts the seeds (gossip addresses host:port; a missing port means
// this node's gossip port) and merges their cluster state. It retries with
// backoff until at least one seed answers or ctx ends, and returns how many
// seeds answered. A seed that shows this node's id alive at another address
// fails the join at once with ErrIDConflict.
func (m *Membership) Join(ctx context.Context, seeds []string) (int, error) {
	if len(seeds) == 0 {
		return 0, fmt.Errorf("%w: no seed addresses given", ErrJoin)
	}
	first, maxWait := joinBackoff(m.cfg.Profile)
	wait := first
	for attempt := 1; ; attempt++ {
		m.mu.Lock()
		if m.shut {
			m.mu.Unlock()
			return 0, ErrShutdown
		}
		m.conflict = nil
		m.mu.Unlock()

		n, err := m.ml.Join(seeds)
		if n > 0 {
			m.log.Info("joined cluster", "seeds", seeds, "contacted", n, "attempts", attempt)
			return n, nil
		}
		m.mu.Lock()
		conflict := m.conflict
		m.mu.Unlock()
		if conflict != nil {
			return 0, conflict
		}
		m.log.Debug("join attempt failed", "seeds", seeds, "attempt", attempt, "err", err)
		jitter := time.Duration(rand.Int64N(int64(wait)/2 + 1))
		t := time.NewTimer(wait/2 + jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w via %v after %d attempts (%w); last error: %v", ErrJoin, seeds, attempt, ctx.Err(), err)
		case <-t.C:
		}
		wait = min(wait*2, maxWait)
	}
}

// SetState changes this node's lifecycle state and gossips it. It returns
// after the change was broadcast, or with an error if the broadcast did not
// go out in time (the change is then still queued and spreads later).
func (m *Membership) SetState(state string) error {
	if !KnownState(state) {
		return fmt.Errorf("%w: state %q is not one of joining, active, draining, left", ErrInvalidMeta, state)
	}
	return m.updateMeta(func(meta *Meta) { meta.State = state })
}

// UpdateMeta replaces this node's addresses, version or feature level (the
// id cannot change) and gossips the result like SetState.
func (m *Membership) UpdateMeta(meta Meta) error {
	m.mu.Lock()
	id := m.local.ID
	m.mu.Unlock()
	if meta.ID != id {
		return fmt.Errorf("%w: node id cannot change (%d → %d)", ErrInvalidMeta, id, meta.ID)
	}
	if err := meta.Validate(); err != nil {
		return err
	}
	return m.updateMeta(func(cur *Meta) { *cur = meta })
}

func (m *Membership) updateMeta(change func(*Meta)) error {
	m.update.Lock()
	defer m.update.Unlock()
	m.mu.Lock()
	if m.shut {
		m.mu.Unlock()
		return ErrShutdown
	}
	next := m.local
	change(&next)
	b, err := next.AppendBinary(nil)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.local, m.localBytes = next, b
	m.mu.Unlock()
	// UpdateNode calls NodeMeta, which takes m.mu: never hold it here.
	if err := m.ml.UpdateNode(m.cfg.broadcastTimeout()); err != nil {
		return fmt.Errorf("membership: state %q queued but not yet gossiped: %w", next.State, err)
	}
	return nil
}

// broadcastTimeout is how long SetState waits for its broadcast.
func (c Config) broadcastTimeout() time.Duration {
	if c.Profile == ProfileLocal {
		return 2 * time.Second
	}
	return 10 * time.Second
}

// Leave announces this node's departure: it gossips state "left", then
// memberlist's leave message, so the others mark it StatusLeft (not
// failed). It waits up to timeout for the broadcast. Gossip keeps running
// until Shutdown.
func (m *Membership) Leave(timeout time.Duration) error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	if m.shut {
		m.mu.Unlock()
		return ErrShutdown
	}
	already := m.left
	m.mu.Unlock()
	if already {
		return nil
	}
	if err := m.SetState(StateLeft); err != nil {
		m.log.Warn("leave: state change not yet gossiped", "err", err)
	}
	m.sendLeaveNotices()
	m.mu.Lock()
	m.left = true
	m.mu.Unlock()
	if err := m.ml.Leave(timeout); err != nil {
		return fmt.Errorf("membership: leave not confirmed by any member within %v: %w", timeout, err)
	}
	return nil
}

// sendLeaveNotices tells every alive member over TCP that this node is
// leaving, so none of them mistakes the leave for a failure whatever order
// the gossip arrives in. Best effort: errors are logged.
func (m *Membership) sendLeaveNotices() {
	m.mu.Lock()
	msg := appendLeaveNotice(nil, m.local.ID)
	var to []*memberlist.Node
	for _, mb := range m.members {
		if mb.Status != StatusAlive || mb.ID == m.local.ID {
			continue
		}
		host, port, err := splitHostPort(mb.GossipAddr)
		if err != nil {
			continue
		}
		to = append(to, &memberlist.Node{Name: strconv.Itoa(int(mb.ID)), Addr: net.ParseIP(host), Port: uint16(port)})
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, n := range to {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := m.ml.SendReliable(n, msg); err != nil {
				m.log.Debug("leave notice not delivered", "to", n.Name, "err", err)
			}
		})
	}
	wg.Wait()
}

// Shutdown stops gossip without a leave message (the others detect this
// node as failed) and closes Events. It is idempotent.
func (m *Membership) Shutdown() error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	if m.shut {
		m.mu.Unlock()
		return nil
	}
	m.shut = true
	m.mu.Unlock()
	err := m.ml.Shutdown()
	m.events.close()
	if err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	return nil
}

// BootstrapExpect waits until at least n members with distinct ids are
// alive in this node's view and none is active yet, and returns the alive
// members sorted by id. The node whose id is the smallest bootstraps the
// metadata Raft group with them; every other node waits to be added. It
// returns ErrClusterExists as soon as an alive member is active (the
// cluster already exists: join it instead), or ctx's error.
func (m *Membership) BootstrapExpect(ctx context.Context, n int) ([]Member, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: bootstrap_expect must be > 0, got %d", ErrInvalidConfig, n)
	}
	for {
		ch := m.changedCh()
		var alive []Member
		for _, mb := range m.Members() {
			if mb.Status != StatusAlive {
				continue
			}
			if mb.State == StateActive {
				return nil, fmt.Errorf("%w: node %d at %s", ErrClusterExists, mb.ID, mb.GossipAddr)
			}
			if mb.State == StateJoining {
				alive = append(alive, mb)
			}
		}
		if len(alive) >= n {
			return alive, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("membership: bootstrap_expect=%d: %d of %d nodes seen (%w)", n, len(alive), n, ctx.Err())
		case <-ch:
		}
	}
}

// setMemberLocked stores mb and wakes those waiting for a change; m.mu is
// held.
func (m *Membership) setMemberLocked(mb Member) {
	m.members[mb.ID] = mb
	close(m.changed)
	m.changed = make(chan struct{})
}
