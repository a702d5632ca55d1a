package tracer

import "time"

// LiftKeyWait sets how long a sender waits for another trace's catch keys
// (maxKeyWait) until restore; no trace may run meanwhile.
func LiftKeyWait(d time.Duration) (restore func()) {
	was := maxKeyWait
	maxKeyWait = d
	return func() { maxKeyWait = was }
}
