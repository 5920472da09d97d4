package join

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/pkg/emit"
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
	side := func(n uint32) (*SideRecord, *rec, error) {
		r, ok := byN[n]
		if !ok {
			return nil, nil, fmt.Errorf("join: state of key %q: an output names record %d, which the state does not hold", key, n)
		}
		typ := c.Left
		if r.side == SideRight {
			typ = c.Right
		}
		data := json.RawMessage(r.data)
		if data == nil {
			data = json.RawMessage("null")
		}
		return &SideRecord{ID: r.id, Type: typ, EventTime: ms(r.t), Data: data}, r, nil
	}
	out := make([]emit.Record, 0, len(st.out))
	for _, o := range st.out {
		env := stream.Envelope{Key: key}
		var payload any
		switch o.kind {
		case outJoined:
			l, lr, err := side(o.l)
			if err != nil {
				return nil, err
			}
			r, rr, err := side(o.r)
			if err != nil {
				return nil, err
			}
			env.ID, env.Type = OutputID(c.Name, TypeJoined, key, lr.id, rr.id), TypeJoined
			env.OccurredAt = ms(max(lr.t, rr.t))
			payload = Data{Join: c.Name, Left: l, Right: r}
		case outLeftOnly:
			l, lr, err := side(o.l)
			if err != nil {
				return nil, err
			}
			env.ID, env.Type, env.OccurredAt = OutputID(c.Name, TypeUnmatched, key, "left", lr.id), TypeUnmatched, ms(lr.t)
			payload = Data{Join: c.Name, Left: l}
		case outRightOnly:
			r, rr, err := side(o.r)
			if err != nil {
				return nil, err
			}
			env.ID, env.Type, env.OccurredAt = OutputID(c.Name, TypeUnmatched, key, "right", rr.id), TypeUnmatched, ms(rr.t)
			payload = Data{Join: c.Name, Right: r}
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
			return nil, fmt.Errorf("join: encoding an output of key %q: %w", key, err)
		}
		b, err := json.Marshal(&env)
		if err != nil {
			return nil, fmt.Errorf("join: encoding an output of key %q: %w", key, err)
		}
		out = append(out, emit.Record{Data: b, PartitionKey: key})
	}
	return out, nil
}
