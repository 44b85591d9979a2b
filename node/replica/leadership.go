package replica

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// freshHeartbeater is a transport that can send a heartbeat past its
// heartbeat cache (rpc/peer.Transport). Such a transport may answer raft's
// own heartbeats from that cache, so raft.VerifyLeader through it could
// count an acknowledgement made before the read arrived; leadership is then
// confirmed with fresh heartbeats instead.
type freshHeartbeater interface {
	FreshHeartbeat(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error
}

// confirmLeadership checks, after it is called, that a quorum of voters
// still takes this replica for the leader of its current term: the read
// index check of a linearizable read (raft §6.4). With a plain transport it
// is raft.VerifyLeader. With a caching one it sends each other voter a
// heartbeat of the leader's term past the cache and counts the answers that
// accept it: a voter that accepts term T has not voted in a later term, so
// no leader of a later term can have committed anything without this
// quorum, which overlaps every other.
func (r *Replica) confirmLeadership() error {
	fh, ok := r.cfg.Transport.(freshHeartbeater)
	if !ok {
		return r.raft.VerifyLeader().Error()
	}
	term, err := r.leaderTerm()
	if err != nil {
		return err
	}
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	var voters, others []raft.Server
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters = append(voters, s)
		if s.ID != r.cfg.LocalID {
			others = append(others, s)
		}
	}
	need := len(voters)/2 + 1 - (len(voters) - len(others)) // we vote for ourselves
	addr := r.cfg.Transport.EncodePeer(r.cfg.LocalID, r.cfg.LocalAddr)
	acks := make(chan bool, len(others))
	for _, s := range others {
		go func() {
			req := raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(r.cfg.LocalID), Addr: addr},
				Term:      term,
				Leader:    addr, //nolint:staticcheck // raft still sends the deprecated field too
			}
			var resp raft.AppendEntriesResponse
			err := fh.FreshHeartbeat(s.ID, s.Address, &req, &resp)
			acks <- err == nil && resp.Success && resp.Term == term
		}()
	}
	got := 0
	for range others {
		if got >= need {
			break
		}
		if <-acks {
			got++
		}
	}
	if got < need {
		return fmt.Errorf("%d of %d other voters acknowledged term %d, %d needed", got, len(others), term, need)
	}
	if t, err := r.leaderTerm(); err != nil || t != term {
		return raft.ErrNotLeader
	}
	return nil
}

// leaderTerm returns the term this replica leads. raft sets the state
// before the term when it steps down or stands for election, so a term read
// on both sides of a Leader state is the term of that leadership.
func (r *Replica) leaderTerm() (uint64, error) {
	before := r.raft.CurrentTerm()
	if r.raft.State() != raft.Leader {
		return 0, raft.ErrNotLeader
	}
	if after := r.raft.CurrentTerm(); after != before {
		return 0, raft.ErrNotLeader
	}
	return before, nil
}
