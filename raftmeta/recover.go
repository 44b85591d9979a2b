package raftmeta

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Recovery of the metadata group after the permanent loss of a majority of
// its voters (`fluss-node recover`, docs/OPERATIONS.md), as Consul's
// peers.json recovery does it: with the node stopped, raft.RecoverCluster
// replays this member's log into a snapshot whose configuration holds the
// surviving members only, all as voters. Run on every surviving member,
// each starts with that configuration; the one whose log is the most
// up to date wins the election and the others take its catalog. What only
// the lost voters held is gone.

// MetaOutcome is what Recover found, and did.
type MetaOutcome int

const (
	// MetaNoState: the directory holds no metadata group state.
	MetaNoState MetaOutcome = iota
	// MetaNotNeeded: the voters not lost are a majority.
	MetaNotNeeded
	// MetaNotMember: this node is not in the group's latest configuration;
	// the recovered group adds it back by itself.
	MetaNotMember
	// MetaRecovered: the configuration is now the surviving members (or
	// would be, on a dry run).
	MetaRecovered
)

func (o MetaOutcome) String() string {
	switch o {
	case MetaNoState:
		return "no metadata state"
	case MetaNotNeeded:
		return "a majority of its voters survives"
	case MetaNotMember:
		return "this node is not a member"
	case MetaRecovered:
		return "recovered: the surviving members are its voters"
	}
	return fmt.Sprintf("MetaOutcome(%d)", int(o))
}

// MetaRecovery describes the metadata group's recovery on one node.
type MetaRecovery struct {
	Outcome MetaOutcome
	// Voters are the voters of the latest configuration as found.
	Voters []NodeID
	// Servers is the configuration recovered to (MetaRecovered).
	Servers []raft.Server
}

// Recover recovers the metadata group's state in dir (a stopped node's
// <data_dir>/meta) from the loss of the nodes lost: when the voters not
// lost are not a majority and self is a member, the group's configuration
// becomes its members not lost, all voters. With dryRun it only reports.
func Recover(dir string, self NodeID, lost func(NodeID) bool, dryRun bool, logger *slog.Logger) (MetaRecovery, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if lost(self) {
		return MetaRecovery{}, fmt.Errorf("%w: node %d is this node: it cannot be lost", ErrInvalid, self)
	}
	hc := NewHCLogger(logger, hclog.Warn).Named("meta-raft")
	store, snaps, err := openStores(dir, 2, hc)
	if err != nil {
		return MetaRecovery{}, err
	}
	defer store.Close()
	if has, err := raft.HasExistingState(store, store, snaps); err != nil || !has {
		return MetaRecovery{}, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(self)
	rc.Logger = hc
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	conf, err := raft.GetConfiguration(rc, NewFSM(), store, store, snaps, trans)
	if err != nil {
		return MetaRecovery{}, fmt.Errorf("raftmeta: read the configuration: %w", err)
	}
	var res MetaRecovery
	survivors := 0
	member := false
	for _, s := range conf.Servers {
		id, err := parseServerID(s.ID)
		if err != nil {
			return res, err
		}
		member = member || id == self
		if s.Suffrage == raft.Voter {
			res.Voters = append(res.Voters, id)
			if !lost(id) {
				survivors++
			}
		}
		if !lost(id) {
			res.Servers = append(res.Servers, raft.Server{Suffrage: raft.Voter, ID: s.ID, Address: s.Address})
		}
	}
	switch {
	case 2*survivors > len(res.Voters):
		res.Outcome, res.Servers = MetaNotNeeded, nil
		return res, nil
	case !member:
		res.Outcome, res.Servers = MetaNotMember, nil
		return res, nil
	}
	res.Outcome = MetaRecovered
	if dryRun {
		return res, nil
	}
	err = raft.RecoverCluster(rc, NewFSM(), store, store, snaps, trans, raft.Configuration{Servers: res.Servers})
	if err != nil {
		return res, fmt.Errorf("raftmeta: recover: %w", err)
	}
	return res, nil
}

// parseServerID is serverID's inverse.
func parseServerID(id raft.ServerID) (NodeID, error) {
	n, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("raftmeta: server id %q is not a node id", id)
	}
	return NodeID(n), nil
}
