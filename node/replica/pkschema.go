package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
)

// Schema versions of a primary-key table. AddColumns appends nullable
// columns as a new version; the bucket's replicas learn it from their
// node's catalog, each at its own time. What keeps them in step is the
// changelog: every batch carries the schema id the leader merged it with,
// and a replica applies a batch only with that version known (the FSM
// waits for its catalog, see ApplyBatch). A replica's current version only
// moves forward, and moves before any row of the new version reaches its
// KV state, so a merge never reads a stored row wider than its schema.

// PKVersion is what a primary-key replica needs of one schema version of
// its table.
type PKVersion struct {
	Schema *record.Schema
	Codec  *kvstore.Codec // the KV codec of Schema
	Merger *kvstore.Merger
}

// ErrSchemaUnknown: a write or a changelog batch of a schema version this
// node's catalog does not hold yet (it is behind the node that wrote it).
var ErrSchemaUnknown = errors.New("schema version not known to this node yet")

// schemaPoll is how often a wait for a schema version asks the catalog;
// an FSM waiting longer than schemaWaitWarn says so (the node's catalog is
// normally milliseconds behind).
const (
	schemaPoll     = 10 * time.Millisecond
	schemaWaitWarn = 5 * time.Second
)

// pkSchemas tracks a PK replica's schema versions: the current one, which
// merges writes, and the earlier ones its log still holds batches of.
// Safe for concurrent use.
type pkSchemas struct {
	resolve func(id int32) (*PKVersion, error) // PKConfig.Versions
	kv      *kvstore.Replica
	logger  *slog.Logger
	cur     atomic.Pointer[PKVersion]

	mu   sync.Mutex
	byID map[int32]*PKVersion
}

func newPKSchemas(cfg *PKConfig, logger *slog.Logger) *pkSchemas {
	v := &PKVersion{Schema: cfg.Schema, Codec: cfg.KV.Codec(), Merger: cfg.Merger}
	s := &pkSchemas{resolve: cfg.Versions, kv: cfg.KV, logger: logger, byID: map[int32]*PKVersion{v.Schema.ID: v}}
	s.cur.Store(v)
	return s
}

// current is the version writes are merged with.
func (s *pkSchemas) current() *PKVersion { return s.cur.Load() }

// version returns schema version id, asking the catalog (resolve) for one
// not seen before.
func (s *pkSchemas) version(id int32) (*PKVersion, error) {
	s.mu.Lock()
	v := s.byID[id]
	s.mu.Unlock()
	if v != nil {
		return v, nil
	}
	if s.resolve == nil {
		return nil, fmt.Errorf("%w: schema %d (this replica knows %d only)", ErrSchemaUnknown, id, s.current().Schema.ID)
	}
	v, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.byID[id] = v
	s.mu.Unlock()
	return v, nil
}

// upgrade makes version id current if it is later than the current one.
// The current version moves before the KV codec does: a reader opened after
// the codec widened (kvstore.Replica.NewReader) then finds a current
// version at least as wide as its rows.
func (s *pkSchemas) upgrade(id int32) error {
	if id <= s.current().Schema.ID {
		return nil
	}
	v, err := s.version(id)
	if err != nil {
		return err
	}
	for {
		cur := s.cur.Load()
		if v.Schema.ID <= cur.Schema.ID || s.cur.CompareAndSwap(cur, v) {
			break
		}
	}
	s.kv.SetCodec(s.current().Codec)
	return nil
}

// await upgrades to version id, waiting for the catalog to learn it until
// ctx ends or stop closes.
func (s *pkSchemas) await(ctx context.Context, stop <-chan struct{}, id int32) error {
	return waitKnown(ctx, stop, func() error { return s.upgrade(id) })
}

// waitKnown calls try until it returns anything but ErrSchemaUnknown, ctx
// ends or stop closes (ErrClosed).
func waitKnown(ctx context.Context, stop <-chan struct{}, try func() error) error {
	for {
		err := try()
		if !errors.Is(err, ErrSchemaUnknown) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-stop:
			return ErrClosed
		case <-time.After(schemaPoll):
		}
	}
}

// awaitBatches makes every schema version the changelog batches of logs
// were merged with known, and the latest of them current, waiting for the
// catalog as needed (the FSM's first step for a PK replica, before its
// lock): applying them then never waits nor fails for a version.
func (s *pkSchemas) awaitBatches(logs []*raft.Log, stop <-chan struct{}) error {
	var buf [2]int32
	ids := buf[:0]
	for _, l := range logs {
		if l.Type != raft.LogCommand || len(l.Data) < 2 {
			continue
		}
		// A malformed entry is the apply's to report (it panics there).
		_ = forEachBatch(l.Data[1:], func(h batchHeader, _ []byte) error {
			if !slices.Contains(ids, h.SchemaID) {
				ids = append(ids, h.SchemaID)
			}
			return nil
		})
	}
	if len(ids) == 0 || len(ids) == 1 && ids[0] == s.current().Schema.ID {
		return nil // the common case: one version, the current one
	}
	start := time.Now()
	warned := false
	for _, id := range ids {
		err := waitKnown(context.Background(), stop, func() error {
			var err error
			if id > s.current().Schema.ID {
				err = s.upgrade(id)
			} else {
				_, err = s.version(id)
			}
			if err != nil && !warned && time.Since(start) > schemaWaitWarn {
				warned = true
				s.logger.Warn("applying the changelog waits for a schema version this node's catalog does not hold yet", "schema", id, "err", err)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// padRow returns row widened to n columns with NULLs (a row of an earlier
// schema version read through a later one); row itself when wide enough.
func padRow(row kvstore.Row, n int) kvstore.Row {
	if row == nil || len(row) >= n {
		return row
	}
	out := make(kvstore.Row, n)
	copy(out, row)
	for i := len(row); i < n; i++ {
		out[i] = kvstore.Null()
	}
	return out
}

// UpgradeSchema makes schema version id of the table current for writes if
// it is later than the current one (the node calls it when its catalog
// learns a new version). A no-op for log-table replicas.
func (r *Replica) UpgradeSchema(id int32) error {
	if r.pks == nil {
		return nil
	}
	return r.pks.upgrade(id)
}

// SchemaID is the schema version a PK replica merges writes with (-1 for a
// log-table replica).
func (r *Replica) SchemaID() int32 {
	if r.pks == nil {
		return -1
	}
	return r.pks.current().Schema.ID
}
