package rpc

import (
	"context"
	"fmt"
	"sync/atomic"

	"connectrpc.com/connect"
	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/proto"
)

// gateMinBytes: requests smaller than this pass the gate without being
// counted. They cannot hold much memory each, and the write path of small
// requests (the most frequent) stays free of a shared lock.
const gateMinBytes = 64 << 10

// requestGate bounds the bytes of large requests the node works on at once
// (limits.max_inflight_request_bytes). A request message is already read
// when it reaches a handler, but turning it into batches takes many times
// its size: a JSON body becomes Arrow column buffers and an encoded
// batch (~8x the body at the peak, with the garbage the collector has not
// freed yet, though large row sets are parsed one row at a time), so a
// handful of concurrent 64 MiB JSON requests would take gigabytes. A large request therefore waits here, in arrival
// order, until the requests before it have answered; a request larger
// than the whole budget goes through alone. Waiting ends with the
// request's context (its deadline, or the client going away).
type requestGate struct {
	sem   *semaphore.Weighted
	limit int64
	held  atomic.Int64 // bytes of the requests inside, for the metric
}

func newRequestGate(limit int64) *requestGate {
	return &requestGate{sem: semaphore.NewWeighted(limit), limit: limit}
}

// enter waits until a request of n bytes may go on and returns the
// function that lets it out. Small requests do not wait.
func (g *requestGate) enter(ctx context.Context, n int) (leave func(), err error) {
	if g == nil || n < gateMinBytes {
		return func() {}, nil
	}
	w := min(int64(n), g.limit)
	if err := g.sem.Acquire(ctx, w); err != nil {
		return nil, fmt.Errorf("waiting for other large requests to finish (limits.max_inflight_request_bytes = %d): %w", g.limit, err)
	}
	g.held.Add(w)
	return func() {
		g.held.Add(-w)
		g.sem.Release(w)
	}, nil
}

// Held is the bytes of the requests inside the gate now.
func (g *requestGate) Held() int64 { return g.held.Load() }

// gateInterceptor passes every unary request through the gate, sized by
// its message. Streams (Scan) send small requests and are not gated.
type gateInterceptor struct{ g *requestGate }

func (gi gateInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		var size int
		if m, ok := req.Any().(proto.Message); ok {
			size = proto.Size(m)
		}
		leave, err := gi.g.enter(ctx, size)
		if err != nil {
			return nil, err
		}
		defer leave() // also when the handler panics
		return next(ctx, req)
	}
}

func (gateInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (gateInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
