package aggregate

import (
	"context"
	"errors"
	"strings"

	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Records that can never be applied — not an envelope, a field of the wrong
// type, a value past pipeline.MaxValue, an event id reused with other
// content, a key whose keyed state is full — are set aside with their data
// and a reason naming the field (package setaside) and reported processed,
// so the shard moves on at once. Only when writing them aside fails (a
// transient error) are they reported as batch item failures, to come again.
// Without a sink (WithSetAside) they are reported failed, as before.

// WithSetAside sets where records that can never be applied go.
func WithSetAside(sink *setaside.Sink) Option { return func(p *Processor) { p.sink = sink } }

// asideKinesis is the set-aside record of rec.
func asideKinesis(rec *stream.KinesisRecord, field, kind, reason string) setaside.Record {
	shard, _, ok := strings.Cut(rec.EventID, ":")
	if !ok {
		shard = ""
	}
	return setaside.Record{Source: rec.EventSourceARN, Shard: shard, Sequence: rec.SequenceNumber,
		PartitionKey: rec.PartitionKey, ArrivedAt: rec.ApproximateArrivalTimestamp, Data: rec.Data,
		Field: field, Kind: kind, Reason: reason}
}

// setAside adds rec to the batch's records to set aside.
func (c *collector) setAside(rec *stream.KinesisRecord, field, kind, reason string) {
	c.aside = append(c.aside, asideKinesis(rec, field, kind, reason))
}

// poisonKind classifies a decoding or extraction error.
func poisonKind(err error) (field, kind string) {
	var pe *stream.PoisonRecordError
	if errors.As(err, &pe) {
		field = pe.Field
	}
	switch {
	case field == "":
		return "", setaside.KindUnparseable
	case strings.Contains(err.Error(), "the range a window aggregates without overflow"):
		return field, setaside.KindOverflow
	}
	return field, setaside.KindInvalid
}

// ruleOf is what field must hold for the pipeline to read a record (nil
// when it keeps no rule for it): its value field, a finite number within
// ±pipeline.MaxValue, the range a window aggregates without overflow. A
// field that is the value field and also the grouping key or the distinct
// field must be such a number all the same.
func ruleOf(cfg *pipeline.Config, field string) *setaside.Rule {
	if field == "" || cfg.Value.IsZero() || field != cfg.Value.String() {
		return nil
	}
	return setaside.NumberRule(pipeline.MaxValue)
}

// flushAside writes the batch's records aside; if that fails they are
// reported failed (the batch is retried from the first of them).
func (p *Processor) flushAside(ctx context.Context, c *collector) {
	if len(c.aside) == 0 {
		return
	}
	err := p.sink.SetAside(ctx, c.aside)
	if err == nil {
		return
	}
	if errors.Is(err, setaside.ErrNoSink) {
		// A processor built without one (a tool's; replay gives its own,
		// which reports): the record comes again until its caller gives
		// up, and this line is the only word of why.
		for i := range c.aside {
			r := &c.aside[i]
			p.log.Warn("record cannot be applied, and there is no set-aside table to put it in: reported failed", "shard", c.shard,
				"sequenceNumber", r.Sequence, "field", r.Field, "kind", r.Kind, "reason", r.Reason)
		}
	} else {
		p.log.Error("setting records aside failed: they will be retried", "shard", c.shard, "records", len(c.aside), "error", err.Error())
	}
	for i := range c.aside {
		c.failures.Add(c.aside[i].Sequence)
	}
}
