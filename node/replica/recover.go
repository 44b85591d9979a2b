package replica

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
)

// Recovery from the permanent loss of a majority of a bucket's voters
// (`fluss-node recover`, docs/OPERATIONS.md). A group that lost a majority
// of its voters can never elect a leader again, so the operator declares
// the lost servers gone for good and, with the nodes stopped, the group's
// surviving voter is made its only voter: a configuration entry naming it
// alone is appended to its log. When the replica opens again it elects
// itself (a quorum of one) and commits its whole log; the node's
// controller then replaces the lost replicas as for any dead node.
//
// What the lost servers held and the survivor did not is gone: an entry
// acknowledged by a quorum of lost servers and others, but not the
// survivor. That is the price of recovery, and why it is a command an
// operator runs, never something a node does by itself.
//
// The entry is written in a term above any this replica has seen, and the
// replica's current term raised to it first: raft takes two entries of one
// index and term as the same entry, and the lost leader this replica
// followed wrote its entries beyond this log in this replica's term. In
// that term the forced entry could pass for one of them on a copy holding
// them, which would keep its own. Only a lost leader of a later term,
// elected without this replica, could have used the new term too, so any
// other copy of such a group (a non-voter being added) is set aside
// (SetAside) and copied afresh from the survivor once it leads.
//
// Where two or more voters survive and are still a minority (four replicas
// or more), the one whose log is the most up to date must be the one
// forced, which no replica can tell alone: the operator gathers every
// survivor's position (the last entry's term and index, ForceResult) and
// Recovery.Pick names the winner; without a pick the bucket is left
// (ForceAmbiguous). The others are left as they are (ForceNotChosen): the
// winner's log is at least as up to date as theirs, so no entry of theirs
// carries the forced entry's term, and raft's log check brings them in line
// when the winner adds them back. With three replicas per bucket, the
// default, a minority of survivors is always one.

// ForceOutcome is what ForceSoleVoter found, and did.
type ForceOutcome int

const (
	// ForceNoState: the directory holds no raft state.
	ForceNoState ForceOutcome = iota
	// ForceNotNeeded: the voters not lost are a majority; the group elects
	// and reconfigures by itself.
	ForceNotNeeded
	// ForceAmbiguous: two or more voters survive and are a minority.
	ForceAmbiguous
	// ForceNotChosen: two or more voters survive as a minority, and
	// Recovery.Pick chose another one to force; this copy is left as is
	// and rejoins as the winner's follower.
	ForceNotChosen
	// ForceNotMember: this replica is not in its group's latest
	// configuration (it was being removed, or not yet added, when the
	// nodes were lost) and no voter survives to take it: left as is.
	ForceNotMember
	// SetAside: this replica is a non-voter of a group whose one surviving
	// voter is forced; its copy must not be kept (see above). The caller
	// moves the directory away; ForceSoleVoter changes nothing.
	SetAside
	// Forced: the group's latest configuration is now this replica alone
	// (or would be, on a dry run): it was the one surviving voter, or a
	// non-voter where no voter survives.
	Forced
)

func (o ForceOutcome) String() string {
	switch o {
	case ForceNoState:
		return "no raft state"
	case ForceNotNeeded:
		return "a majority of its voters survives"
	case ForceAmbiguous:
		return "several surviving voters, a minority: not forced"
	case ForceNotChosen:
		return "another surviving voter is forced: left as is"
	case ForceNotMember:
		return "not in its group's latest configuration: left as is"
	case SetAside:
		return "a non-voter of a group forced elsewhere: set aside"
	case Forced:
		return "forced to this replica alone"
	}
	return fmt.Sprintf("ForceOutcome(%d)", int(o))
}

// ForceResult describes one replica's recovery.
type ForceResult struct {
	Outcome ForceOutcome
	// Voters are the voters of the group's latest configuration as found.
	Voters []raft.ServerID
	// Survivors are those of Voters not lost.
	Survivors []raft.ServerID
	// LastIndex and LastTerm are those of the log's last entry (or of the
	// newest snapshot): the replica's position, which Recovery.Pick
	// compares.
	LastIndex, LastTerm uint64
	// Index and Term are the configuration entry's (Forced).
	Index, Term uint64
}

// Recovery is what ForceSoleVoter is to recover from.
type Recovery struct {
	// Lost reports the servers lost for good.
	Lost func(raft.ServerID) bool
	// Pick, when set, chooses among two or more surviving voters that are
	// a minority the one to force ("" for none): the one with the most
	// up-to-date position, as every survivor reported it.
	Pick func(survivors []raft.ServerID) raft.ServerID
	// DryRun only reports.
	DryRun bool
	Logger *slog.Logger
}

// keyCurrentTerm is hashicorp/raft's stable-store key of the current term.
var keyCurrentTerm = []byte("CurrentTerm")

// ForceSoleVoter decides, from the latest configuration of the replica in
// dir (its raft server id local), what recovering from the loss of the
// servers rc.Lost means for it (ForceOutcome), and for Forced makes it the
// only voter unless rc.DryRun. The replica must not be open (its node is
// stopped). Opening the log repairs a torn tail, as opening the replica
// would.
func ForceSoleVoter(dir string, local raft.ServerID, rc Recovery) (ForceResult, error) {
	logger, lost := rc.Logger, rc.Lost
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lg, err := openLog(filepath.Join(dir, "log"), logstore.Options{}, nil, logger)
	if err != nil {
		return ForceResult{}, fmt.Errorf("open log: %w", err)
	}
	defer lg.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, newHCLogger(logger, "raft"))
	if err != nil {
		return ForceResult{}, err
	}
	conf, lastIndex, lastTerm, err := latestConfiguration(lg, snaps)
	if err != nil || lastIndex == 0 {
		return ForceResult{}, err
	}
	res := ForceResult{LastIndex: lastIndex, LastTerm: lastTerm}
	self := slices.IndexFunc(conf.Servers, func(s raft.Server) bool { return s.ID == local })
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			res.Voters = append(res.Voters, s.ID)
			if !lost(s.ID) {
				res.Survivors = append(res.Survivors, s.ID)
			}
		}
	}
	voter := self >= 0 && conf.Servers[self].Suffrage == raft.Voter
	var winner raft.ServerID
	if len(res.Survivors) > 1 && rc.Pick != nil {
		winner = rc.Pick(res.Survivors)
	}
	switch {
	case 2*len(res.Survivors) > len(res.Voters):
		res.Outcome = ForceNotNeeded
	case len(res.Survivors) > 1 && winner == "":
		res.Outcome = ForceAmbiguous
	case len(res.Survivors) > 1 && voter:
		res.Outcome = ForceNotChosen
		if winner == local {
			res.Outcome = Forced
		}
	case voter || self >= 0 && len(res.Survivors) == 0:
		res.Outcome = Forced
	case self >= 0:
		// A non-voter beside the surviving voter that is forced.
		res.Outcome = SetAside
	default:
		// Its group's latest configuration, as this log holds it, does
		// not list it: not this copy's to decide, and setting it aside
		// could discard the only copy should the other replicas' logs
		// see the group otherwise.
		res.Outcome = ForceNotMember
	}
	if res.Outcome != Forced {
		return res, nil
	}
	term, err := lg.GetUint64(keyCurrentTerm)
	if err != nil && err.Error() != "not found" { // raft's convention for a missing key
		return res, fmt.Errorf("read the current term: %w", err)
	}
	res.Index, res.Term = lastIndex+1, max(term, lastTerm)+1
	if rc.DryRun {
		return res, nil
	}
	me := conf.Servers[self]
	me.Suffrage = raft.Voter
	solo := raft.Configuration{Servers: []raft.Server{me}}
	// The term first: a crash between the two leaves a higher term and no
	// entry, which raft accepts, never an entry above the current term.
	if err := lg.SetUint64(keyCurrentTerm, res.Term); err != nil {
		return res, fmt.Errorf("raise the current term: %w", err)
	}
	entry := &raft.Log{Index: res.Index, Term: res.Term, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(solo)}
	if err := lg.StoreLog(entry); err != nil {
		return res, fmt.Errorf("append the configuration entry: %w", err)
	}
	return res, nil
}

// latestConfiguration finds the group's latest configuration as raft does
// when it starts: the last configuration entry in the log after the newest
// snapshot, else that snapshot's. lastIndex and lastTerm are those of the
// last entry (or of the snapshot, if the log holds nothing after it);
// lastIndex 0 means no raft state.
func latestConfiguration(lg dataLog, snaps raft.SnapshotStore) (conf raft.Configuration, lastIndex, lastTerm uint64, err error) {
	metas, err := snaps.List()
	if err != nil {
		return conf, 0, 0, fmt.Errorf("list snapshots: %w", err)
	}
	var snapIndex uint64
	if len(metas) > 0 {
		s := metas[0] // newest first
		conf, snapIndex, lastIndex, lastTerm = s.Configuration, s.Index, s.Index, s.Term
	}
	first, err := lg.FirstIndex()
	if err != nil {
		return conf, 0, 0, err
	}
	last, err := lg.LastIndex()
	if err != nil {
		return conf, 0, 0, err
	}
	if last == 0 || last <= snapIndex {
		return conf, lastIndex, lastTerm, nil
	}
	var e raft.Log
	if err := lg.GetLog(last, &e); err != nil {
		return conf, 0, 0, fmt.Errorf("read log entry %d: %w", last, err)
	}
	lastIndex, lastTerm = e.Index, e.Term
	for i := last; i >= max(first, snapIndex+1) && i > 0; i-- {
		if err := lg.GetLog(i, &e); err != nil {
			return conf, 0, 0, fmt.Errorf("read log entry %d: %w", i, err)
		}
		if e.Type == raft.LogConfiguration {
			return raft.DecodeConfiguration(slices.Clone(e.Data)), lastIndex, lastTerm, nil
		}
	}
	return conf, lastIndex, lastTerm, nil
}
