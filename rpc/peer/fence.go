package peer

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// Fencing: a node given up for lost (its copies of the raft groups
// replaced by a forced recovery on the survivors) may still start again
// with its old data. Its groups' configurations still name the survivors,
// and hashicorp/raft follows an AppendEntries of a higher term from any
// server, member of its configuration or not: two such nodes could elect
// each other in their old configuration and overwrite what the survivors
// committed since. Options.Fenced names the servers whose raft requests are
// refused, with status 5; the refused node hears of it through
// Options.OnFenced.

// fencedMessage is the refusal of cmd when its sender is fenced, or "".
func (m *Mux) fencedMessage(cmd any) string {
	if m.opts.Fenced == nil {
		return ""
	}
	h, ok := cmd.(raft.WithRPCHeader)
	if !ok {
		return ""
	}
	id := raft.ServerID(h.GetRPCHeader().ID)
	if id == "" || !m.opts.Fenced(id) {
		return ""
	}
	m.fencedRequests.Add(1)
	return fmt.Sprintf("%s refuses raft requests from server %s: it was given up for lost", m.addr, id)
}

// FencedRequests counts the raft requests refused because their sender is
// fenced.
func (m *Mux) FencedRequests() int64 { return m.fencedRequests.Load() }

// remoteErr is the error of a response with a status other than OK from
// target; a refusal because this node is fenced goes to Options.OnFenced.
func (m *Mux) remoteErr(target string, status byte, body []byte) error {
	if status == statusFenced && m.opts.OnFenced != nil {
		m.opts.OnFenced(target, string(body))
	}
	return errorForStatus(status, body)
}
