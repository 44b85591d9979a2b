package membership

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"strconv"

	"github.com/hashicorp/memberlist"
)

// delegate implements memberlist's Delegate, EventDelegate,
// ConflictDelegate, MergeDelegate and AliveDelegate. memberlist calls these
// from its goroutines, mostly with its node lock held: they must not call
// back into memberlist.
type delegate struct{ m *Membership }

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
	_ memberlist.MergeDelegate    = (*delegate)(nil)
	_ memberlist.AliveDelegate    = (*delegate)(nil)
)

func nodeAddr(n *memberlist.Node) string {
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// nodeMeta decodes a node's meta and checks that its id is its name.
func nodeMeta(n *memberlist.Node) (Meta, error) {
	meta, err := DecodeMeta(n.Meta)
	if err != nil {
		return Meta{}, fmt.Errorf("node %q at %s: %w", n.Name, nodeAddr(n), err)
	}
	if strconv.FormatInt(int64(meta.ID), 10) != n.Name {
		return Meta{}, fmt.Errorf("%w: node %q at %s carries id %d", ErrInvalidMeta, n.Name, nodeAddr(n), meta.ID)
	}
	return meta, nil
}

// NodeMeta returns this node's encoded meta (memberlist copies it).
func (d *delegate) NodeMeta(limit int) []byte {
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	if len(d.m.localBytes) > limit {
		// Cannot happen: Start and SetState check MaxMetaSize.
		return nil
	}
	return d.m.localBytes
}

// NotifyMsg receives user messages; the only one is the leave notice. The
// leaving node sends it over TCP to every member, so it is the reliable
// word: the member is left from now on, even while memberlist still holds it
// alive (its own leave broadcast goes over UDP a few times and can be lost;
// then only a push-pull sync, many seconds later, would tell).
func (d *delegate) NotifyMsg(b []byte) {
	id, err := decodeLeaveNotice(b)
	if err != nil {
		d.m.log.Warn("ignoring gossip user message", "err", err)
		return
	}
	d.m.mu.Lock()
	d.m.leaving[id] = true
	mb, ok := d.m.members[id]
	changed := ok && mb.Status != StatusLeft
	if changed {
		mb.Status = StatusLeft
		mb.State = StateLeft
		d.m.setMemberLocked(mb)
	}
	d.m.mu.Unlock()
	if changed {
		d.m.events.push(Event{Type: EventLeave, Member: mb})
	}
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// NotifyAlive filters alive messages: a node whose meta does not decode, or
// names another id, never becomes a member.
func (d *delegate) NotifyAlive(n *memberlist.Node) error {
	_, err := nodeMeta(n)
	return err
}

func (d *delegate) NotifyJoin(n *memberlist.Node) {
	if id, err := strconv.ParseInt(n.Name, 10, 32); err == nil {
		d.m.mu.Lock()
		delete(d.m.leaving, int32(id))
		d.m.mu.Unlock()
	}
	d.record(n, StatusAlive, EventJoin)
}

func (d *delegate) NotifyUpdate(n *memberlist.Node) {
	d.record(n, StatusAlive, EventUpdate)
}

// NotifyLeave: memberlist does not say whether the node left or failed
// (Node.State is not set), so a node that sent a leave notice, or whose
// last meta said "left", left; any other died. A notice that arrives after
// this turns dead into left (NotifyMsg).
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	meta, err := nodeMeta(n)
	if err != nil {
		d.m.log.Warn("member with undecodable meta left", "err", err)
		return
	}
	d.m.mu.Lock()
	leaving := d.m.leaving[meta.ID]
	d.m.mu.Unlock()
	if meta.State == StateLeft || leaving {
		d.record(n, StatusLeft, EventLeave)
		return
	}
	d.record(n, StatusDead, EventFailed)
}

func (d *delegate) record(n *memberlist.Node, st Status, typ EventType) {
	meta, err := nodeMeta(n)
	if err != nil {
		// NotifyAlive keeps such nodes out; log in case memberlist changes.
		d.m.log.Warn("ignoring member with invalid meta", "err", err)
		return
	}
	d.m.mu.Lock()
	switch {
	case st == StatusAlive && meta.State == StateLeft && d.m.leaving[meta.ID]:
		// The gossip of its "left" meta, after its leave notice.
		st = StatusLeft
	case st == StatusAlive && meta.State != StateLeft:
		// Back in another state (restarted): a later loss is a failure.
		delete(d.m.leaving, meta.ID)
	}
	if st == StatusLeft {
		// The notice can overtake the gossip of its "left" meta; a member
		// that left is in state left whatever its last meta said.
		meta.State = StateLeft
	}
	prev, known := d.m.members[meta.ID]
	mb := Member{Meta: meta, GossipAddr: nodeAddr(n), Status: st}
	d.m.setMemberLocked(mb)
	d.m.mu.Unlock()
	if known && prev.Status == StatusLeft && st == StatusLeft {
		return // already reported when its notice came
	}
	d.m.events.push(Event{Type: typ, Member: mb})
}

// NotifyConflict: memberlist saw an alive message for a known name at
// another address and ignored it.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.conflict(existing.Name, nodeAddr(existing), other)
}

// NotifyMerge is called with the remote state of a push/pull during a join,
// on both sides. It refuses the merge when the remote side shows an alive
// node whose name is one we know alive at another address: two live
// processes claim one id.
func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	for _, p := range peers {
		if p.State != memberlist.StateAlive && p.State != memberlist.StateSuspect {
			continue
		}
		id, err := strconv.ParseInt(p.Name, 10, 32)
		if err != nil {
			continue // NotifyAlive rejects it later
		}
		d.m.mu.Lock()
		var knownAddr string
		if mb, ok := d.m.members[int32(id)]; ok && mb.Status == StatusAlive {
			knownAddr = mb.GossipAddr
		}
		if p.Name == d.m.name && !d.m.left {
			knownAddr = d.m.gossipAddr
		}
		d.m.mu.Unlock()
		if knownAddr == "" || knownAddr == nodeAddr(p) {
			continue
		}
		err = d.conflict(p.Name, knownAddr, p)
		d.m.mu.Lock()
		d.m.conflict = err
		d.m.mu.Unlock()
		return err
	}
	return nil
}

func (d *delegate) conflict(name, knownAddr string, other *memberlist.Node) error {
	err := fmt.Errorf("%w: node id %s is alive at %s and also claimed by %s; give every node its own node_id (data_dir/node.id)",
		ErrIDConflict, name, knownAddr, nodeAddr(other))
	d.m.log.Error("node id conflict", "node_id", name, "alive_at", knownAddr, "claimed_by", nodeAddr(other))
	mb := Member{GossipAddr: nodeAddr(other), Status: StatusAlive}
	if meta, merr := nodeMeta(other); merr == nil {
		mb.Meta = meta
	} else if id, perr := strconv.ParseInt(other.Name, 10, 32); perr == nil {
		mb.ID = int32(id)
	}
	d.m.events.push(Event{Type: EventConflict, Member: mb})
	return err
}

// msgLeaveNotice starts the user message a leaving node sends to every alive
// member over TCP before memberlist's leave broadcast: 0x01 | uvarint id.
const msgLeaveNotice byte = 1

func appendLeaveNotice(dst []byte, id int32) []byte {
	return binary.AppendUvarint(append(dst, msgLeaveNotice), uint64(id))
}

func decodeLeaveNotice(b []byte) (int32, error) {
	if len(b) < 2 || b[0] != msgLeaveNotice {
		return 0, fmt.Errorf("%w: not a leave notice (%d bytes)", ErrMetaCorrupt, len(b))
	}
	id, n := binary.Uvarint(b[1:])
	if n <= 0 || n != len(b)-1 || id == 0 || id > math.MaxInt32 {
		return 0, fmt.Errorf("%w: bad node id in leave notice", ErrMetaCorrupt)
	}
	return int32(id), nil
}
