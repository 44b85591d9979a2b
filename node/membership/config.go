package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Profiles name a set of memberlist timers.
const (
	ProfileLAN   = "lan"   // memberlist's LAN defaults: ~1 s probes, failure detected in a few seconds
	ProfileLocal = "local" // fast timers for tests on one machine: failure detected in about a second
)

// DefaultBindAddr is the gossip listener of DESIGN §1.
const DefaultBindAddr = "0.0.0.0:9125"

// DefaultEventBuffer is the default capacity of the Events channel.
const DefaultEventBuffer = 256

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("membership: invalid config")

// Config configures Start.
type Config struct {
	// BindAddr is the gossip listener (UDP and TCP), host:port. Port 0 picks
	// a free port; GossipAddr reports it. Default DefaultBindAddr.
	BindAddr string
	// Advertise is the address other members use to reach this one,
	// host:port or host (the bound port then). The host must be an IP or
	// resolve to one. Default "": memberlist picks the bind IP, or a private
	// IP of this machine when binding 0.0.0.0.
	Advertise string
	// Meta is what this node gossips; Meta.ID names it. Required.
	Meta Meta
	// SecretKey enables gossip encryption (AES-GCM): 16, 24 or 32 bytes, or
	// nil for none. Every member of a cluster needs the same key.
	SecretKey []byte
	// Label, if set, is sent with every packet; members with another label
	// ignore this node (a guard against joining the wrong cluster). Default "".
	Label string
	// Logger receives memberlist's log lines. Default slog.Default().
	Logger *slog.Logger
	// VerboseLog passes memberlist's DEBUG and INFO lines to Logger too.
	// Default false: WARN and ERR only.
	VerboseLog bool
	// Profile is ProfileLAN (default) or ProfileLocal.
	Profile string
	// EventBuffer is the capacity of the Events channel. Default 256.
	EventBuffer int
}

// validate fills defaults and checks every field; it returns the host and
// port to bind.
func (c *Config) validate() (host string, port int, err error) {
	host, port, err = c.validateGossip()
	if err = errors.Join(err, c.Meta.Validate()); err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return host, port, nil
}

// validateGossip fills defaults and checks every field but Meta.
func (c *Config) validateGossip() (host string, port int, err error) {
	if c.BindAddr == "" {
		c.BindAddr = DefaultBindAddr
	}
	if c.Profile == "" {
		c.Profile = ProfileLAN
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.EventBuffer <= 0 {
		c.EventBuffer = DefaultEventBuffer
	}
	if c.Meta.State == "" {
		c.Meta.State = StateJoining
	}
	var errs []error
	host, port, err = splitHostPort(c.BindAddr)
	if err != nil {
		errs = append(errs, fmt.Errorf("bind address %q: %w", c.BindAddr, err))
	} else if net.ParseIP(host) == nil {
		errs = append(errs, fmt.Errorf("bind address %q: host must be an IP address", c.BindAddr))
	}
	if c.Profile != ProfileLAN && c.Profile != ProfileLocal {
		errs = append(errs, fmt.Errorf("profile %q: want %q or %q", c.Profile, ProfileLAN, ProfileLocal))
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		errs = append(errs, fmt.Errorf("gossip secret key is %d bytes: want 16, 24 or 32 (AES-128/192/256)", len(c.SecretKey)))
	}
	if len(c.Label) > memberlist.LabelMaxSize {
		errs = append(errs, fmt.Errorf("label is %d bytes: at most %d", len(c.Label), memberlist.LabelMaxSize))
	}
	if len(errs) > 0 {
		return "", 0, errors.Join(errs...)
	}
	return host, port, nil
}

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q is not a number in 0..65535", p)
	}
	return h, int(n), nil
}

// memberlistConfig builds memberlist's config for a profile.
func memberlistConfig(profile string) *memberlist.Config {
	if profile == ProfileLocal {
		c := memberlist.DefaultLocalConfig()
		c.TCPTimeout = time.Second
		c.ProbeInterval = 200 * time.Millisecond
		c.ProbeTimeout = 150 * time.Millisecond
		c.GossipInterval = 50 * time.Millisecond
		c.PushPullInterval = 2 * time.Second
		c.SuspicionMult = 3
		c.SuspicionMaxTimeoutMult = 3
		c.GossipToTheDeadTime = 2 * time.Second
		c.DeadNodeReclaimTime = time.Second
		c.QueueCheckInterval = time.Minute
		return c
	}
	c := memberlist.DefaultLANConfig()
	// A node restarted on a new address (a new pod IP) may take its id back
	// once the old incarnation has been dead this long.
	c.DeadNodeReclaimTime = 30 * time.Second
	return c
}

// joinBackoff is the first and the largest pause between join attempts.
func joinBackoff(profile string) (first, max time.Duration) {
	if profile == ProfileLocal {
		return 50 * time.Millisecond, 500 * time.Millisecond
	}
	return 200 * time.Millisecond, 5 * time.Second
}
