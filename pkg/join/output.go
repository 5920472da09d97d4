package join

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Output record types on the joins stream.
const (
	// TypeJoined is one matching pair.
	TypeJoined = "joined"
	// TypeUnmatched is a record that joined nothing by the time its window
	// closed (left and outer joins: a left record; outer: a right one too).
	TypeUnmatched = "unmatched"
	// TypeRate is one key's click-through rate over one window.
	TypeRate = "join_rate"
)

// Side is one side of an output record: the input record as it was
// buffered.
type SideRecord struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	EventTime time.Time       `json:"eventTime"`
	Data      json.RawMessage `json:"data"`
}

// Data is the data of a joined or unmatched record: the join's name and the
// two sides, one of them null for an unmatched record.
type Data struct {
	Join  string      `json:"join"`
	Left  *SideRecord `json:"left"`
	Right *SideRecord `json:"right"`
}

// RateData is the data of a rate record: of the left records of Key whose
// event time is in [Start, End), Matched joined at least once.
type RateData struct {
	Join    string    `json:"join"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Left    uint32    `json:"left"`
	Matched uint32    `json:"matched"`
	Rate    float64   `json:"rate"`
}

// OutputID is the stable id of an output record: the same pair (or record,
// or rate window) of the same key always gets the same id, whichever
// attempt emits it, so the next stage deduplicates by it. It is short
// whatever the ids it is made of: "<join>:" + 32 hex digits.
func OutputID(join, kind, key string, parts ...string) string {
	h := sha256.New()
	for _, p := range append([]string{kind, key}, parts...) {
		fmt.Fprintf(h, "%d:%s|", len(p), p)
	}
	return join + ":" + hex.EncodeToString(h.Sum(nil)[:16])
}

func ms(t int64) time.Time { return time.UnixMilli(t).UTC() }

// render turns the outbox of key's state into records for the joins stream.
func (c *Config) render(key string, st *keyState) ([]emit.Record, error) {
	if len(st.out) == 0 {
		return nil, nil
	}
	byN := make(map[uint32]*rec, len(st.recs))
	for i := range st.recs {
		byN[st.recs[i].n] = &st.recs[i]
	}
	find := func(n uint32) (*rec, error) {
		r, ok := byN[n]
		if !ok {
			return nil, fmt.Errorf("join: state of key %q: an output names record %d, which the state does not hold", key, n)
		}
		return r, nil
	}
	out := make([]emit.Record, 0, len(st.out))
	for _, o := range st.out {
		var l, r *rec
		var err error
		if o.kind == outJoined || o.kind == outLeftOnly {
			if l, err = find(o.l); err != nil {
				return nil, err
			}
		}
		if o.kind == outJoined || o.kind == outRightOnly {
			if r, err = find(o.r); err != nil {
				return nil, err
			}
		}
		rec, err := c.output(key, o, l, r)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// outputSize is the size on the stream (limits.KinesisRecordSize) of the
// output o of key, made of l and r.
func (c *Config) outputSize(key string, o outRef, l, r *rec) int {
	rec, err := c.output(key, o, l, r)
	if err != nil {
		return limits.KinesisRecordBytes + 1 // never put: count it as the most
	}
	return limits.KinesisRecordSize(rec.Data, rec.PartitionKey)
}

// output renders the output o of key: l and r are its left and right
// records (nil for a side it does not have).
func (c *Config) output(key string, o outRef, l, r *rec) (emit.Record, error) {
	side := func(x *rec) *SideRecord {
		typ := c.Left
		if x.side == SideRight {
			typ = c.Right
		}
		data := json.RawMessage(x.data)
		if data == nil {
			data = json.RawMessage("null")
		}
		return &SideRecord{ID: x.id, Type: typ, EventTime: ms(x.t), Data: data}
	}
	env := stream.Envelope{Key: key}
	var payload any
	switch o.kind {
	case outJoined:
		env.ID, env.Type = OutputID(c.Name, TypeJoined, key, l.id, r.id), TypeJoined
		env.OccurredAt = ms(max(l.t, r.t))
		payload = Data{Join: c.Name, Left: side(l), Right: side(r)}
	case outLeftOnly:
		env.ID, env.Type, env.OccurredAt = OutputID(c.Name, TypeUnmatched, key, "left", l.id), TypeUnmatched, ms(l.t)
		payload = Data{Join: c.Name, Left: side(l)}
	case outRightOnly:
		env.ID, env.Type, env.OccurredAt = OutputID(c.Name, TypeUnmatched, key, "right", r.id), TypeUnmatched, ms(r.t)
		payload = Data{Join: c.Name, Right: side(r)}
	case outRate:
		start := ms(o.rate.start)
		env.ID, env.Type, env.OccurredAt = OutputID(c.Name, TypeRate, key, start.Format(time.RFC3339Nano)), TypeRate, start
		d := RateData{Join: c.Name, Start: start, End: start.Add(c.RateWindow), Left: o.rate.left, Matched: o.rate.matched}
		if d.Left > 0 {
			d.Rate = float64(d.Matched) / float64(d.Left)
		}
		payload = d
	}
	env.SentAt = env.OccurredAt
	var err error
	if env.Data, err = json.Marshal(payload); err != nil {
		return emit.Record{}, fmt.Errorf("join: encoding an output of key %q: %w", key, err)
	}
	b, err := json.Marshal(&env)
	if err != nil {
		return emit.Record{}, fmt.Errorf("join: encoding an output of key %q: %w", key, err)
	}
	return emit.Record{Data: b, PartitionKey: key}, nil
}
