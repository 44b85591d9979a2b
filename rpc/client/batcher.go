package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// batcher sends the calls of many goroutines that meet in flight as one
// request: the batching of Fluss's own client. A call that finds a free
// request slot (fewer than maxInflight requests out) goes out at once,
// alone if it is alone; calls made while every slot is taken queue, and the
// next request carries them all (up to maxBatch). So batching only happens
// under load, where it saves a request per call on both sides. The only
// wait is after a batch: see regather.
//
// A request the server refuses because of something in it (see refuses)
// is sent again call by call, so that one bad input fails only its own
// call; every other error of a request is every call's in it. Callers
// must therefore only batch calls whose refused requests store nothing
// (the API's contract for Lookup and Append: input is validated before
// anything is written).
type batcher[In, Out any] struct {
	maxBatch    int
	maxInflight int
	// send makes one request of the calls' inputs and returns one output
	// per input, in order.
	send func(ctx context.Context, in []In) ([]Out, error)
	// size, when set, is an input's size in bytes: a request then carries
	// at most maxBytes of them (always at least one input).
	size     func(In) int
	maxBytes int

	// linger bounds how long a slot waits for the callers it answered to
	// call again (regather); 0 does not wait.
	linger time.Duration

	mu       sync.Mutex
	queue    []*call[In, Out]
	inflight int       // requests out, each sent by a goroutine holding a slot
	calls    uint64    // calls queued so far
	waiters  []*waiter // slots in regather
}

// waiter is a slot in regather: wake is closed once calls have been
// queued in all or the queue is full.
type waiter struct {
	calls uint64
	wake  chan struct{}
}

// call is one queued call; done is closed once out or err is set.
type call[In, Out any] struct {
	ctx  context.Context
	in   In
	out  Out
	err  error
	done chan struct{}
}

func newBatcher[In, Out any](maxBatch, maxInflight int, linger time.Duration, send func(context.Context, []In) ([]Out, error)) *batcher[In, Out] {
	return &batcher[In, Out]{maxBatch: maxBatch, maxInflight: maxInflight, linger: linger, send: send}
}

// do queues in and waits for its answer or for ctx to end. in must not be
// changed afterwards: it may still wait in the queue when ctx ends.
func (b *batcher[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &call[In, Out]{ctx: ctx, in: in, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	b.calls++
	if len(b.waiters) > 0 {
		b.wakeWaiters()
	}
	send := b.inflight < b.maxInflight
	if send {
		b.inflight++
	}
	b.mu.Unlock()
	if send {
		b.drive(c, 0, 0)
	}
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	}
}

// drive holds one request slot: it sends queued batches until the queue is
// empty, or, when own is set (the caller's call), until own is answered; a
// queue left then, or callers of the last batch that may call again, are
// handed to a new goroutine with the slot. answered is the size of the
// batch the slot answered last, mark the count of calls queued (b.calls)
// when it answered them.
//
// After answering a batch it waits for its callers to call again
// (regather), so that callers in a loop of lookups or appends join the
// next request instead of the slot cutting it with whoever has called so
// far. Without that, a steady load splits into requests of
// whichever callers the scheduler happened to run first (measured: 16
// looping callers, one slot: ~8 keys per request without waiting; 64
// appending goroutines, one slot, three nodes: ~45 rows per request with
// yields to the scheduler until the queue stopped growing, ~64 with the
// wait for all of them, at a third less server CPU per row;
// docs/BENCHMARKS.md).
func (b *batcher[In, Out]) drive(own *call[In, Out], answered int, mark uint64) {
	for {
		if own != nil && own.isDone() {
			// The caller returns now; the slot goes on in a goroutine of its
			// own unless nothing is queued or about to be.
			b.mu.Lock()
			if len(b.queue) == 0 && answered < 2 {
				b.inflight--
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
			go b.drive(nil, answered, mark)
			return
		}
		b.regather(answered, mark)
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.inflight--
			b.mu.Unlock()
			return
		}
		n := b.batchLen()
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		mark = b.sendBatch(batch)
		answered = len(batch)
	}
}

// regather waits, at most b.linger, until answered calls have been queued
// since mark (the callers just answered, if they call again) or the queue
// holds a whole request. Calls that arrive meanwhile from anyone count,
// so a wait is over as soon as the next request would be as large as the
// last. It does not wait after a lone call when nothing else is queued:
// a lone caller's next call goes out at once. (After a lone call with
// others queued it does: two callers in a loop would otherwise go out
// one at a time, each waiting for the other's request.)
func (b *batcher[In, Out]) regather(answered int, mark uint64) {
	if answered == 0 || b.linger <= 0 {
		return
	}
	want := mark + uint64(answered)
	b.mu.Lock()
	if answered < 2 && len(b.queue) == 0 || b.calls >= want || b.full() {
		b.mu.Unlock()
		return
	}
	w := &waiter{calls: want, wake: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	t := time.NewTimer(b.linger)
	select {
	case <-w.wake:
	case <-t.C:
	}
	t.Stop()
	b.mu.Lock()
	b.waiters = slices.DeleteFunc(b.waiters, func(o *waiter) bool { return o == w })
	b.mu.Unlock()
}

// wakeWaiters wakes the lingering slots whose wait is over. Caller holds
// b.mu.
func (b *batcher[In, Out]) wakeWaiters() {
	full := b.full()
	b.waiters = slices.DeleteFunc(b.waiters, func(w *waiter) bool {
		if full || b.calls >= w.calls {
			close(w.wake)
			return true
		}
		return false
	})
}

// full reports whether the queue holds a whole request (maxBatch calls
// or maxBytes), so that waiting for more would not make it larger. Caller
// holds b.mu.
func (b *batcher[In, Out]) full() bool {
	return len(b.queue) >= b.maxBatch || b.batchLen() < len(b.queue)
}

// batchLen is how many queued calls the next request carries: at most
// maxBatch and, with size, at most maxBytes, but at least one. Caller holds
// b.mu.
func (b *batcher[In, Out]) batchLen() int {
	n := min(len(b.queue), b.maxBatch)
	if b.size == nil {
		return n
	}
	bytes := 0
	for i, c := range b.queue[:n] {
		if bytes += b.size(c.in); bytes > b.maxBytes && i > 0 {
			return i
		}
	}
	return n
}

// sendBatch sends batch in one request and answers every call in it. It
// returns b.calls as it was when the request came back, before any of its
// calls was answered.
func (b *batcher[In, Out]) sendBatch(batch []*call[In, Out]) (mark uint64) {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.finish(*new(Out), err) // the caller is gone: not worth sending
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return b.callCount()
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	outs, err := b.request(ctx, live)
	mark = b.callCount()
	if err != nil && len(live) > 1 && refuses(err) {
		// One input may have spoiled the request: send each alone.
		for _, c := range live {
			outs, err := b.request(ctx, []*call[In, Out]{c})
			if err != nil {
				c.finish(*new(Out), err)
				continue
			}
			c.finish(outs[0], nil)
		}
		return mark
	}
	for i, c := range live {
		if err != nil {
			c.finish(*new(Out), err)
			continue
		}
		c.finish(outs[i], nil)
	}
	return mark
}

// callCount returns b.calls.
func (b *batcher[In, Out]) callCount() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// request sends the inputs of calls and checks one output came per input.
func (b *batcher[In, Out]) request(ctx context.Context, calls []*call[In, Out]) ([]Out, error) {
	in := make([]In, len(calls))
	for i, c := range calls {
		in[i] = c.in
	}
	out, err := b.send(ctx, in)
	if err == nil && len(out) != len(in) {
		return nil, fmt.Errorf("response has %d answers for %d requests", len(out), len(in))
	}
	return out, err
}

// refuses reports whether err is the server refusing something in the
// request (an input) rather than failing to serve it.
func refuses(err error) bool {
	return connect.CodeOf(err) == connect.CodeInvalidArgument
}

// batchContext bounds a batch request by the latest deadline among its
// callers, or none when one has none: a caller that gives up early only
// stops waiting; it does not cut the others' request short.
func batchContext[In, Out any](calls []*call[In, Out]) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

func (c *call[In, Out]) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *call[In, Out]) finish(out Out, err error) {
	c.out, c.err = out, err
	close(c.done)
}
