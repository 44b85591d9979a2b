package membership

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	cases := map[string]Meta{
		"minimal": {ID: 1},
		"full": {ID: 7, ClientAddr: "10.0.0.7:9123", PeerAddr: "10.0.0.7:9124",
			Version: "0.3.1-dev", State: StateDraining, FeatureLevel: 3},
		"max id":   {ID: 1<<31 - 1, State: StateActive, FeatureLevel: 1<<32 - 1},
		"unicode":  {ID: 3, Version: "v1 – ünïcode", State: StateJoining},
		"newstate": {ID: 4, State: "upgrading"},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			prefix := []byte("keep")
			b, err := in.AppendBinary(prefix)
			if err != nil {
				t.Fatalf("AppendBinary: %v", err)
			}
			if string(b[:4]) != "keep" {
				t.Fatalf("AppendBinary clobbered the caller's prefix: %q", b[:4])
			}
			out, err := DecodeMeta(b[4:])
			if err != nil {
				t.Fatalf("DecodeMeta: %v", err)
			}
			if out != in {
				t.Fatalf("round trip: got %+v, want %+v", out, in)
			}
		})
	}
}

// TestMetaGolden pins the wire format: a change here breaks mixed-version
// clusters.
func TestMetaGolden(t *testing.T) {
	m := Meta{ID: 300, ClientAddr: "a:1", PeerAddr: "b:2", Version: "1.0", State: StateActive, FeatureLevel: 2}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	const want = "01" + "0102ac02" + "0203613a31" + "0303623a32" + "0403312e30" + "050661637469766" + "5" + "060102"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("encoding changed:\n got %s\nwant %s", got, want)
	}
}

// TestMetaVersionCompat: a newer binary adds fields (tags this binary does
// not know); this decoder keeps the fields it knows and skips the rest.
func TestMetaVersionCompat(t *testing.T) {
	old := Meta{ID: 9, ClientAddr: "h:1", PeerAddr: "h:2", Version: "2.0", State: StateActive, FeatureLevel: 5}
	b, err := old.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Newer fields: tag 7 (a varint), tag 8 (a string), tag 300 (bytes).
	b = appendUintField(b, 7, 1)
	b = appendStringField(b, 8, "rack-a/zone-1")
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendUvarint(b, 3)
	b = append(b, 0xff, 0x00, 0x01)
	got, err := DecodeMeta(b)
	if err != nil {
		t.Fatalf("old decoder rejects newer meta: %v", err)
	}
	if got != old {
		t.Fatalf("got %+v, want %+v", got, old)
	}
}

func TestDecodeMetaErrors(t *testing.T) {
	valid, _ := Meta{ID: 5, State: StateActive}.MarshalBinary()
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrMetaCorrupt},
		{"format 2", append([]byte{2}, valid[1:]...), ErrMetaVersion},
		{"format 0", []byte{0}, ErrMetaVersion},
		{"no id", []byte{1}, ErrMetaCorrupt},
		{"tag 0", []byte{1, 0, 0}, ErrMetaCorrupt},
		{"truncated tag", []byte{1, 0x80}, ErrMetaCorrupt},
		{"truncated length", []byte{1, 1}, ErrMetaCorrupt},
		{"overrun", []byte{1, 1, 5, 1}, ErrMetaCorrupt},
		{"id zero", []byte{1, 1, 1, 0}, ErrMetaCorrupt},
		{"id > int32", []byte{1, 1, 5, 0x80, 0x80, 0x80, 0x80, 0x08}, ErrMetaCorrupt},
		{"id trailing byte", []byte{1, 1, 2, 1, 0}, ErrMetaCorrupt},
		{"duplicate id", []byte{1, 1, 1, 1, 1, 1, 2}, ErrMetaCorrupt},
		{"out of order", []byte{1, 2, 1, 'x', 1, 1, 1}, ErrMetaCorrupt},
		{"huge length", append([]byte{1, 1}, binary.AppendUvarint(nil, 1<<62)...), ErrMetaCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeMeta(c.in)
			if !errors.Is(err, c.want) {
				t.Fatalf("DecodeMeta(%x) = %v, want %v", c.in, err, c.want)
			}
		})
	}
}

func TestMetaValidate(t *testing.T) {
	cases := []struct {
		name string
		meta Meta
		want error
	}{
		{"ok", Meta{ID: 1, State: StateJoining}, nil},
		{"zero id", Meta{ID: 0, State: StateJoining}, ErrInvalidMeta},
		{"negative id", Meta{ID: -4, State: StateJoining}, ErrInvalidMeta},
		{"unknown state", Meta{ID: 1, State: "sleeping"}, ErrInvalidMeta},
		{"too large", Meta{ID: 1, State: StateActive, Version: strings.Repeat("v", MaxMetaSize)}, ErrMetaTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.meta.Validate()
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Validate() = %v, want %v", err, c.want)
			}
		})
	}
}

func TestAppendBinaryTooLargeLeavesDst(t *testing.T) {
	dst := []byte("abc")
	out, err := Meta{ID: 1, PeerAddr: strings.Repeat("p", 600)}.AppendBinary(dst)
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("err = %v, want ErrMetaTooLarge", err)
	}
	if string(out) != "abc" {
		t.Fatalf("dst changed on error: %q", out)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []Meta{
		{ID: 1},
		{ID: 2, ClientAddr: "127.0.0.1:9123", PeerAddr: "127.0.0.1:9124", Version: "0.1.0", State: StateActive, FeatureLevel: 1},
		{ID: 1<<31 - 1, State: StateLeft},
	} {
		b, err := m.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(appendStringField(b, 9, "future"))
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, 1, 1, 0})
	f.Add([]byte{2, 1, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			return
		}
		if m.ID <= 0 {
			t.Fatalf("decoded a non-positive id %d without error", m.ID)
		}
		enc, err := m.AppendBinary(nil)
		if err != nil {
			if errors.Is(err, ErrMetaTooLarge) && len(b) > MaxMetaSize {
				return
			}
			t.Fatalf("re-encode of %+v: %v", m, err)
		}
		if len(enc) > len(b) {
			t.Fatalf("re-encoding grew: %d > %d bytes", len(enc), len(b))
		}
		m2, err := DecodeMeta(enc)
		if err != nil {
			t.Fatalf("decode of re-encoding: %v", err)
		}
		if m2 != m {
			t.Fatalf("round trip: %+v != %+v", m2, m)
		}
	})
}

func BenchmarkMetaAppendBinary(b *testing.B) {
	m := Meta{ID: 7, ClientAddr: "10.0.0.7:9123", PeerAddr: "10.0.0.7:9124", Version: "0.3.1", State: StateActive, FeatureLevel: 3}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = m.AppendBinary(buf[:0])
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeMeta(b *testing.B) {
	enc, _ := Meta{ID: 7, ClientAddr: "10.0.0.7:9123", PeerAddr: "10.0.0.7:9124", Version: "0.3.1", State: StateActive, FeatureLevel: 3}.MarshalBinary()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMeta(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLeaveNotice(t *testing.T) {
	for _, id := range []int32{1, 300, 1<<31 - 1} {
		got, err := decodeLeaveNotice(appendLeaveNotice(nil, id))
		if err != nil || got != id {
			t.Fatalf("round trip of %d: %d, %v", id, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {1}, {2, 1}, {1, 0}, {1, 1, 0}, {1, 0x80, 0x80, 0x80, 0x80, 0x08}} {
		if _, err := decodeLeaveNotice(bad); !errors.Is(err, ErrMetaCorrupt) {
			t.Fatalf("decodeLeaveNotice(%x) = %v, want ErrMetaCorrupt", bad, err)
		}
	}
}

func FuzzDecodeLeaveNotice(f *testing.F) {
	f.Add(appendLeaveNotice(nil, 1))
	f.Add(appendLeaveNotice(nil, 1<<31-1))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeLeaveNotice(b)
		if err != nil {
			return
		}
		if id <= 0 {
			t.Fatalf("decoded id %d", id)
		}
		if again, err := decodeLeaveNotice(appendLeaveNotice(nil, id)); err != nil || again != id {
			t.Fatalf("round trip %d: %d, %v", id, again, err)
		}
	})
}
