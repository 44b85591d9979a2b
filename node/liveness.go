package node

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/rpc/peer"
)

// liveness is the node's view of which peer nodes answer, for the
// heartbeat pump's failure detection (node/replica pump.go): it pings the
// yamux session of every peer address it has been asked about each quarter
// of the heartbeat timeout, and a peer is alive while its last answer is
// younger than the heartbeat timeout. One ping per peer node, however many
// bucket groups the two nodes share.
//
// A peer whose pings fail (connection refused or reset: its process is
// gone) is dead once its last answer is a timeout old. A peer whose pings
// merely go unanswered is dead only after three timeouts: an overloaded
// node answers late, and a wrong verdict makes its groups elect new leaders
// (safe, but a disruption); a peer cut off without a reset is found a little
// later instead. A peer is given the benefit of the doubt for the first
// timeout after it is first asked about (no ping has had time to answer),
// and it is forgotten when nobody asked about it for a minute.
//
// Before a replica stands for election because its leader's node is dead
// here, it asks the other voters' nodes whether they lost that node too
// (LostBy), so that a node cut off from the leader alone, while the rest
// of the group still hears from it, does not unseat a working leader.
type liveness struct {
	ping    func(addr string) (time.Duration, error)
	askPeer askPeerFunc // nil: every peer is taken to agree
	timeout time.Duration

	mu    sync.Mutex
	peers map[raft.ServerAddress]*peerLiveness
	asked map[[2]raft.ServerAddress]*lostAnswer // LostBy's answers, by (peer, addr)

	dead atomic.Bool // a peer was dead at the last round of pings (anyDead)

	quit chan struct{}
	done chan struct{}
}

type peerLiveness struct {
	since    time.Time    // first asked about (set once)
	asked    time.Time    // last asked about
	answered atomic.Int64 // unix nanos of the last answered ping
	failed   atomic.Bool  // the last ping ended in an error
	busy     atomic.Bool  // a ping is out
}

// livenessForget is how long a peer nobody asks about stays pinged.
const livenessForget = time.Minute

// askPeerFunc asks the node at peer how long it has not heard from the node
// at addr (the node.silence call); watched is false when that node does
// not ping addr.
type askPeerFunc func(ctx context.Context, peer, addr raft.ServerAddress) (silence time.Duration, watched bool, err error)

func newLiveness(ping func(addr string) (time.Duration, error), askPeer askPeerFunc, timeout time.Duration) *liveness {
	l := &liveness{
		ping:    ping,
		askPeer: askPeer,
		timeout: timeout,
		peers:   make(map[raft.ServerAddress]*peerLiveness),
		asked:   make(map[[2]raft.ServerAddress]*lostAnswer),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go l.run()
	return l
}

// Alive implements replica.Liveness.
func (l *liveness) Alive(addr raft.ServerAddress) bool {
	now := time.Now()
	p := l.ask(addr, now)
	return l.alive(p, now)
}

// alive decides whether p is alive as of now.
func (l *liveness) alive(p *peerLiveness, now time.Time) bool {
	silent := now.Sub(p.lastHeard())
	if p.failed.Load() {
		return silent < l.timeout
	}
	return silent < unansweredFactor*l.timeout
}

// anyDead reports whether a peer this node pings was dead at the last
// round of pings (a quarter timeout ago at most): one atomic load, for
// checks on the data path that only matter when a peer is.
func (l *liveness) anyDead() bool { return l.dead.Load() }

// Answering reports whether the node at addr has answered a ping since it
// was first asked about and still does: its latest ping did not fail, and
// its last answer is younger than the unanswered window Alive allows a
// slow peer. Unlike Alive it gives no benefit of the doubt to a peer that
// never answered, and a failed ping (connection refused: the process is
// gone) counts at once. A leadership transfer asks it of its target,
// because a transfer to a node that is gone stalls the group's writes
// until raft gives the transfer up (its election timeout, BackstopScale
// times the configured one), and gossip declares a killed node failed
// only seconds after the group has elected a new leader. A peer not asked
// about before is pinged from now on and is not answering yet.
func (l *liveness) Answering(addr raft.ServerAddress) bool {
	now := time.Now()
	p := l.ask(addr, now)
	answered := p.answered.Load()
	return answered != 0 && !p.failed.Load() && now.Sub(time.Unix(0, answered)) < unansweredFactor*l.timeout
}

// AnsweringNow is Answering for a decision that cannot wait for the next
// round of pings (a stopping node's handoff): a peer that is not
// answering as far as this node knows, one it never asked about
// included, is pinged once now, and the outcome is recorded. A peer
// whose last ping failed is not pinged again.
func (l *liveness) AnsweringNow(addr raft.ServerAddress) bool {
	if l.Answering(addr) {
		return true
	}
	p := l.ask(addr, time.Now())
	if p.failed.Load() {
		return false
	}
	_, err := l.ping(string(addr))
	if err == nil {
		p.answered.Store(time.Now().UnixNano())
	}
	p.failed.Store(err != nil)
	return err == nil
}

// silence reports how long the node at addr has not answered this node's
// pings (counted from when it was first asked about, if it never
// answered), and false when this node does not ping it. It does not start
// pinging addr: it answers other nodes (node.silence), which must not make
// this one ping addresses of their choosing.
func (l *liveness) silence(addr raft.ServerAddress) (time.Duration, bool) {
	l.mu.Lock()
	p := l.peers[addr]
	l.mu.Unlock()
	if p == nil {
		return 0, false
	}
	return time.Since(p.lastHeard()), true
}

// knownDead reports whether this node pings addr and finds it dead, as
// Alive would, without starting to ping it: for a look that must not add
// peers to the watch (DescribeCluster asks about every node).
func (l *liveness) knownDead(addr raft.ServerAddress) bool {
	l.mu.Lock()
	p := l.peers[addr]
	l.mu.Unlock()
	return p != nil && !l.alive(p, time.Now())
}

// lastHeard is when p last answered a ping, or when it was first asked
// about if that is later (the benefit of the doubt).
func (p *peerLiveness) lastHeard() time.Time {
	last := time.Unix(0, p.answered.Load())
	if p.since.After(last) {
		return p.since
	}
	return last
}

// lostAnswer is one answer of LostBy, shared by the callers that ask the
// same question while it is fresh.
type lostAnswer struct {
	at   time.Time
	done chan struct{} // closed once lost is set
	lost bool
}

// LostBy implements replica.Liveness: it asks the node at by whether it
// has not heard from the node at addr for half a timeout or longer. Within a
// heartbeat timeout of a failure every node that watches the failed one
// finds it silent that long (they ping it at different moments of the same
// quarter-timeout period), while a node that still reaches it has heard
// from it within a quarter timeout and a round trip. The answer is kept for
// a quarter timeout, so the groups two nodes share cost one call between
// them, however many there are; callers asking meanwhile wait for the call
// out. A node that does not answer within half a timeout, or does not watch
// addr, does not agree; a node running a binary without the call agrees
// (it would have stood for election itself, as this node did before).
func (l *liveness) LostBy(by, addr raft.ServerAddress) bool {
	if l.askPeer == nil {
		return true
	}
	key := [2]raft.ServerAddress{by, addr}
	now := time.Now()
	l.mu.Lock()
	a := l.asked[key]
	if a == nil || now.Sub(a.at) >= l.timeout/4 {
		for k, old := range l.asked { // forget stale answers (a few per node pair)
			if now.Sub(old.at) >= l.timeout/4 && isClosed(old.done) {
				delete(l.asked, k)
			}
		}
		a = &lostAnswer{at: now, done: make(chan struct{})}
		l.asked[key] = a
		l.mu.Unlock()
		a.lost = l.askLost(by, addr)
		close(a.done)
		return a.lost
	}
	l.mu.Unlock()
	<-a.done
	return a.lost
}

// askLost makes LostBy's call.
func (l *liveness) askLost(by, addr raft.ServerAddress) bool {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout/2)
	defer cancel()
	silence, watched, err := l.askPeer(ctx, by, addr)
	switch {
	case errors.Is(err, peer.ErrUnknownHandler):
		return true
	case err != nil || !watched:
		return false
	}
	return silence >= l.timeout/2
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// ask records that addr was asked about now (it is pinged from then on)
// and returns its entry.
func (l *liveness) ask(addr raft.ServerAddress, now time.Time) *peerLiveness {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.peers[addr]
	if p == nil {
		p = &peerLiveness{since: now}
		l.peers[addr] = p
	}
	p.asked = now
	return p
}

// unansweredFactor is how many timeouts a peer whose pings neither answer
// nor fail stays alive.
const unansweredFactor = 3

func (l *liveness) close() {
	close(l.quit)
	<-l.done
}

func (l *liveness) run() {
	defer close(l.done)
	t := time.NewTicker(l.timeout / 4)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-t.C:
		case <-l.quit:
			return
		}
		now := time.Now()
		dead := false
		l.mu.Lock()
		for addr, p := range l.peers {
			if now.Sub(p.asked) > livenessForget {
				delete(l.peers, addr)
				continue
			}
			dead = dead || !l.alive(p, now)
			if !p.busy.CompareAndSwap(false, true) {
				continue // the last ping is still out: it answers late or not at all
			}
			wg.Go(func() {
				defer p.busy.Store(false)
				_, err := l.ping(string(addr))
				if err == nil {
					p.answered.Store(time.Now().UnixNano())
				}
				p.failed.Store(err != nil)
			})
		}
		l.mu.Unlock()
		l.dead.Store(dead)
	}
}

// errPeerGone is the cause with which watchGone cancels.
var errPeerGone = errors.New("stopped answering pings")

// errPeerDead: a request was not sent, because its target node was dead
// already as Alive decides.
var errPeerDead = errors.New("does not answer pings: request not sent")

// watchGone calls cancel(errPeerGone) once the node at addr is found dead
// as Alive decides (its bucket groups then elect new leaders), looking
// first a heartbeat timeout after the call (a request that takes less
// costs a timer and no look) and every quarter of one after that; stop
// ends the watch. A request to a node cut off from this one, which would
// otherwise wait for its deadline, ends with the failure detection.
func (l *liveness) watchGone(addr raft.ServerAddress, cancel context.CancelCauseFunc) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	look := func() {
		if !l.Alive(addr) {
			cancel(errPeerGone)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(l.timeout / 4)
		}
	}
	mu.Lock()
	t = time.AfterFunc(l.timeout, look)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// handleSilence answers node.silence from this node's liveness view.
func (n *Node) handleSilence(_ context.Context, req []byte) ([]byte, error) {
	addr, err := decodeSilenceReq(req)
	if err != nil {
		return nil, err
	}
	silence, watched := n.live.silence(addr)
	return appendSilence(nil, silence, watched), nil
}

// askSilence asks the node at by how long it has not heard from the node at
// addr (liveness.LostBy).
func (n *Node) askSilence(ctx context.Context, by, addr raft.ServerAddress) (time.Duration, bool, error) {
	b, err := n.peers.Call(ctx, string(by), callNodeSilence, appendSilenceReq(nil, addr))
	if err != nil {
		return 0, false, err
	}
	return decodeSilence(b)
}
