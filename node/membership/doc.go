// Package membership is a node's view of the cluster: who is there, how to
// reach them, and in which lifecycle state they are. It wraps
// hashicorp/memberlist (SWIM gossip over UDP + TCP on the gossip listener).
//
// Invariants:
//   - A member's memberlist name is its node id in decimal. Two live
//     processes with the same id are never both members: a join whose
//     push/pull state shows the id alive at another address is rejected on
//     both sides (ErrIDConflict, an EventConflict and an error log line),
//     and memberlist's own conflict check rejects the later alive message.
//   - Every member's Meta is encoded with AppendBinary (FORMAT below) and is
//     at most memberlist.MetaMaxSize (512) bytes; Start and SetState refuse
//     a Meta that does not fit. Alive messages whose meta does not decode or
//     whose id differs from the node name are ignored, so Members never
//     returns a member without a valid Meta.
//   - Events never block memberlist: they go into a bounded buffer; when it
//     is full the oldest event is dropped and DroppedEvents counts it.
//     Members is the source of truth; events are hints to re-read it.
//   - Members returns every id ever seen since Start (alive, suspect, dead
//     or left), one entry per id, sorted by id. Self is always included.
//   - memberlist v0.5.4 reports no suspicion event, so StatusSuspect is never
//     reported today: a member stays StatusAlive until it is declared dead
//     (StatusDead) or announces its leave (StatusLeft).
//   - Leave gossips state "left", sends a leave notice (user message 0x01 |
//     uvarint id) over TCP to every alive member, then memberlist's leave
//     broadcast. The notice is the reliable word (memberlist's broadcast
//     goes over UDP a few times and can be lost): a member is StatusLeft from
//     its notice on, even while memberlist still holds it alive, and a notice
//     arriving after a failure turns dead into left. memberlist's NotifyLeave
//     does not tell a leave from a failure; without a notice, a member whose
//     last meta said left is StatusLeft, any other StatusDead.
//   - Probe never makes anything a member: its memberlist, named
//     "probe-<random>", cancels every merge it is offered, and the members
//     it talks to refuse it (its name is no node id).
//   - BootstrapExpect returns the same sorted set on every node when exactly
//     the expected nodes start together; the smallest id bootstraps the
//     metadata Raft group. It refuses (ErrClusterExists) once any member is
//     active, so a cluster is bootstrapped once, never twice.
//
// Meta wire format (version 1), stable across releases:
//
//	byte 0      format version (1). A decoder rejects other versions: a new
//	            version is only for an incompatible layout change.
//	then fields: tag (uvarint, >0) | length (uvarint) | value (length bytes)
//	  1 id            uvarint (uint32, > 0)       required
//	  2 client addr   UTF-8 host:port
//	  3 peer addr     UTF-8 host:port
//	  4 version       UTF-8 binary version
//	  5 state         UTF-8 joining|active|draining|left (unknown tolerated)
//	  6 feature level uvarint (uint32)
//	Fields appear in tag order, each at most once. Unknown tags are skipped
//	by length, so an old binary reads a newer binary's meta.
//
// Goroutines: memberlist calls the delegates from its own goroutines, with
// its node lock held; the delegates only copy, update the member table
// under Membership.mu, and push to the event buffer. Membership.mu is never
// held while calling into memberlist.
package membership
