package peer

import "github.com/hashicorp/raft"

// Bounds of what msgpack adds around an AppendEntries request's entry
// payloads: per entry (field names, index, term, type, append time, the
// lengths of Data and Extensions), and for the rest of the request (RPC
// header, term, previous entry, commit index; addresses and ids are
// counted separately).
const (
	entryOverhead   = 128
	requestOverhead = 4 << 10
)

// fitFrame shortens args.Entries to the longest prefix, of at least one
// entry, whose AppendEntries frame fits in maxFrame bytes.
//
// raft sends a lagging follower up to MaxAppendEntries entries at once,
// whatever their size. A request larger than a frame would fail on every
// retry, and the follower (or, after a burst of big entries, every
// follower) would never catch up. Sending a prefix is safe because raft
// reads back the request it passed once the call returns, in
// replicateTo, pipelineSend and pipelineDecode (hashicorp/raft
// replication.go, v1.7.3): the follower's next index and match index
// advance only to the last entry sent, and the rest goes in the next
// request. TestLaggingFollowerCatchesUpPastFrameLimit checks it
// end to end. A single entry larger than a frame is still refused, by
// the size check of the send; the proposer's MaxEntryBytes (8 MiB by
// default) stays well under MaxFrameSize (64 MiB).
func fitFrame(args *raft.AppendEntriesRequest, maxFrame int) {
	budget := maxFrame - requestOverhead - len(args.RPCHeader.ID) - len(args.RPCHeader.Addr) - len(args.Leader) //nolint:staticcheck // deprecated field still sent
	for i, e := range args.Entries {
		budget -= entryOverhead + len(e.Data) + len(e.Extensions)
		if budget < 0 && i > 0 {
			args.Entries = args.Entries[:i]
			return
		}
	}
}
