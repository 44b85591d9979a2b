package peer

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// mh is the msgpack handle shared by every encoder and decoder; as raft's NetworkTransport, it
// writes times in the old (non-builtin) format that every raft version decodes.
var mh = &codec.MsgpackHandle{BasicHandle: codec.BasicHandle{TimeNotBuiltin: true}}

// appendWriter is an io.Writer that appends to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// codecState holds a reusable encoder, decoder and buffers. Idle streams hold none: they take
// one from codecPool per RPC, so an idle stream costs only yamux's own state.
type codecState struct {
	enc  *codec.Encoder
	dec  *codec.Decoder
	w    appendWriter
	rbuf []byte
}

const maxPooledBuf = 1 << 20

var codecPool = sync.Pool{New: func() any {
	cs := &codecState{}
	cs.enc = codec.NewEncoder(&cs.w, mh)
	cs.dec = codec.NewDecoderBytes(nil, mh)
	return cs
}}

func getCodec() *codecState { return codecPool.Get().(*codecState) }

func putCodec(cs *codecState) {
	if cap(cs.w.b) > maxPooledBuf {
		cs.w.b = nil
	}
	if cap(cs.rbuf) > maxPooledBuf {
		cs.rbuf = nil
	}
	cs.dec.ResetBytes(nil)
	codecPool.Put(cs)
}

// encodeFrame appends a frame of type typ with the msgpack body v to cs.w.b (which may already
// hold a stream header) and returns the whole buffer.
func (cs *codecState) encodeFrame(typ byte, v any) ([]byte, error) {
	off := len(cs.w.b)
	cs.w.b = append(cs.w.b, 0, 0, 0, 0, typ)
	if err := cs.enc.Encode(v); err != nil {
		return nil, fmt.Errorf("peer: encode %T: %w", v, err)
	}
	return finishFrame(cs.w.b, off), nil
}

// decode decodes body into v. Decoded byte slices never alias body.
func (cs *codecState) decode(body []byte, v any) error {
	cs.dec.ResetBytes(body)
	if err := cs.dec.Decode(v); err != nil {
		return fmt.Errorf("%w: decode %T: %w", ErrBadFrame, v, err)
	}
	return nil
}

// decodeRequest decodes a raft request body of type typ into a new command struct.
func (cs *codecState) decodeRequest(typ byte, body []byte) (any, error) {
	var cmd any
	switch typ {
	case typeAppendEntries:
		cmd = &raft.AppendEntriesRequest{}
	case typeRequestVote:
		cmd = &raft.RequestVoteRequest{}
	case typeRequestPreVote:
		cmd = &raft.RequestPreVoteRequest{}
	case typeTimeoutNow:
		cmd = &raft.TimeoutNowRequest{}
	case typeInstallSnapshot:
		cmd = &raft.InstallSnapshotRequest{}
	default:
		return nil, fmt.Errorf("%w: unknown raft rpc type %d", ErrBadFrame, typ)
	}
	if err := cs.decode(body, cmd); err != nil {
		return nil, err
	}
	return cmd, nil
}

// isHeartbeat reports whether req is a heartbeat (same rule as raft's NetworkTransport).
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	leader := req.RPCHeader.Addr
	if len(leader) == 0 {
		leader = req.Leader //nolint:staticcheck // deprecated field still sent by older raft
	}
	return req.Term != 0 && leader != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}
