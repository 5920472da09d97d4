package enrich

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Data is the data field of an enriched record. The envelope around it is
// the activity event's own (id, type, key and times unchanged), so the
// original event is the envelope plus Event.
type Data struct {
	// Event is the activity event's data, compacted (null when it had none).
	Event json.RawMessage `json:"event"`
	// Profile is the profile image the event was joined with; null when the
	// key had no profile at the event's position or it was deleted.
	Profile json.RawMessage `json:"profile"`
	// ProfileVersion is the version of the changelog record joined (of the
	// tombstone when the profile was deleted); null when there was none.
	ProfileVersion *json.Number `json:"profileVersion"`
	// ProfileDeleted is true when the joined record is a tombstone.
	ProfileDeleted bool `json:"profileDeleted,omitempty"`
	// ShardID and SequenceNumber are the activity event's position in the
	// events stream: downstream can order or deduplicate by them.
	ShardID        string `json:"shardId"`
	SequenceNumber string `json:"sequenceNumber"`
}

// enrichedRecord is the PutRecords entry of one activity event joined with
// prof (found false: no profile).
func enrichedRecord(shard string, p *parsed, prof change, found bool) (kintypes.PutRecordsRequestEntry, error) {
	d := Data{ShardID: shard, SequenceNumber: p.rawSeq}
	if len(p.env.Data) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, p.env.Data); err != nil {
			return kintypes.PutRecordsRequestEntry{}, &RecordError{SequenceNumber: p.rawSeq, Field: "data", Reason: err.Error(), Kind: setaside.KindUnparseable}
		}
		d.Event = b.Bytes()
	}
	if found {
		v := json.Number(prof.version)
		d.ProfileVersion = &v
		d.Profile = prof.image
		d.ProfileDeleted = prof.image == nil
	}
	// Without HTML escaping, as cdc writes the changelog: a '<' in the
	// event or the profile stays one byte, not six ("\u003c").
	data, err := setaside.MarshalJSON(&d)
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("record %s: encoding the enriched data: %w", p.rawSeq, err)
	}
	env := stream.Envelope{ID: p.env.ID, Type: p.env.Type, Key: p.env.Key, OccurredAt: p.env.OccurredAt,
		SentAt: p.env.SentAt, ReceivedAt: p.env.ReceivedAt, Data: data}
	b, err := setaside.MarshalJSON(&env)
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("record %s: encoding the enriched record: %w", p.rawSeq, err)
	}
	if n := limits.KinesisRecordSize(b, p.key); n > maxRecordBytes {
		return kintypes.PutRecordsRequestEntry{}, &RecordError{SequenceNumber: p.rawSeq, Field: "data", Kind: setaside.KindOutputTooLarge,
			Reason: fmt.Sprintf("the enriched record would be %d bytes with its profile (the event's data %d bytes, the profile %d); Kinesis accepts at most %d",
				n, len(d.Event), len(d.Profile), maxRecordBytes)}
	}
	return kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(p.key)}, nil
}

// Kinesis limits: records per PutRecords call, bytes per call (data and
// partition keys), bytes per record.
const (
	maxPutRecords  = limits.KinesisPutRecordsEntries
	maxPutBytes    = limits.KinesisPutRecordsBytes
	maxRecordBytes = limits.KinesisRecordBytes
)

// chunks splits entries into PutRecords calls within Kinesis' limits and
// returns each call's [start, end).
func chunks(entries []kintypes.PutRecordsRequestEntry) [][2]int {
	var out [][2]int
	start, size := 0, 0
	for i, e := range entries {
		n := len(e.Data) + len(aws.ToString(e.PartitionKey))
		if i > start && (i-start == maxPutRecords || size+n > maxPutBytes) {
			out = append(out, [2]int{start, i})
			start, size = i, 0
		}
		size += n
	}
	if start < len(entries) {
		out = append(out, [2]int{start, len(entries)})
	}
	return out
}

// putAttempts bounds the PutRecords attempts for entries Kinesis failed.
const putAttempts = 5

// put writes entries, retrying only the entries Kinesis failed, with
// backoff. It returns the index (into entries) of the lowest entry still not
// written after the last attempt, or -1, and how many retries it made.
// Retrying part of a call can reorder records of one key on the output
// stream; each carries its source sequence number to order by.
func (h *Handler) put(ctx context.Context, entries []kintypes.PutRecordsRequestEntry) (lowest, retries int, err error) {
	lowest = -1
	for _, c := range chunks(entries) {
		start, chunk := c[0], entries[c[0]:c[1]]
		idx := make([]int, len(chunk))
		for i := range idx {
			idx[i] = start + i
		}
		pending := chunk
		for attempt := 1; len(pending) > 0; attempt++ {
			out, err := h.kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(h.outStream), Records: pending})
			if err != nil {
				return idx[0], retries, fmt.Errorf("putting %d enriched records on stream %s: %w", len(pending), h.outStream, err)
			}
			if aws.ToInt32(out.FailedRecordCount) == 0 {
				break
			}
			var failed []kintypes.PutRecordsRequestEntry
			var failedIdx []int
			lastErr := ""
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					failed = append(failed, pending[i])
					failedIdx = append(failedIdx, idx[i])
					lastErr = aws.ToString(r.ErrorCode) + ": " + aws.ToString(r.ErrorMessage)
				}
			}
			if len(failed) == 0 {
				return idx[0], retries, fmt.Errorf("stream %s: PutRecords reported %d failed records but none carries an error code", h.outStream, aws.ToInt32(out.FailedRecordCount))
			}
			if attempt == putAttempts {
				return failedIdx[0], retries, fmt.Errorf("stream %s: %d enriched records still failed after %d attempts (last error %s)", h.outStream, len(failed), attempt, lastErr)
			}
			retries++
			pending, idx = failed, failedIdx
			select {
			case <-ctx.Done():
				return idx[0], retries, ctx.Err()
			case <-time.After(h.backoff(attempt)):
			}
		}
	}
	return lowest, retries, nil
}
