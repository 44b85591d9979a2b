package node

import (
	"errors"
	"testing"

	"github.com/fluss-node/fluss-node/raftmeta"
)

// FuzzProgress: the bucket.progress decoders never panic, refuse what is
// not exactly one message, and round-trip what they accept.
func FuzzProgress(f *testing.F) {
	f.Add(appendBucketID(nil, raftmeta.BucketID{TableID: 7, PartitionID: 0, Bucket: 3}))
	f.Add(appendUvarint(nil, 1<<40))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		if id, err := decodeProgressReq(b); err == nil {
			if again, err := decodeProgressReq(appendBucketID(nil, id)); err != nil || again != id {
				t.Fatalf("bucket id %v does not round-trip: %v %v", id, again, err)
			}
		} else if !errors.Is(err, ErrBadMessage) {
			t.Fatalf("request error %v does not wrap ErrBadMessage", err)
		}
		if v, err := decodeProgress(b); err == nil {
			if again, err := decodeProgress(appendUvarint(nil, v)); err != nil || again != v {
				t.Fatalf("last index %d does not round-trip: %d %v", v, again, err)
			}
		} else if !errors.Is(err, ErrBadMessage) {
			t.Fatalf("reply error %v does not wrap ErrBadMessage", err)
		}
	})
}
