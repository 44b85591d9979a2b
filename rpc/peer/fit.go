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

// splitAppend returns args as one request when it fits in a frame of
// maxFrame bytes, else as consecutive requests that each fit (each with
// at least one entry): the same term, leader and commit index, each part's
// previous entry the last entry of the part before.
//
// raft sends a follower up to MaxAppendEntries entries at once, whatever
// their size, and retries the same request after a failure. A request
// larger than a frame would fail on every try, and the follower (or,
// after a burst of big entries, every follower) would never catch up. The
// transport therefore sends such a request in parts, in order, and
// answers raft with the last part's answer: by raft's log matching, a
// follower that accepts the last part holds every entry before it, and a
// follower that refused an earlier part refuses the rest too (its log does
// not reach their previous entry), so the last answer speaks for the
// whole request. A single entry larger than a frame is still refused, by
// the size check of the send; a node sizes its frames to hold its largest
// entry.
func splitAppend(args *raft.AppendEntriesRequest, maxFrame int) []*raft.AppendEntriesRequest {
	n := fitting(args, maxFrame)
	if n == len(args.Entries) {
		return []*raft.AppendEntriesRequest{args}
	}
	var parts []*raft.AppendEntriesRequest
	rest := *args
	for {
		part := rest
		part.Entries = rest.Entries[:n:n]
		parts = append(parts, &part)
		if n == len(rest.Entries) {
			return parts
		}
		last := rest.Entries[n-1]
		rest.Entries = rest.Entries[n:]
		rest.PrevLogEntry, rest.PrevLogTerm = last.Index, last.Term
		n = fitting(&rest, maxFrame)
	}
}

// fitting is how many of args.Entries, at least one, fit in one frame.
func fitting(args *raft.AppendEntriesRequest, maxFrame int) int {
	budget := maxFrame - requestOverhead - len(args.RPCHeader.ID) - len(args.RPCHeader.Addr) - len(args.Leader) //nolint:staticcheck // deprecated field still sent
	for i, e := range args.Entries {
		budget -= entryOverhead + len(e.Data) + len(e.Extensions)
		if budget < 0 && i > 0 {
			return i
		}
	}
	return len(args.Entries)
}
