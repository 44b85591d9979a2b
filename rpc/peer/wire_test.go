package peer

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

func TestHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    streamHeader
		wantErr error
	}{
		{name: "raft", in: mustAppendHeader(t, kindRaft, "bucket-7"), want: streamHeader{Version, kindRaft, "bucket-7"}},
		{name: "call", in: mustAppendHeader(t, kindCall, "forward"), want: streamHeader{Version, kindCall, "forward"}},
		{name: "bad magic", in: []byte{'X', 'P', 1, 1, 1, 'g'}, wantErr: ErrBadHeader},
		{name: "future version", in: []byte{'F', 'P', 2, 1, 1, 'g'}, wantErr: ErrBadHeader},
		{name: "unknown kind", in: []byte{'F', 'P', 1, 7, 1, 'g'}, wantErr: ErrBadHeader},
		{name: "empty name", in: []byte{'F', 'P', 1, 1, 0}, wantErr: ErrBadHeader},
		{name: "truncated name", in: []byte{'F', 'P', 1, 1, 5, 'g'}, wantErr: ErrBadHeader},
		{name: "short", in: []byte{'F'}, wantErr: ErrBadHeader},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readHeader(bytes.NewReader(tc.in))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := appendHeader(nil, kindRaft, string(make([]byte, 256))); !errors.Is(err, ErrBadHeader) {
		t.Fatalf("256-byte name: err = %v, want ErrBadHeader", err)
	}
}

func mustAppendHeader(t testing.TB, kind byte, name string) []byte {
	b, err := appendHeader(nil, kind, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("n0"), Addr: []byte("127.0.0.1:1")},
		Term:      3, PrevLogEntry: 10, PrevLogTerm: 2, LeaderCommitIndex: 9,
		Entries: []*raft.Log{{Index: 11, Term: 3, Type: raft.LogCommand, Data: []byte("hello")}},
	}
	cs := getCodec()
	defer putCodec(cs)
	cs.w.b = cs.w.b[:0]
	buf, err := cs.encodeFrame(typeAppendEntries, req)
	if err != nil {
		t.Fatal(err)
	}
	frame := append([]byte(nil), buf...)
	var rbuf []byte
	typ, body, err := readFrame(bytes.NewReader(frame), &rbuf, 1<<20)
	if err != nil || typ != typeAppendEntries {
		t.Fatalf("readFrame: typ %d err %v", typ, err)
	}
	cmd, err := cs.decodeRequest(typ, body)
	if err != nil {
		t.Fatal(err)
	}
	got := cmd.(*raft.AppendEntriesRequest)
	// Decoded slices must not alias the (reused) frame buffer.
	for i := range rbuf {
		rbuf[i] = 0
	}
	if got.Term != 3 || got.PrevLogEntry != 10 || len(got.Entries) != 1 || string(got.Entries[0].Data) != "hello" || string(got.RPCHeader.ID) != "n0" {
		t.Fatalf("decoded %+v", got)
	}
	if isHeartbeat(got) {
		t.Fatal("append with entries classified as heartbeat")
	}
	if !isHeartbeat(&raft.AppendEntriesRequest{Term: 1, RPCHeader: raft.RPCHeader{Addr: []byte("a")}}) {
		t.Fatal("heartbeat not recognised")
	}

	t.Run("limits", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			in   []byte
			want error
		}{
			{"zero length", []byte{0, 0, 0, 0, 1}, ErrBadFrame},
			{"too large", []byte{0, 0x10, 0, 0, 1}, ErrBadFrame},
			{"truncated body", []byte{0, 0, 0, 9, 1, 1}, ErrBadFrame},
			{"truncated header", []byte{0, 0}, io.ErrUnexpectedEOF},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var b []byte
				if _, _, err := readFrame(bytes.NewReader(tc.in), &b, 1<<20); !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
			})
		}
	})
}

// FuzzStreamHeader: readHeader never panics and accepts only what appendHeader produces.
func FuzzStreamHeader(f *testing.F) {
	for _, s := range [][]byte{
		mustAppendHeader(f, kindRaft, "bucket-1"), mustAppendHeader(f, kindCall, "x"),
		{'F', 'P', 2, 1, 1, 'g'}, {'F', 'P', 1, 1, 255}, {},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := readHeader(bytes.NewReader(in))
		if err != nil {
			return
		}
		re, err := appendHeader(nil, h.kind, h.name)
		if err != nil {
			t.Fatalf("accepted header %+v does not re-encode: %v", h, err)
		}
		if !bytes.HasPrefix(in, re) {
			t.Fatalf("re-encoded %x is not a prefix of input %x", re, in)
		}
	})
}

// FuzzFrame: frame reading and raft request/response decoding never panic on any bytes.
func FuzzFrame(f *testing.F) {
	cs := getCodec()
	for typ, v := range map[byte]any{
		typeAppendEntries:   &raft.AppendEntriesRequest{Term: 2, Entries: []*raft.Log{{Index: 1, Data: []byte("x")}}},
		typeRequestVote:     &raft.RequestVoteRequest{Term: 1, LastLogIndex: 4},
		typeRequestPreVote:  &raft.RequestPreVoteRequest{Term: 1},
		typeTimeoutNow:      &raft.TimeoutNowRequest{},
		typeInstallSnapshot: &raft.InstallSnapshotRequest{Size: 10, Configuration: []byte("c")},
	} {
		cs.w.b = cs.w.b[:0]
		b, err := cs.encodeFrame(typ, v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte(nil), b...))
	}
	putCodec(cs)
	f.Add([]byte{0, 0, 0, 1, 9})
	f.Add([]byte{0, 0, 0, 3, 1, 0x91, 0xc1})
	f.Fuzz(func(t *testing.T, in []byte) {
		var rbuf []byte
		r := bytes.NewReader(in)
		cs := getCodec()
		defer putCodec(cs)
		for {
			typ, body, err := readFrame(r, &rbuf, 1<<16)
			if err != nil {
				return
			}
			_, _ = cs.decodeRequest(typ, body)
			_ = cs.decode(body, &raft.AppendEntriesResponse{})
			_ = errorForStatus(typ, body)
		}
	})
}
