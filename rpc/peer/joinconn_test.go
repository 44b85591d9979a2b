package peer

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/hashicorp/yamux"
)

// writeLog is a net.Conn that records each Write as the kernel would see it.
type writeLog struct {
	net.Conn
	writes [][]byte
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

func yamuxHeader(typ byte, length uint32) []byte {
	h := make([]byte, yamuxHeaderSize)
	h[1] = typ
	binary.BigEndian.PutUint32(h[4:], 7) // stream id
	binary.BigEndian.PutUint32(h[8:], length)
	return h
}

func TestJoinConnSendsDataFrameInOneWrite(t *testing.T) {
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
			w := &writeLog{}
			jc := &joinConn{Conn: w}
			for _, p := range c.calls {
				if n, err := jc.Write(p); n != len(p) || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
				}
			}
			if len(w.writes) != len(c.want) {
				t.Fatalf("%d writes reached the connection, want %d", len(w.writes), len(c.want))
			}
			for i := range c.want {
				if !bytes.Equal(w.writes[i], c.want[i]) {
					t.Fatalf("write %d = %x, want %x", i, w.writes[i], c.want[i])
				}
			}
		})
	}
}

// A body too large to copy goes out with its header in one writev; over a
// real socket the reader sees header and body intact and in order.
func TestJoinConnLargeBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	body := bytes.Repeat([]byte("0123456789abcdef"), (joinCopyMax+1024)/16)
	hdr := yamuxHeader(yamuxTypeData, uint32(len(body)))
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		buf := make([]byte, 2*len(hdr)+len(body)+3)
		n := 0
		for n < len(buf) {
			m, err := c.Read(buf[n:])
			if err != nil {
				break
			}
			n += m
		}
		got <- buf[:n]
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	jc := &joinConn{Conn: c}
	small := yamuxHeader(yamuxTypeData, 3)
	for _, p := range [][]byte{hdr, body, small, []byte("xyz")} {
		if n, err := jc.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
	}
	want := slices.Concat(hdr, body, small, []byte("xyz"))
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("reader got %d bytes, want the %d written in order", len(b), len(want))
	}
}

// Under a real yamux session, a stream's data frame reaches the connection
// as one write of header and body (if yamux ever wrote them together,
// joinConn would only pass them through).
func TestJoinConnUnderYamux(t *testing.T) {
	a, b := net.Pipe()
	rec := &recordConn{Conn: a}
	client, err := yamux.Client(&joinConn{Conn: rec}, nil)
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
	if !slices.Contains(rec.sizes, yamuxHeaderSize+len(msg)) {
		t.Fatalf("writes reaching the connection: %v bytes, want one of %d (header and body together)", rec.sizes, yamuxHeaderSize+len(msg))
	}
}

// recordConn passes writes through and records their sizes.
type recordConn struct {
	net.Conn
	mu    sync.Mutex
	sizes []int
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(p))
	r.mu.Unlock()
	return r.Conn.Write(p)
}
