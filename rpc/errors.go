package rpc

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Request-validation sentinels of the rpc layer itself.
var (
	// ErrInvalidRequest wraps a request that is malformed or names something
	// that does not fit the table (unknown column, bad table name, ...).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnimplemented wraps a feature this server does not offer yet.
	ErrUnimplemented = errors.New("not implemented yet")
	// ErrNotConfigured wraps a request for a feature this server offers
	// but is not configured for (lake tiering without a lake directory).
	ErrNotConfigured = errors.New("not configured on this server")
	// ErrCatalogBehind wraps a read of data written with a schema version
	// this node's catalog has not applied yet (it follows the metadata
	// group by milliseconds): worth a retry.
	ErrCatalogBehind = errors.New("this node's catalog is behind the data")
)

// codeRule maps every error that wraps one of errs to code.
type codeRule struct {
	code connect.Code
	errs []error
}

// codeRules is the one table from domain errors to Connect codes. Order
// matters only where an error could wrap several sentinels; the first rule
// wins.
var codeRules = []codeRule{
	{connect.CodeCanceled, []error{context.Canceled}},
	{connect.CodeDeadlineExceeded, []error{context.DeadlineExceeded}},
	{connect.CodeResourceExhausted, []error{ErrResourceExhausted, raftmeta.ErrTooManyPartitions}},
	{connect.CodeOutOfRange, []error{ErrOffsetOutOfRange}},
	{connect.CodeUnavailable, []error{raftmeta.ErrNotLeader, raftmeta.ErrNoLeader, ErrNotLeader, ErrNoBucketLeader, raftmeta.ErrClosed, raftmeta.ErrNoActiveNodes, ErrCatalogBehind}},
	{connect.CodeNotFound, []error{raftmeta.ErrDatabaseNotFound, raftmeta.ErrTableNotFound, raftmeta.ErrPartitionNotFound, ErrBucketNotFound}},
	{connect.CodeAlreadyExists, []error{raftmeta.ErrDatabaseExists, raftmeta.ErrTableExists, raftmeta.ErrPartitionExists, raftmeta.ErrNodeIDInUse}},
	{connect.CodeFailedPrecondition, []error{raftmeta.ErrDatabaseNotEmpty, ErrWrongTableKind, ErrSequence, raftmeta.ErrFeatureLevel, ErrNotConfigured, raftmeta.ErrNoRoom, ErrBucketNotLost, ErrNotRestorable}},
	{connect.CodeUnimplemented, []error{ErrUnimplemented}},
	{connect.CodeInvalidArgument, append([]error{
		raftmeta.ErrInvalid, ErrInvalidRequest, ErrBadJSON,
		record.ErrBadSchema, record.ErrBadType,
	}, extraInvalid...)},
}

// DomainErrors returns every sentinel that toConnectError maps to a code of
// its own (not internal). A node that forwards a request must carry each of
// them back across its hop (node/wire.go), or the client would get internal
// for what it could act on.
func DomainErrors() []error {
	var out []error
	for _, r := range codeRules {
		out = append(out, r.errs...)
	}
	return out
}

// toConnectError maps err to a Connect error in ONE place. Known domain
// errors keep their message (it names what was wrong); anything else is an
// internal error, logged here.
func toConnectError(err error) *connect.Error {
	return toConnectErrorLog(err, slog.Default())
}

func toConnectErrorLog(err error, logger *slog.Logger) *connect.Error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	for _, r := range codeRules {
		for _, s := range r.errs {
			if errors.Is(err, s) {
				return connect.NewError(r.code, err)
			}
		}
	}
	if logger != nil {
		logger.Error("internal error", "err", err)
	}
	return connect.NewError(connect.CodeInternal, errors.New("internal error (logged on the server): "+err.Error()))
}
