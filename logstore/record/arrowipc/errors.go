package arrowipc

import "errors"

var (
	// ErrMalformed reports bytes that are not a valid Arrow IPC stream or
	// message: a bad frame, a flatbuffer offset or a buffer range outside its
	// message, or a batch that does not match its schema's layout.
	ErrMalformed = errors.New("arrowipc: malformed Arrow IPC data")

	// ErrUnsupported reports valid Arrow IPC that this package deliberately
	// does not handle: delta dictionaries and dictionaries nested in other
	// fields, tensors, big-endian data, and the view, union and run-end
	// encoded types.
	ErrUnsupported = errors.New("arrowipc: unsupported Arrow IPC feature")

	// ErrInvalidProjection reports a column selection that is not strictly
	// ascending or names a field the schema does not have.
	ErrInvalidProjection = errors.New("arrowipc: invalid projection")
)
