package replica

// LogSize is the number of bytes of this replica's log segments.
func (r *Replica) LogSize() int64 { return r.log.Size() }
