package rpc

import "time"

// SetBodyTime sets the time an admitted request has to send its body
// (bodyGrace plus a second per rate bytes) until restore is called.
func SetBodyTime(grace time.Duration, rate int64) (restore func()) {
	g, r := bodyGrace, minBodyRate
	bodyGrace, minBodyRate = grace, rate
	return func() { bodyGrace, minBodyRate = g, r }
}
