package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/rpc/peer"
)

// TestLivenessFollowsPings: a peer is alive while its pings are answered,
// from the first question on (the benefit of the doubt), and dead a timeout
// after its pings start failing; it is alive again once they are answered.
func TestLivenessFollowsPings(t *testing.T) {
	const timeout = 200 * time.Millisecond
	var mu sync.Mutex
	down := map[string]bool{}
	pinged := map[string]int{}
	ping := func(addr string) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		pinged[addr]++
		if down[addr] {
			return 0, errors.New("connection refused")
		}
		return time.Millisecond, nil
	}
	setDown := func(addr string, d bool) {
		mu.Lock()
		down[addr] = d
		mu.Unlock()
	}
	l := newLiveness(ping, nil, timeout)
	defer l.close()

	a, b := raft.ServerAddress("a:1"), raft.ServerAddress("b:1")
	setDown("b:1", true)
	if l.knownDead(b) {
		t.Fatal("knownDead of a peer not watched")
	}
	if !l.Alive(a) || !l.Alive(b) {
		t.Fatal("a peer asked about for the first time is not given the benefit of the doubt")
	}
	waitFor(t, 5*time.Second, func() bool { return !l.Alive(b) }) // b's pings fail
	if !l.Alive(a) || l.knownDead(a) || !l.knownDead(b) {
		t.Fatalf("a, whose pings are answered: alive %v, known dead %v; b, whose pings fail: known dead %v", l.Alive(a), l.knownDead(a), l.knownDead(b))
	}
	time.Sleep(timeout)
	mu.Lock()
	peers := len(pinged)
	mu.Unlock()
	if l.knownDead("c:1") || peers != 2 {
		t.Fatalf("knownDead of an unwatched peer, or %d peers pinged, want a and b only", peers)
	}
	mu.Lock()
	na := pinged["a:1"]
	mu.Unlock()
	if na < 2 {
		t.Fatalf("a pinged %d times, want it pinged every quarter timeout", na)
	}

	setDown("b:1", false)
	waitFor(t, 5*time.Second, func() bool { return l.Alive(b) }) // answered again
	setDown("a:1", true)
	waitFor(t, 5*time.Second, func() bool { return !l.Alive(a) }) // a's pings fail now
}

// TestLivenessWaitsLongerForSilence: a peer whose pings neither answer nor
// fail (overloaded, or cut off without a reset) stays alive for three
// timeouts, not one.
func TestLivenessWaitsLongerForSilence(t *testing.T) {
	const timeout = 200 * time.Millisecond
	release := make(chan struct{})
	var mu sync.Mutex
	hang := false
	ping := func(addr string) (time.Duration, error) {
		mu.Lock()
		h := hang
		mu.Unlock()
		if h {
			<-release
			return 0, errors.New("session closed")
		}
		return time.Millisecond, nil
	}
	l := newLiveness(ping, nil, timeout)
	defer l.close()
	defer close(release)
	addr := raft.ServerAddress("slow:1")
	l.Alive(addr)
	time.Sleep(timeout)
	mu.Lock()
	hang = true
	mu.Unlock()
	start := time.Now()
	waitFor(t, 10*time.Second, func() bool { return !l.Alive(addr) })
	if took := time.Since(start); took < 2*timeout {
		t.Fatalf("a silent peer was declared dead after %v, want about %d timeouts (%v)", took, unansweredFactor, unansweredFactor*timeout)
	}
}

// TestLivenessOverPeerMux: pinging through the peer transport tells a
// running node from a closed one.
func TestLivenessOverPeerMux(t *testing.T) {
	const timeout = 300 * time.Millisecond
	local, err := peer.Listen("127.0.0.1:0", peer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	remote, err := peer.Listen("127.0.0.1:0", peer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := raft.ServerAddress(remote.Addr())
	l := newLiveness(local.Ping, nil, timeout)
	defer l.close()
	l.Alive(addr)
	time.Sleep(2 * timeout)
	if !l.Alive(addr) {
		t.Fatal("a running peer is dead")
	}
	remote.Close()
	waitFor(t, 10*time.Second, func() bool { return !l.Alive(addr) }) // closed peer
}

// TestLivenessAnsweringNeedsAnAnswer: Answering, unlike Alive, gives no
// benefit of the doubt — a peer first asked about is not answering until a
// ping comes back — and a peer whose latest ping failed is not answering,
// however recent its last answer (the timeout is long enough here that the
// answer cannot age out within the test's wait).
func TestLivenessAnsweringNeedsAnAnswer(t *testing.T) {
	const timeout = 8 * time.Second // pings every 2 s
	var mu sync.Mutex
	down := false
	ping := func(addr string) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return 0, errors.New("connection refused")
		}
		return time.Millisecond, nil
	}
	l := newLiveness(ping, nil, timeout)
	defer l.close()
	addr := raft.ServerAddress("p:1")
	if l.Answering(addr) {
		t.Fatal("a peer never pinged is answering")
	}
	if !l.Alive(addr) {
		t.Fatal("Alive gives no benefit of the doubt")
	}
	waitFor(t, 5*time.Second, func() bool { return l.Answering(addr) })
	mu.Lock()
	down = true
	mu.Unlock()
	waitFor(t, 5*time.Second, func() bool { return !l.Answering(addr) })
}

// TestLivenessWatchGoneCancels: a watch on a peer that stops answering
// cancels with errPeerGone once the peer is found dead; a watch on a peer
// that answers, or one stopped before, cancels nothing.
func TestLivenessWatchGoneCancels(t *testing.T) {
	const timeout = 100 * time.Millisecond
	silent := make(chan struct{})
	ping := func(addr string) (time.Duration, error) {
		if addr == "cut:1" {
			<-silent // never answers while the test runs
		}
		return time.Millisecond, nil
	}
	l := newLiveness(ping, nil, timeout)
	defer l.close()     // second: it waits for the pings out
	defer close(silent) // first: the silent peer's ping returns

	watch := func(addr raft.ServerAddress) (context.Context, func()) {
		ctx, cancel := context.WithCancelCause(context.Background())
		return ctx, l.watchGone(addr, cancel)
	}
	cut, stopCut := watch("cut:1")
	defer stopCut()
	ok, stopOK := watch("ok:1")
	stopped, stopStopped := watch("cut:1")
	stopStopped()

	select {
	case <-cut.Done():
		if !errors.Is(context.Cause(cut), errPeerGone) {
			t.Fatalf("cause %v, want errPeerGone", context.Cause(cut))
		}
	case <-time.After(20 * unansweredFactor * timeout):
		t.Fatal("the watch on a peer that stopped answering did not cancel")
	}
	if l.Alive("cut:1") {
		t.Fatal("cancelled while the peer still counts as alive")
	}
	stopOK()
	if ok.Err() != nil {
		t.Fatalf("the watch on an answering peer cancelled: %v", context.Cause(ok))
	}
	if stopped.Err() != nil {
		t.Fatal("a stopped watch cancelled")
	}
}

// TestLivenessLostByAsksOverTheMux: LostBy asks another node, over the peer
// transport, whether it lost a node too: no while that node still hears
// from it, yes once it has not for half a timeout. A question asked again
// within a quarter timeout is answered from the last call. A node that
// does not watch the address, or cannot be reached, does not agree; a node
// whose binary predates the call does (it would stand itself).
func TestLivenessLostByAsksOverTheMux(t *testing.T) {
	const timeout = 400 * time.Millisecond
	listen := func() *peer.Mux {
		m, err := peer.Listen("127.0.0.1:0", peer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	asker, other, leader, old, gone := listen(), listen(), listen(), listen(), listen()
	gone.Close()

	nOther := &Node{peers: other}
	nOther.live = newLiveness(other.Ping, nil, timeout)
	defer nOther.live.close()
	other.Handle(callNodeSilence, nOther.handleSilence)

	var mu sync.Mutex
	calls := 0
	nAsker := &Node{peers: asker}
	l := newLiveness(asker.Ping, func(ctx context.Context, by, addr raft.ServerAddress) (time.Duration, bool, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		return nAsker.askSilence(ctx, by, addr)
	}, timeout)
	defer l.close()

	by, lead := raft.ServerAddress(other.Addr()), raft.ServerAddress(leader.Addr())
	nOther.live.Alive(lead) // the other node watches the leader from now on
	waitFor(t, 5*time.Second, func() bool { return nOther.live.Answering(lead) })
	first, again := l.LostBy(by, lead), l.LostBy(by, lead)
	if first || again {
		t.Fatal("a node that hears from the leader agrees it is lost")
	}
	mu.Lock()
	if calls != 1 {
		t.Fatalf("%d calls for one question asked twice at once, want 1", calls)
	}
	mu.Unlock()

	leader.Close()
	waitFor(t, 10*time.Second, func() bool { return l.LostBy(by, lead) })
	if d, watched := nOther.live.silence(lead); !watched || d < timeout/2 {
		t.Fatalf("the other node's silence %v (watched %v) when it agreed", d, watched)
	}

	if l.LostBy(by, "127.0.0.1:1") {
		t.Fatal("a node that does not watch the address agrees it is lost")
	}
	if l.LostBy(raft.ServerAddress(gone.Addr()), lead) {
		t.Fatal("a node that cannot be reached agrees")
	}
	if !l.LostBy(raft.ServerAddress(old.Addr()), lead) {
		t.Fatal("a node without the node.silence call does not agree")
	}
}

// TestAnsweringNow: a peer never asked about answers at once if its ping
// does (Answering would say no until the next round of pings), a peer
// whose ping fails does not, and is not pinged again by the next question.
func TestAnsweringNow(t *testing.T) {
	var mu sync.Mutex
	pinged := map[string]int{}
	ping := func(addr string) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		pinged[addr]++
		if addr == "down:1" {
			return 0, errors.New("connection refused")
		}
		return time.Millisecond, nil
	}
	l := newLiveness(ping, nil, time.Hour) // no round of pings during the test
	defer l.close()
	if l.Answering("up:1") {
		t.Fatal("Answering of a peer never pinged")
	}
	if !l.AnsweringNow("up:2") || !l.Answering("up:2") {
		t.Fatal("AnsweringNow of a peer whose ping answers is false, or its answer was not recorded")
	}
	for range 2 {
		if l.AnsweringNow("down:1") {
			t.Fatal("AnsweringNow of a peer whose ping fails is true")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if pinged["up:2"] != 1 || pinged["down:1"] != 1 {
		t.Fatalf("pings: %v, want one each of up:2 and down:1", pinged)
	}
}
