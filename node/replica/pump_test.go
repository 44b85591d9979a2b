package replica

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// pumpTuning is testTuning with timeouts long enough for a loaded test
// machine (the pump's margin is the heartbeat timeout) and raft's idle
// AppendEntries made rare (CommitTimeout 1 h), so that between writes only
// heartbeats reach the followers.
func pumpTuning() RaftTuning {
	t := testTuning()
	t.HeartbeatTimeout, t.ElectionTimeout, t.LeaderLeaseTimeout = 250*time.Millisecond, 250*time.Millisecond, 250*time.Millisecond
	t.CommitTimeout = time.Hour
	return t
}

// pumpInterval is the interval the node uses: two fifths of the heartbeat
// timeout.
func pumpInterval() time.Duration { return pumpTuning().HeartbeatTimeout * 2 / 5 }

// pumped returns a cluster tweak that puts every replica on pump with
// pumpTuning.
func pumped(pump *HeartbeatPump) func(*Config) {
	return func(cfg *Config) {
		cfg.Pump = pump
		cfg.Raft = pumpTuning()
	}
}

// timeoutsAre checks r's raft heartbeat and election timeouts.
func timeoutsAre(r *Replica, heartbeat, election time.Duration) error {
	rc := r.Raft().ReloadableConfig()
	if rc.HeartbeatTimeout != heartbeat || rc.ElectionTimeout != election {
		return fmt.Errorf("timeouts %v/%v, want %v/%v", rc.HeartbeatTimeout, rc.ElectionTimeout, heartbeat, election)
	}
	return nil
}

// pumpedOnly checks that the leader i runs on the pump (raised timeouts)
// and every other open replica on its own.
func (c *testCluster) pumpedOnly(i int) error {
	base := pumpTuning()
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, r := range c.reps {
		if r == nil {
			continue
		}
		hb, el := base.HeartbeatTimeout, base.ElectionTimeout
		if j == i {
			hb, el = leaderHeartbeatScale*hb, leaderHeartbeatScale*el
		}
		if err := timeoutsAre(r, hb, el); err != nil {
			return fmt.Errorf("replica %d (leader %d): %w", j, i, err)
		}
	}
	return nil
}

// TestHeartbeatPumpHoldsLeadership: with the pump, only the leader's raft
// timeouts are raised (its own heartbeats then come every 1-2 follower
// timeouts, too rarely to hold the followers), yet the leadership holds for
// many follower timeouts because the pump's heartbeats reach them; writes
// go through; and the raised timeouts follow leadership through a transfer
// and a crash.
func TestHeartbeatPumpHoldsLeadership(t *testing.T) {
	pump := NewHeartbeatPump(pumpInterval())
	defer pump.Close()
	c := newTestClusterWith(t, 3, pumped(pump))
	defer c.closeAll()
	leader := func() (int, error) {
		i := c.leader()
		if i < 0 {
			return -1, errors.New("no leader")
		}
		return i, c.pumpedOnly(i)
	}
	var first int
	waitFor(t, 10*time.Second, func() (err error) {
		first, err = leader()
		return err
	})
	term := c.reps[first].Raft().CurrentTerm()

	// 18 follower timeouts with a write every 6: no election.
	for s := int32(0); s < 3; s++ {
		if _, err := c.append([][]byte{makeBatch(1, fmt.Sprintf("s%d", s))}, 1, s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * pumpTuning().HeartbeatTimeout)
	}
	if i := c.leader(); i != first {
		t.Fatalf("leader %d, was %d", i, first)
	}
	for i, r := range c.reps {
		if got := r.Raft().CurrentTerm(); got != term {
			t.Fatalf("replica %d in term %d, the leader was elected in %d: a follower stood for election", i, got, term)
		}
	}

	// A transfer moves the raised timeouts to the new leader and gives
	// the old one its own back.
	if err := c.reps[first].Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	var second int
	waitFor(t, 10*time.Second, func() (err error) {
		second, err = leader()
		if err == nil && second == first {
			err = errors.New("leadership still on the first leader")
		}
		return err
	})

	// The leader crashes: the others elect one of them, which is pumped.
	c.closeReplica(second)
	waitFor(t, 10*time.Second, func() (err error) {
		i, err := leader()
		if err == nil && i == second {
			err = errors.New("closed replica leads")
		}
		return err
	})
	if _, err := c.append([][]byte{makeBatch(1, "after")}, 1, 3); err != nil {
		t.Fatal(err)
	}
	pump.mu.Lock()
	n := len(pump.groups)
	pump.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d groups on the pump, want the one leader", n)
	}
}

// TestHeartbeatPumpForgetsClosedReplicas: a leader that closes is taken
// off the pump.
func TestHeartbeatPumpForgetsClosedReplicas(t *testing.T) {
	pump := NewHeartbeatPump(pumpInterval())
	defer pump.Close()
	c := newTestClusterWith(t, 1, pumped(pump))
	waitFor(t, 10*time.Second, func() error {
		if c.leader() != 0 {
			return errors.New("no leader")
		}
		return c.pumpedOnly(0)
	})
	c.closeAll()
	pump.mu.Lock()
	defer pump.mu.Unlock()
	if len(pump.groups) != 0 {
		t.Fatalf("%d groups still on the pump after close", len(pump.groups))
	}
}
