package kube

import "time"

// AttachAttempts is how many attach requests a's start made, and when the
// last began.
func AttachAttempts(a *Attached) (int, time.Time) {
	return int(a.attempts.Load()), time.Unix(0, a.lastTry.Load())
}
