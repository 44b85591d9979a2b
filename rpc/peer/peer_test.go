package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. raft's stock NetworkTransport (compared against in the
// benchmarks only) leaves its inbound connection handlers running after Close; that is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"))
}

func testOpts() Options {
	return Options{RedialMin: 10 * time.Millisecond, RedialMax: 100 * time.Millisecond, RPCTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}
}

func listen(t testing.TB, addr string) *Mux {
	t.Helper()
	var m *Mux
	// Re-listening on a just-closed address can race with the kernel; retry briefly.
	waitFor(t, 5*time.Second, func() error {
		var err error
		m, err = Listen(addr, testOpts())
		return err
	})
	return m
}

func TestRaftGroupsOverMux(t *testing.T) {
	muxes := make([]*Mux, 3)
	for i := range muxes {
		muxes[i] = listen(t, "127.0.0.1:0")
	}
	defer func() {
		for _, m := range muxes {
			m.Close()
		}
	}()
	groups := []string{"meta", "bucket-1", "bucket-2", "bucket-3"}
	cl := map[string][]*replica{}
	newTransport := func(node int, g string) raft.Transport {
		tr, err := muxes[node].Transport(g)
		if err != nil {
			t.Fatalf("Transport(%s) on node %d: %v", g, node, err)
		}
		return tr
	}
	for _, g := range groups {
		trs := make([]raft.Transport, 3)
		for i := range trs {
			trs[i] = newTransport(i, g)
		}
		cl[g] = bootstrap(t, trs)
	}
	defer func() {
		for _, reps := range cl {
			for _, rp := range reps {
				rp.stop(t)
			}
		}
	}()

	t.Run("leaders elected and 1000 applies replicated", func(t *testing.T) {
		for _, g := range groups {
			leaderOf(t, cl[g])
		}
		reps := cl["bucket-1"]
		l := leaderOf(t, reps)
		applyN(t, reps[l].r, 1000)
		for i, rp := range reps {
			waitFor(t, 10*time.Second, func() error {
				if err := sameState(reps[l].fsm, rp.fsm); err != nil {
					return fmt.Errorf("replica %d: %w", i, err)
				}
				return nil
			})
		}
		if n, _, _ := reps[l].fsm.state(); n != 1000 {
			t.Fatalf("leader applied %d commands, want 1000", n)
		}
	})

	t.Run("duplicate group registration fails", func(t *testing.T) {
		if _, err := muxes[0].Transport("meta"); !errors.Is(err, ErrGroupExists) {
			t.Fatalf("err = %v, want ErrGroupExists", err)
		}
	})

	t.Run("unknown group gets an error", func(t *testing.T) {
		tr, err := muxes[0].Transport("only-on-node-0")
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		var resp raft.RequestVoteResponse
		err = tr.RequestVote("n1", raft.ServerAddress(muxes[1].Addr()), &raft.RequestVoteRequest{Term: 1}, &resp)
		if !errors.Is(err, ErrUnknownGroup) || !strings.Contains(err.Error(), "only-on-node-0") {
			t.Fatalf("err = %v, want ErrUnknownGroup naming the group", err)
		}
		// The stream stays usable: a second RPC gets the same answer, not a broken stream.
		err = tr.AppendEntries("n1", raft.ServerAddress(muxes[1].Addr()), &raft.AppendEntriesRequest{Term: 1}, &raft.AppendEntriesResponse{})
		if !errors.Is(err, ErrUnknownGroup) {
			t.Fatalf("second rpc err = %v, want ErrUnknownGroup", err)
		}
		p, err := tr.AppendEntriesPipeline("n1", raft.ServerAddress(muxes[1].Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		f, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 1}, &raft.AppendEntriesResponse{})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Error(); !errors.Is(err, ErrUnknownGroup) {
			t.Fatalf("pipeline err = %v, want ErrUnknownGroup", err)
		}
	})

	t.Run("snapshot installed on a wiped follower", func(t *testing.T) {
		g := "bucket-2"
		reps := cl[g]
		l := leaderOf(t, reps)
		applyN(t, reps[l].r, 300)
		if err := reps[l].r.Snapshot().Error(); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		applyN(t, reps[l].r, 5)
		f := (l + 1) % 3
		node := f
		reps[f].stop(t) // Shutdown closes the group transport, unregistering it on that Mux
		reps[f].logs, reps[f].snaps = raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		reps[f].start(t, newTransport(node, g))
		// While the follower was down the leader's sends failed, and
		// hashicorp/raft backs off exponentially per failure (up to ~10 s a
		// retry): on a loaded machine (-race in CI) the entries after the
		// snapshot can wait a few such rounds.
		waitFor(t, 60*time.Second, func() error { return sameState(reps[l].fsm, reps[f].fsm) })
		if _, _, restored := reps[f].fsm.state(); !restored {
			t.Fatal("wiped follower caught up without restoring a snapshot: InstallSnapshot not exercised")
		}
		if n, _, _ := reps[f].fsm.state(); n != 305 {
			t.Fatalf("follower n = %d, want 305", n)
		}
	})

	t.Run("follower mux closed and reopened catches up", func(t *testing.T) {
		g := "bucket-3"
		reps := cl[g]
		l := leaderOf(t, reps)
		down := (l + 2) % 3
		addr := muxes[down].Addr()
		for _, gg := range groups {
			cl[gg][down].stop(t)
		}
		if err := muxes[down].Close(); err != nil {
			t.Fatalf("close mux: %v", err)
		}
		// Under load the remaining two may re-elect meanwhile: retry as a
		// client would.
		applyNRetry(t, reps, 200)
		muxes[down] = listen(t, addr)
		for _, gg := range groups {
			cl[gg][down].start(t, newTransport(down, gg))
		}
		waitFor(t, 15*time.Second, func() error {
			l := leaderOf(t, reps)
			return sameState(reps[l].fsm, reps[down].fsm)
		})
		if n, _, _ := reps[down].fsm.state(); n < 200 {
			t.Fatalf("restarted follower n = %d, want >= 200", n)
		}
	})
}

func TestCall(t *testing.T) {
	a, b := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	defer a.Close()
	defer b.Close()
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	b.Handle("echo", func(_ context.Context, req []byte) ([]byte, error) {
		return append([]byte("echo:"), req...), nil
	})
	b.Handle("fail", func(context.Context, []byte) ([]byte, error) {
		return nil, errors.New("table shop.orders not found")
	})
	b.Handle("panic", func(context.Context, []byte) ([]byte, error) { panic("boom") })
	b.Handle("block", func(ctx context.Context, _ []byte) ([]byte, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	})
	big := bytes.Repeat([]byte("x"), 3<<20)

	tests := []struct {
		name    string
		handler string
		req     []byte
		ctx     func() (context.Context, context.CancelFunc)
		want    []byte
		wantErr error
		errText string
	}{
		{name: "round trip", handler: "echo", req: []byte("hi"), want: []byte("echo:hi")},
		{name: "empty request", handler: "echo", req: nil, want: []byte("echo:")},
		{name: "large request", handler: "echo", req: big, want: append([]byte("echo:"), big...)},
		{name: "handler error", handler: "fail", wantErr: ErrRemote, errText: "shop.orders not found"},
		{name: "handler panic", handler: "panic", wantErr: ErrRemote, errText: "boom"},
		{name: "unknown handler", handler: "nope", wantErr: ErrUnknownHandler, errText: "nope"},
		{name: "context cancelled in flight", handler: "block", wantErr: context.Canceled, ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}},
		{name: "deadline in flight", handler: "block", wantErr: context.DeadlineExceeded, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}},
		{name: "context already cancelled", handler: "echo", wantErr: context.Canceled, ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			got, err := a.Call(ctx, b.Addr(), tc.handler, tc.req)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.wantErr, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("got %d bytes %.20q, want %d bytes %.20q", len(got), got, len(tc.want), tc.want)
			}
		})
	}
	once.Do(func() { close(release) })

	t.Run("unreachable peer fails then backs off", func(t *testing.T) {
		c := listen(t, "127.0.0.1:0")
		dead := c.Addr()
		c.Close()
		_, err := a.Call(context.Background(), dead, "echo", nil)
		if err == nil || !strings.Contains(err.Error(), dead) {
			t.Fatalf("err = %v, want a dial error naming %s", err, dead)
		}
		_, err = a.Call(context.Background(), dead, "echo", nil)
		if err == nil {
			t.Fatal("second call to a dead peer succeeded")
		}
		// The peer comes back on the same address: calls succeed again after the backoff.
		c = listen(t, dead)
		defer c.Close()
		c.Handle("echo", func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
		waitFor(t, 5*time.Second, func() error {
			_, err := a.Call(context.Background(), dead, "echo", []byte("x"))
			return err
		})
	})

	t.Run("closed mux", func(t *testing.T) {
		c := listen(t, "127.0.0.1:0")
		c.Close()
		if _, err := c.Call(context.Background(), b.Addr(), "echo", nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
		if _, err := c.Transport("g"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Transport err = %v, want ErrClosed", err)
		}
	})
}

func TestBadStreamHeader(t *testing.T) {
	a, b := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	defer a.Close()
	defer b.Close()
	st, err := a.openStream(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetDeadline(time.Now().Add(5 * time.Second))
	// Version 9 from a future binary: answered with a clear error frame.
	if _, err := st.Write([]byte{magic0, magic1, 9, kindRaft, 1, 'g'}); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	status, body, err := readFrame(st, &buf, 1<<20)
	if err != nil {
		t.Fatalf("readFrame: %v", err)
	}
	if err := errorForStatus(status, body); !errors.Is(err, ErrBadHeader) || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("err = %v, want ErrBadHeader about version 9", err)
	}
}

// TestForeignConnection: a connection that does not start with a yamux
// frame (a gossip push/pull, a scanner) or that sends nothing is closed
// by the listener; peers keep being served meanwhile.
func TestForeignConnection(t *testing.T) {
	opts := testOpts()
	opts.RPCTimeout = 300 * time.Millisecond
	b, err := Listen("127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.Handle("echo", func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
	closed := func(c net.Conn) error {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var buf [64]byte
		// Closed with unread bytes in its buffer, the kernel resets it.
		if n, err := c.Read(buf[:]); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
			return fmt.Errorf("read %d bytes, %v; want EOF or a reset", n, err)
		}
		return nil
	}
	// memberlist's push/pull message type is 6.
	gossip, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer gossip.Close()
	if _, err := gossip.Write([]byte{6, 0x80, 0x81}); err != nil {
		t.Fatal(err)
	}
	if err := closed(gossip); err != nil {
		t.Fatalf("gossip bytes: %v", err)
	}
	// Silent, and opened before a real peer: it must not hold the peer up.
	silent, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	a := listen(t, "127.0.0.1:0")
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if got, err := a.Call(ctx, b.Addr(), "echo", []byte("hi")); err != nil || string(got) != "hi" {
		t.Fatalf("peer call next to foreign connections: %q, %v", got, err)
	}
	if err := closed(silent); err != nil {
		t.Fatalf("silent connection: %v", err)
	}
}
