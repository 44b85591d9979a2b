package logstore

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// Deferred syncs. With SyncAlways a StoreLogs normally returns only once
// its entries are durable. A log whose raft group has this node as its only
// voter may defer that (SetDeferSync): StoreLogs then returns once the
// entries are written, their sync runs in the background (still through
// the node's Syncer), and whoever must not act on an entry before it is
// durable waits with WaitDurable. hashicorp/raft writes the leader's log on
// its leader loop; with the sync deferred the loop goes on gathering the
// next entry while the Syncer flushes the last one, instead of sitting out
// a whole sync round per entry.
//
// This is only sound while no other server counts this log toward a
// quorum: raft takes a stored entry as this server's vote for committing
// it. The replica therefore turns deferral off (which flushes the log)
// before its group sends anything to another server.
//
// A leader of several voters may defer too (SetDeferWhen), writing its
// log while its followers store theirs, as the Raft thesis (§10.2.1)
// allows, if nothing acts on an entry's commitment before the leader
// holds it durably: raft counts the leader's stored entry toward the
// quorum at once, so the leader's FSM waits with WaitDurable, the commit
// index it sends its followers is held below PendingSync, and a server
// that leads no more acknowledges no entry before WaitSynced (its
// entries may still be in a deferred sync when the next leader's
// AppendEntries finds them already stored). node/replica does all three.

// durability tracks the highest raft index known durable.
type durability struct {
	mu    sync.Mutex
	index uint64        // entries up to here are durable
	upTo  uint64        // the last entry stored with a deferred sync; > index: a sync is pending
	gen   uint64        // bumped when the tail is deleted: older syncs no longer count
	err   error         // set: every wait fails with it
	ch    chan struct{} // closed and replaced when index or err changes
}

func (d *durability) init(index uint64) {
	d.index, d.ch = index, make(chan struct{})
}

// generation is the current generation; a sync started now advances the
// index only if no tail was deleted meanwhile.
func (d *durability) generation() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// advance records that entries up to index are durable, if gen is still
// current.
func (d *durability) advance(gen, index uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen != d.gen || index <= d.index || d.err != nil {
		return
	}
	d.index = index
	close(d.ch)
	d.ch = make(chan struct{})
}

// deferring records that the entries up to last wait for a deferred sync.
func (d *durability) deferring(last uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.upTo = max(d.upTo, last)
}

// truncate records that entries after last were deleted. Deferred syncs
// have all finished by then (Log.mutate).
func (d *durability) truncate(last uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	d.index = min(d.index, last)
	d.upTo = min(d.upTo, last)
}

// pending is the first index whose deferred sync has not finished, 0 if
// none.
func (d *durability) pending() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.upTo > d.index {
		return d.index + 1
	}
	return 0
}

// fail makes every present and future wait fail with err (the first one
// given wins).
func (d *durability) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return
	}
	d.err = err
	close(d.ch)
}

// wait blocks until the entries up to index are durable; with synced set
// only until none of them waits for a deferred sync (an entry stored
// without deferral is durable once stored, or, with SyncInterval, never
// promised to be).
func (d *durability) wait(index uint64, synced bool) error {
	for {
		d.mu.Lock()
		if synced {
			index = min(index, d.upTo)
		}
		done, err, ch := d.index >= index, d.err, d.ch
		d.mu.Unlock()
		switch {
		case done:
			return nil
		case err != nil:
			return err
		}
		<-ch
	}
}

// SetDeferSync turns deferred syncs on or off (see above; default off).
// Turning them off makes everything stored so far durable before it
// returns, and every later StoreLogs syncs before it returns again. It
// changes nothing in SyncInterval mode.
func (l *Log) SetDeferSync(on bool) error {
	if on {
		l.deferSync.Store(true)
		return nil
	}
	if !l.deferSync.Swap(false) {
		return nil
	}
	// A StoreLogs in progress finishes its write first; the sync covers it.
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	closed, last := l.closed, l.lastIndex
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if n := len(l.segs); n > 0 && l.opts.SyncMode == SyncAlways {
		s := l.segs[n-1]
		if err := l.syncFile(s.f); err != nil {
			err = fmt.Errorf("logstore: sync %s: %w", s.name(), err)
			l.dur.fail(err)
			return err
		}
	}
	l.dur.advance(l.dur.generation(), last)
	return nil
}

// WaitDurable blocks until the entries up to index are durable. It fails
// once the log is closed, or for good after a deferred sync failed: the
// log's tail is then in an unknown state, and the only safe way on is a
// restart that recovers it from the disk.
func (l *Log) WaitDurable(index uint64) error { return l.dur.wait(index, false) }

// SetDeferWhen makes StoreLogs defer the sync of the entries for which
// when returns true (see above); nil (the default) defers none. The
// sole-voter switch (SetDeferSync) defers regardless. when is called on
// the goroutine of StoreLogs with the entries it stores.
func (l *Log) SetDeferWhen(when func(logs []*raft.Log) bool) {
	if when == nil {
		l.deferWhen.Store(nil)
		return
	}
	l.deferWhen.Store(&when)
}

// shouldDefer reports whether StoreLogs defers the sync of logs.
func (l *Log) shouldDefer(logs []*raft.Log) bool {
	if l.deferSync.Load() {
		return true
	}
	when := l.deferWhen.Load()
	return when != nil && (*when)(logs)
}

// PendingSync is the first raft index whose deferred sync has not
// finished, or 0 when no sync is pending: a leader that defers must not
// tell its followers of a commit index at or past it.
func (l *Log) PendingSync() uint64 { return l.dur.pending() }

// WaitSynced blocks until no entry up to index waits for a deferred sync
// (at once when none does). It fails as WaitDurable does.
func (l *Log) WaitSynced(index uint64) error { return l.dur.wait(index, true) }

// syncDeferred is a deferred StoreLogs' sync of f, whose entries end at
// last.
func (l *Log) syncDeferred(f File, last, gen uint64) {
	then := func(err error) { l.deferredSynced(err, last, gen) }
	if l.opts.Syncer != nil {
		l.opts.Syncer.SyncThen(f, then)
		return
	}
	go func() { then(f.Sync()) }()
}

// deferredSynced records the outcome of a deferred sync. With a Syncer it
// runs on the Syncer's goroutine: it only takes the log's locks for reading
// and the durability's.
func (l *Log) deferredSynced(err error, last, gen uint64) {
	defer l.deferred.Done()
	if err == nil {
		l.dur.advance(gen, last)
		return
	}
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed || gen != l.dur.generation() {
		return // the log was closed or its tail deleted: nothing waits on this sync
	}
	l.log.Error("logstore: deferred sync failed; no entry after the last durable one will be applied", "dir", l.opts.Dir, "err", err)
	l.dur.fail(fmt.Errorf("logstore: sync of deferred entries up to raft index %d: %w", last, err))
}
