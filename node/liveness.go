package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// liveness is the node's view of which peer nodes answer, for the
// heartbeat pump's failure detection (node/replica pump.go): it pings the
// yamux session of every peer address it has been asked about each quarter
// of the heartbeat timeout, and a peer is alive while its last answer is
// younger than the heartbeat timeout. One ping per peer node, however many
// bucket groups the two nodes share.
//
// A peer is given the benefit of the doubt for one timeout after it is
// first asked about (no ping has had time to answer), and it is forgotten
// when nobody asked about it for a minute.
type liveness struct {
	ping    func(addr string) (time.Duration, error)
	timeout time.Duration

	mu    sync.Mutex
	peers map[raft.ServerAddress]*peerLiveness

	quit chan struct{}
	done chan struct{}
}

type peerLiveness struct {
	since    time.Time    // first asked about
	asked    time.Time    // last asked about
	answered atomic.Int64 // unix nanos of the last answered ping
	busy     atomic.Bool  // a ping is out
}

// livenessForget is how long a peer nobody asks about stays pinged.
const livenessForget = time.Minute

func newLiveness(ping func(addr string) (time.Duration, error), timeout time.Duration) *liveness {
	l := &liveness{
		ping:    ping,
		timeout: timeout,
		peers:   make(map[raft.ServerAddress]*peerLiveness),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go l.run()
	return l
}

// Alive implements replica.Liveness.
func (l *liveness) Alive(addr raft.ServerAddress) bool {
	now := time.Now()
	l.mu.Lock()
	p := l.peers[addr]
	if p == nil {
		p = &peerLiveness{since: now}
		l.peers[addr] = p
	}
	p.asked = now
	since := p.since
	l.mu.Unlock()
	last := time.Unix(0, p.answered.Load())
	if since.After(last) {
		last = since
	}
	return now.Sub(last) < l.timeout
}

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
		l.mu.Lock()
		for addr, p := range l.peers {
			if now.Sub(p.asked) > livenessForget {
				delete(l.peers, addr)
				continue
			}
			if !p.busy.CompareAndSwap(false, true) {
				continue // the last ping is still out: it answers late or not at all
			}
			wg.Go(func() {
				defer p.busy.Store(false)
				if _, err := l.ping(string(addr)); err == nil {
					p.answered.Store(time.Now().UnixNano())
				}
			})
		}
		l.mu.Unlock()
	}
}
