package client

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// batcher sends the calls of many goroutines that meet in flight as one
// request: the batching of Fluss's own client, without a timer. A call
// that finds a free request slot (fewer than maxInflight requests out) goes
// out at once, alone if it is alone; calls made while every slot is taken
// queue, and the next request carries them all (up to maxBatch). So
// batching only happens under load, where it saves a request per call on
// both sides.
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

	mu       sync.Mutex
	queue    []*call[In, Out]
	inflight int // requests out, each sent by a goroutine holding a slot
}

// call is one queued call; done is closed once out or err is set.
type call[In, Out any] struct {
	ctx  context.Context
	in   In
	out  Out
	err  error
	done chan struct{}
}

func newBatcher[In, Out any](maxBatch, maxInflight int, send func(context.Context, []In) ([]Out, error)) *batcher[In, Out] {
	return &batcher[In, Out]{maxBatch: maxBatch, maxInflight: maxInflight, send: send}
}

// do queues in and waits for its answer or for ctx to end. in must not be
// changed afterwards: it may still wait in the queue when ctx ends.
func (b *batcher[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &call[In, Out]{ctx: ctx, in: in, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	send := b.inflight < b.maxInflight
	if send {
		b.inflight++
	}
	b.mu.Unlock()
	if send {
		b.drive(c, 0)
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
// batch the slot answered last.
//
// After answering a batch of several calls it lets their callers run
// first (regather): those that call again at once (a loop of lookups or
// appends) join the next request instead of finding the slot free and
// going out alone, with everyone else queued behind them. Without it, a
// steady load split into two alternating requests, each caller waiting for
// both (measured: 16 looping callers, one slot: ~8 keys per request at p50
// 490 µs; with one yield ~13 keys at p50 375 µs; 64 appending goroutines,
// one slot, three nodes: ~40 rows per request with one yield, ~46 with
// regather). Yields are no timer: when nobody calls again, the next request
// goes out as soon as the scheduler comes back.
func (b *batcher[In, Out]) drive(own *call[In, Out], answered int) {
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
			go b.drive(nil, answered)
			return
		}
		b.regather(answered)
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
		b.sendBatch(batch)
		answered = len(batch)
	}
}

// regather lets the callers of a just-answered batch of answered calls
// call again before the next request is cut: it yields to the scheduler
// until the queue holds maxBatch calls, three yields in a row added none,
// or it has yielded once per answered call.
func (b *batcher[In, Out]) regather(answered int) {
	if answered < 2 {
		return
	}
	b.mu.Lock()
	n := len(b.queue)
	b.mu.Unlock()
	for idle := 0; idle < 3 && answered > 0; answered-- {
		runtime.Gosched()
		b.mu.Lock()
		m := len(b.queue)
		b.mu.Unlock()
		if m >= b.maxBatch {
			return
		}
		if m <= n {
			idle++
		} else {
			idle = 0
		}
		n = m
	}
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

// sendBatch sends batch in one request and answers every call in it.
func (b *batcher[In, Out]) sendBatch(batch []*call[In, Out]) {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.finish(*new(Out), err) // the caller is gone: not worth sending
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	outs, err := b.request(ctx, live)
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
		return
	}
	for i, c := range live {
		if err != nil {
			c.finish(*new(Out), err)
			continue
		}
		c.finish(outs[i], nil)
	}
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
