package state

import "time"

// WithKeyedExpiry makes every keyed state write set the item's TTL
// attribute (expiresAt) to d after the write, so that the state of a key
// that stops sending is deleted by DynamoDB once no retry or replay can
// still need its fences (the join and CEP functions use the events
// stream's retention plus a day). 0, the default, keeps keyed state items.
func WithKeyedExpiry(d time.Duration) Option { return func(v *Views) { v.keyedExpiry = d } }
