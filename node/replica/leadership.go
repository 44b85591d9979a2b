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

// pumpedHeartbeater is a caching transport that can send a heartbeat past
// its cache but batched with other groups' (rpc/peer.Transport): how the
// heartbeat pump heartbeats (pump.go).
type pumpedHeartbeater interface {
	PumpedHeartbeat(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error
}

// timeoutNowGater is a transport that lets the group refuse incoming
// TimeoutNow requests (rpc/peer.Transport.GateTimeoutNow, which says why).
type timeoutNowGater interface {
	GateTimeoutNow(admit func() error)
}

// admitTransfer admits a TimeoutNow, the start of a leadership transfer to
// this replica, only while it is a follower: hashicorp/raft starts an
// election on it only then, and a candidate that takes one stops following
// the current leader without standing for election (see GateTimeoutNow).
// The transferring leader gets the refusal and tries again later.
func (r *Replica) admitTransfer() error {
	if s := r.raft.State(); s != raft.Follower {
		return fmt.Errorf("bucket replica %s is %s, not a follower: leadership transfer refused, try again", r.cfg.LocalID, s)
	}
	return nil
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
	others, voters, err := r.otherVoters()
	if err != nil {
		return err
	}
	need := voters/2 + 1 - (voters - len(others)) // we vote for ourselves
	acks := r.heartbeatAll(others, term, fh.FreshHeartbeat)
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

// otherVoters returns the voters of the group's latest configuration other
// than this replica, and how many voters there are.
func (r *Replica) otherVoters() (others []raft.Server, voters int, err error) {
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, 0, err
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID != r.cfg.LocalID {
			others = append(others, s)
		}
	}
	return others, voters, nil
}

// rpcHeader is the header of a raft RPC this replica sends.
func (r *Replica) rpcHeader() raft.RPCHeader {
	return raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(r.cfg.LocalID),
		Addr:            r.cfg.Transport.EncodePeer(r.cfg.LocalID, r.cfg.LocalAddr),
	}
}

// heartbeatAll sends each of servers a heartbeat of the leader's term with
// send, concurrently, and returns a channel (buffered for all) that gets
// whether each accepted it.
func (r *Replica) heartbeatAll(servers []raft.Server, term uint64, send func(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error) <-chan bool {
	acks := make(chan bool, len(servers))
	for _, s := range servers {
		go func() {
			h := r.rpcHeader()
			req := raft.AppendEntriesRequest{
				RPCHeader: h,
				Term:      term,
				Leader:    h.Addr, //nolint:staticcheck // raft still sends the deprecated field too
			}
			var resp raft.AppendEntriesResponse
			err := send(s.ID, s.Address, &req, &resp)
			acks <- err == nil && resp.Success && resp.Term == term
		}()
	}
	return acks
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
