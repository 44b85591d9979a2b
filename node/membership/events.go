package membership

import (
	"sync"
	"sync/atomic"
)

// EventType says what happened to a member.
type EventType uint8

// Event types.
const (
	EventJoin     EventType = iota + 1 // a member became alive (new, or back after dead/left)
	EventUpdate                        // a member's meta (state, addresses) changed
	EventLeave                         // a member left on purpose (Leave)
	EventFailed                        // a member was declared dead by failure detection
	EventConflict                      // another process claims a member's id at another address
)

func (t EventType) String() string {
	switch t {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventLeave:
		return "leave"
	case EventFailed:
		return "failed"
	case EventConflict:
		return "conflict"
	}
	return "unknown"
}

// Event is one membership change. For EventConflict, Member is the process
// that claims the id (its address and, if decodable, its meta).
type Event struct {
	Type   EventType
	Member Member
}

// eventQueue is a bounded channel whose producer never blocks: when the
// channel is full, the oldest event is dropped and counted.
type eventQueue struct {
	mu      sync.Mutex // serializes producers and close
	ch      chan Event
	closed  bool
	dropped atomic.Uint64
}

func newEventQueue(n int) *eventQueue { return &eventQueue{ch: make(chan Event, n)} }

func (q *eventQueue) push(ev Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	for {
		select {
		case q.ch <- ev:
			return
		default:
		}
		// Full: drop the oldest. Only this (locked) producer adds, so the
		// loop ends after at most a few rounds.
		select {
		case <-q.ch:
			q.dropped.Add(1)
		default:
		}
	}
}

func (q *eventQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
}
