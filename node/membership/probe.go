package membership

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// errProbed cancels a probe's merge: the probe has read the remote state
// and must not join.
var errProbed = errors.New("membership: probe read the members; merge cancelled")

// ErrUnreachable wraps a probe none of whose seeds accepted a TCP
// connection: whether they are gossip addresses is unknown.
var ErrUnreachable = errors.New("membership: no seed accepts connections")

// probeNamePrefix starts the name of a Probe's throwaway member.
const probeNamePrefix = "probe-"

// probeDialTimeout bounds the TCP dial that checks a seed is reachable.
const probeDialTimeout = time.Second

// Probe asks the gossip members at seeds (gossip addresses, host:port) who
// belongs to their cluster, without joining it. A node that has no id yet
// (a fresh `join`, which gets its id, and so its gossip name, only when
// the cluster admits it) learns the members' peer addresses this way.
//
// It runs a throwaway memberlist named "probe-<random>" on cfg's bind host
// (a free port; cfg's Advertise host, SecretKey, Label and Profile) that
// does a push/pull state exchange with each seed and cancels every merge,
// so it never becomes a member. The seeds do not keep it either: its name is no node
// id, so their NotifyAlive refuses it. cfg.Meta is not used.
//
// It returns the alive members the seeds reported, by id; an error when no
// seed answered with any, wrapping ErrUnreachable when no seed even
// accepted a TCP connection (each is dialled first and the connection
// closed at once, which both memberlist and a peer listener ignore).
func Probe(cfg Config, seeds []string) ([]Member, error) {
	host, _, err := cfg.validateGossip()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	var reachable []string
	var dialErr error
	for _, s := range seeds {
		c, err := net.DialTimeout("tcp", s, probeDialTimeout)
		if err != nil {
			dialErr = err
			continue
		}
		c.Close()
		reachable = append(reachable, s)
	}
	if len(reachable) == 0 {
		return nil, fmt.Errorf("%w: %v: %w", ErrUnreachable, seeds, dialErr)
	}
	seeds = reachable
	mc := memberlistConfig(cfg.Profile)
	mc.Name = probeNamePrefix + rand.Text()
	mc.BindAddr, mc.BindPort = host, 0
	if cfg.Advertise != "" {
		// As Start: binding 0.0.0.0 on a host without a private IP needs it.
		ip, _, err := resolveAdvertise(cfg.Advertise)
		if err != nil {
			return nil, fmt.Errorf("%w: advertise %q: %w", ErrInvalidConfig, cfg.Advertise, err)
		}
		mc.AdvertiseAddr = ip
	}
	if len(cfg.SecretKey) > 0 {
		mc.SecretKey = slices.Clone(cfg.SecretKey)
	}
	mc.Label = cfg.Label
	p := &prober{got: map[int32]Member{}}
	mc.Merge = p
	mc.Logger = log.New(&slogWriter{logger: cfg.Logger, verbose: cfg.VerboseLog}, "", 0)
	mc.LogOutput = nil
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("membership: probe: start gossip on %s: %w", host, err)
	}
	defer ml.Shutdown()
	_, joinErr := ml.Join(seeds)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.got) == 0 {
		if joinErr == nil {
			joinErr = errors.New("no alive member in the seeds' state")
		}
		return nil, fmt.Errorf("membership: probe %v: no members reported: %w", seeds, joinErr)
	}
	out := make([]Member, 0, len(p.got))
	for _, mb := range p.got {
		out = append(out, mb)
	}
	slices.SortFunc(out, func(a, b Member) int { return int(a.ID) - int(b.ID) })
	return out, nil
}

// prober is a probe's memberlist.MergeDelegate: it keeps the alive members
// of every remote state it is shown and cancels the merge.
type prober struct {
	mu  sync.Mutex
	got map[int32]Member
}

func (p *prober) NotifyMerge(peers []*memberlist.Node) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range peers {
		if n.State != memberlist.StateAlive {
			continue
		}
		meta, err := nodeMeta(n)
		if err != nil || meta.State == StateLeft {
			continue
		}
		p.got[meta.ID] = Member{Meta: meta, GossipAddr: nodeAddr(n), Status: StatusAlive}
	}
	return errProbed
}
