package node

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fluss-node/fluss-node/node/replica"
)

// diskGuard refuses new writes while the filesystem of the data directory
// has less than storage.min_free_bytes available (replica.Config.SpaceCheck).
//
// A bucket log that runs out of space mid-write fails the write and costs
// its group the leadership (hashicorp/raft steps down when it cannot store
// an entry), and a primary-key replica whose KV store cannot apply a
// committed entry stops the node rather than diverge. Refusing writes while
// some space is left keeps the node serving reads, applying what is already
// committed, running DDL (dropping a table frees space) and retention, and
// gives writers a clear resource_exhausted error instead.
type diskGuard struct {
	dir    string
	min    int64 // bytes; <= 0: the guard is off
	logger *slog.Logger
	// avail returns the bytes of dir's filesystem available to this
	// process (tests replace it).
	avail func(dir string) (int64, error)

	mu      sync.Mutex
	checked time.Time // when avail last ran
	refuse  error     // non-nil while writes are refused
	blind   bool      // the last avail failed (logged once per failing run)
}

// diskCheckEvery is how long a check's answer serves the writes after it: a
// statfs(2) per proposer drain would be cheap, but not free.
const diskCheckEvery = 250 * time.Millisecond

func newDiskGuard(dir string, min int64, logger *slog.Logger) *diskGuard {
	return &diskGuard{dir: dir, min: min, logger: logger, avail: availableBytes}
}

// availableBytes is what statfs(2) says unprivileged writers may still use
// on dir's filesystem (blocks reserved for root do not count).
func availableBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// check returns nil while writes may go on, or an error wrapping
// replica.ErrNoSpace that says why they may not. A filesystem that cannot
// be asked refuses nothing (the write itself will say what is wrong), and
// so does a nil guard.
func (g *diskGuard) check() error {
	if g == nil || g.min <= 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if now.Sub(g.checked) < diskCheckEvery {
		return g.refuse
	}
	g.checked = now
	free, err := g.avail(g.dir)
	if err != nil {
		if !g.blind {
			g.logger.Warn("cannot read the free space of the data directory; not refusing writes", "dir", g.dir, "err", err)
		}
		g.blind, g.refuse = true, nil
		return nil
	}
	g.blind = false
	switch {
	case free < g.min && g.refuse == nil:
		g.logger.Warn("data directory nearly full: refusing writes", "dir", g.dir, "free_bytes", free, "min_free_bytes", g.min)
	case free >= g.min && g.refuse != nil:
		g.logger.Info("data directory has space again: accepting writes", "dir", g.dir, "free_bytes", free, "min_free_bytes", g.min)
	}
	g.refuse = nil
	if free < g.min {
		g.refuse = fmt.Errorf("%w: the data directory %s has %d bytes free (%.1f MiB), less than storage.min_free_bytes (%d, %.1f MiB); writes are refused until space is freed (drop tables or shorten their table.log.ttl, move other files off the disk, or add disk)",
			replica.ErrNoSpace, g.dir, free, float64(free)/(1<<20), g.min, float64(g.min)/(1<<20))
	}
	return g.refuse
}

// spaceCheck is the bucket replicas' SpaceCheck: the disk guard's answer,
// naming this node (in a cluster the refusal comes from the bucket's
// leader, which need not be the node the client called).
func (n *Node) spaceCheck() error {
	if err := n.disk.check(); err != nil {
		return fmt.Errorf("node %d: %w", n.nodeID(), err)
	}
	return nil
}
