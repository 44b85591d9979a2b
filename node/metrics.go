package node

import "github.com/prometheus/client_golang/prometheus"

// registerMetrics adds the node-level gauges, computed on scrape.
func (n *Node) registerMetrics() {
	n.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_log_size_bytes",
			Help: "Bytes of log segments of all bucket replicas on this node.",
		}, func() float64 {
			var total int64
			n.eachReplica(func(r replicaStats) { total += r.LogSize() })
			return float64(total)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_bucket_replicas",
			Help: "Bucket replicas open on this node.",
		}, func() float64 {
			var c int
			n.eachReplica(func(replicaStats) { c++ })
			return float64(c)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_bucket_leaders",
			Help: "Bucket replicas on this node that lead their bucket.",
		}, func() float64 {
			var c int
			n.eachReplica(func(r replicaStats) {
				if r.IsLeader() {
					c++
				}
			})
			return float64(c)
		}),
	)
}

// replicaStats is what the gauges read of a replica.
type replicaStats interface {
	LogSize() int64
	IsLeader() bool
}

// eachReplica calls f for every open replica (without holding n.mu while f runs).
func (n *Node) eachReplica(f func(replicaStats)) {
	n.mu.Lock()
	reps := make([]replicaStats, 0, len(n.replicas))
	for _, r := range n.replicas {
		reps = append(reps, r)
	}
	n.mu.Unlock()
	for _, r := range reps {
		f(r)
	}
}
