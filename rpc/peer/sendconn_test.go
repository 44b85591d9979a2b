package peer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/yamux"
)

// gateConn is a net.Conn whose Writes each wait for a release and are
// recorded as the kernel would see them, or fail with failWith.
type gateConn struct {
	net.Conn
	release  chan struct{} // one receive per Write; nil: never wait
	failWith error
	closed   atomic.Bool

	mu     sync.Mutex
	writes [][]byte
}

func (g *gateConn) Write(p []byte) (int, error) {
	if g.release != nil {
		<-g.release
	}
	if g.failWith != nil {
		return 0, g.failWith
	}
	g.mu.Lock()
	g.writes = append(g.writes, bytes.Clone(p))
	g.mu.Unlock()
	return len(p), nil
}

func (g *gateConn) Close() error { g.closed.Store(true); return nil }

func (g *gateConn) got() [][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes
}

func yamuxHeader(typ byte, length uint32) []byte {
	h := make([]byte, yamuxHeaderSize)
	h[1] = typ
	binary.BigEndian.PutUint32(h[4:], 7) // stream id
	binary.BigEndian.PutUint32(h[8:], length)
	return h
}

// A data frame's header and body reach the connection in one write;
// every other frame goes out at once, nothing held for later traffic.
func TestSendConnOneWritePerFrame(t *testing.T) {
	const typeWindowUpdate = 1
	body := []byte("append entries")
	cases := []struct {
		name  string
		calls [][]byte // as yamux's send loop writes them
		want  [][]byte // as they reach the connection
	}{
		{"data frame", [][]byte{yamuxHeader(yamuxTypeData, uint32(len(body))), body},
			[][]byte{append(yamuxHeader(yamuxTypeData, uint32(len(body))), body...)}},
		{"window update goes out at once", [][]byte{yamuxHeader(typeWindowUpdate, 0)},
			[][]byte{yamuxHeader(typeWindowUpdate, 0)}},
		{"data frame without body goes out at once", [][]byte{yamuxHeader(yamuxTypeData, 0)},
			[][]byte{yamuxHeader(yamuxTypeData, 0)}},
		{"frames in turn", [][]byte{
			yamuxHeader(typeWindowUpdate, 0),
			yamuxHeader(yamuxTypeData, 3), []byte("abc"),
			yamuxHeader(yamuxTypeData, 2), []byte("de"),
		}, [][]byte{
			yamuxHeader(typeWindowUpdate, 0),
			append(yamuxHeader(yamuxTypeData, 3), "abc"...),
			append(yamuxHeader(yamuxTypeData, 2), "de"...),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := &gateConn{}
				s := newSendConn(g)
				for _, p := range c.calls {
					if n, err := s.Write(p); n != len(p) || err != nil {
						t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
					}
					synctest.Wait() // whatever was taken is written before the next call
				}
				got := g.got()
				if len(got) != len(c.want) {
					t.Fatalf("%d writes reached the connection, want %d", len(got), len(c.want))
				}
				for i := range c.want {
					if !bytes.Equal(got[i], c.want[i]) {
						t.Fatalf("write %d = %x, want %x", i, got[i], c.want[i])
					}
				}
			})
		})
	}
}

// Frames handed over while a write is in the kernel go out together in the
// next write; a lone frame goes out at once.
func TestSendConnGathersWhileWriting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateConn{release: make(chan struct{})}
		b := newSendConn(g)
		for _, p := range []string{"a", "bb", "ccc"} {
			if n, err := b.Write([]byte(p)); n != len(p) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", p, n, err)
			}
			synctest.Wait() // the flusher is in the write of "a"
		}
		g.release <- struct{}{} // "a"
		g.release <- struct{}{} // "bbccc"
		synctest.Wait()
		want := [][]byte{[]byte("a"), []byte("bbccc")}
		if got := g.got(); len(got) != 2 || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Fatalf("writes reaching the connection: %q, want %q", got, want)
		}

		// Idle again: the next frame starts a write of its own.
		go func() { g.release <- struct{}{} }()
		if _, err := b.Write([]byte("d")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := g.got(); len(got) != 3 || string(got[2]) != "d" {
			t.Fatalf("writes reaching the connection: %q, want a third one of \"d\"", got)
		}
	})
}

// A Write that would take the pending bytes past sendMaxPending waits
// until the connection takes them.
func TestSendConnBoundsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateConn{release: make(chan struct{})}
		b := newSendConn(g)
		if _, err := b.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the flusher holds "x" in the kernel
		if _, err := b.Write(make([]byte, sendMaxPending-10)); err != nil {
			t.Fatal(err)
		}
		var done atomic.Bool
		go func() {
			if _, err := b.Write(make([]byte, 20)); err != nil {
				t.Error(err)
			}
			done.Store(true)
		}()
		synctest.Wait()
		if done.Load() {
			t.Fatalf("a Write past %d pending bytes returned before the connection took them", sendMaxPending)
		}
		g.release <- struct{}{} // "x": the flusher takes the pending bytes
		synctest.Wait()
		if !done.Load() {
			t.Fatal("the waiting Write did not return once the pending bytes were taken")
		}
		g.release <- struct{}{}
		g.release <- struct{}{}
		synctest.Wait()
		total := 0
		for _, w := range g.got() {
			total += len(w)
		}
		if want := 1 + sendMaxPending - 10 + 20; total != want {
			t.Fatalf("%d bytes reached the connection, want %d", total, want)
		}
	})
}

// A failed write closes the connection, and every later Write returns the
// error.
func TestSendConnWriteError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("connection reset")
		g := &gateConn{failWith: boom}
		b := newSendConn(g)
		if _, err := b.Write([]byte("a")); err != nil {
			t.Fatalf("first Write = %v, want nil (the failure comes later)", err)
		}
		synctest.Wait()
		if !g.closed.Load() {
			t.Fatal("connection not closed after a failed write")
		}
		if _, err := b.Write([]byte("b")); !errors.Is(err, boom) {
			t.Fatalf("Write after the failure = %v, want %v", err, boom)
		}
	})
}

// Close ends a write in progress and returns once the flush goroutine has;
// later Writes fail and start nothing.
func TestSendConnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateConn{release: make(chan struct{})}
		b := newSendConn(g)
		if _, err := b.Write([]byte("a")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the flusher is in the write of "a"
		closed := make(chan error)
		go func() { closed <- b.Close() }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while the flush goroutine was still writing")
		default:
		}
		close(g.release) // the closed connection ends the write
		if err := <-closed; err != nil {
			t.Fatalf("Close = %v", err)
		}
		if _, err := b.Write([]byte("b")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Write after Close = %v, want net.ErrClosed", err)
		}
		synctest.Wait() // no flush goroutine may be left in the bubble
	})
}

// A buffer larger than sendKeep is not kept, and the buffer being written
// is never the one that takes new bytes: a burst of one big frame between
// small ones leaves every write intact.
func TestSendConnBigBurstBetweenSmall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateConn{release: make(chan struct{})}
		b := newSendConn(g)
		big := bytes.Repeat([]byte("B"), sendKeep+1)
		step := func(p string, release bool) {
			if release {
				g.release <- struct{}{}
			}
			synctest.Wait()
			if p != "" {
				if _, err := b.Write([]byte(p)); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			}
		}
		step("a", false)        // in the kernel: "a"
		step(string(big), true) // "a" done; in the kernel: big
		step("xy", false)       // pending: "xy"
		step("zz", true)        // big done; in the kernel: "xy"; pending: "zz"
		step("", true)          // "xy" done; in the kernel: "zz"
		step("", true)          // "zz" done
		want := []string{"a", string(big), "xy", "zz"}
		got := g.got()
		if len(got) != len(want) {
			t.Fatalf("%d writes reached the connection, want %d", len(got), len(want))
		}
		for i := range want {
			if string(got[i]) != want[i] {
				t.Fatalf("write %d = %.10q (%d bytes), want %.10q", i, got[i], len(got[i]), want[i])
			}
		}
	})
}

// Over a real socket, a send loop's sequence of frames of every kind and
// size (bodies up to past sendMaxPending) arrives intact and in order.
func TestSendConnOverSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		defer c.Close()
		all, _ := io.ReadAll(c)
		received <- all
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := newSendConn(c)
	const typeWindowUpdate = 1
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	write := func(p []byte) {
		if n, err := s.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
		want = append(want, p...)
	}
	for i := range 2000 {
		switch {
		case i%7 == 0:
			write(yamuxHeader(typeWindowUpdate, uint32(i)))
		case i%11 == 0:
			write(yamuxHeader(yamuxTypeData, 0))
		default:
			size := 1 + rng.IntN(4096)
			if i%300 == 1 {
				size = sendMaxPending + 1000
			}
			body := make([]byte, size)
			for j := range body {
				body[j] = byte(i + j)
			}
			write(yamuxHeader(yamuxTypeData, uint32(size)))
			write(body)
		}
	}
	// A session ends with Close whatever is pending; here, wait until the
	// flusher has written everything first.
	for {
		s.mu.Lock()
		idle := !s.flushing
		s.mu.Unlock()
		if idle {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := <-received; !bytes.Equal(got, want) {
		t.Fatalf("reader got %d bytes, want the %d written, in order", len(got), len(want))
	}
}

// Under a real yamux session, a stream's data frame reaches the connection
// with header and body in one write (alone, or with frames around it).
func TestSendConnUnderYamux(t *testing.T) {
	a, b := net.Pipe()
	rec := &recordConn{Conn: a}
	client, err := yamux.Client(newSendConn(rec), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := yamux.Server(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	msg := bytes.Repeat([]byte("r"), 100)
	go func() {
		s, err := client.Open()
		if err == nil {
			_, _ = s.Write(msg)
		}
	}()
	s, err := server.Accept()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("read %q, %v", got, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// The frame is the data header whose body is msg; no write may end
	// inside it.
	all := slices.Concat(rec.writes...)
	start := bytes.Index(all, msg) - yamuxHeaderSize
	if start < 0 || all[start+1] != yamuxTypeData {
		t.Fatalf("no data frame carrying the message among the writes %q", rec.writes)
	}
	end := 0
	for _, w := range rec.writes {
		end += len(w)
		if end > start && end < start+yamuxHeaderSize+len(msg) {
			t.Fatalf("a write ends %d bytes into the data frame: header and body were split", end-start)
		}
	}
}

// recordConn passes writes through and records them.
type recordConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.writes = append(r.writes, bytes.Clone(p))
	r.mu.Unlock()
	return r.Conn.Write(p)
}
