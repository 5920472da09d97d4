package archive

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// objectStore is what the archiver needs of S3: its objects and its chain
// heads.
type objectStore interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

var _ objectStore = (*s3.Client)(nil)

// Archiver writes the batches of its event source mapping into Bucket.
type Archiver struct {
	s3     objectStore
	bucket string
}

// NewArchiver returns an Archiver writing into bucket with client.
func NewArchiver(client objectStore, bucket string) *Archiver {
	return &Archiver{s3: client, bucket: bucket}
}

// Handle writes ev's records, one object per shard and arrival hour, each
// linked to the record before it on its shard (ChainedKey), after writing
// the shard's chain head (chainHead: one GET and one PUT per shard and
// batch). Any failure fails the whole batch, which Lambda retries from its
// first record: the archive must not skip a record, and writing an object
// again is harmless (its name is a function of its records and its link;
// the reader keeps each sequence number once where a retried batch
// overlaps a written one).
func (a *Archiver) Handle(ctx context.Context, ev events.KinesisEvent) error {
	if err := stream.CheckKinesisEvent(&ev); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	groups, err := group(ev)
	if err != nil {
		return err
	}
	// Lambda hands a batch of one shard; a hand-made event may hold more.
	for len(groups) > 0 {
		shard := groups[0].recs[0].Shard
		var runs, rest []objectGroup
		for _, g := range groups {
			if g.recs[0].Shard == shard && g.stream == groups[0].stream {
				runs = append(runs, g)
			} else {
				rest = append(rest, g)
			}
		}
		if err := a.write(ctx, runs); err != nil {
			return err
		}
		groups = rest
	}
	return nil
}

// write writes one shard's runs: the chain head first, then the objects,
// each linked to the one before.
func (a *Archiver) write(ctx context.Context, runs []objectGroup) error {
	streamName, shard := runs[0].stream, runs[0].recs[0].Shard
	head, err := a.readHead(ctx, streamName, shard)
	if err != nil {
		return err
	}
	first := runs[0].recs[0]
	lastRun := runs[len(runs)-1].recs
	last := linkOf(lastRun[len(lastRun)-1])
	link := linkFor(head, first.Seq)
	next := chainHead{First: first.Seq, After: link.Seq, Last: last.Seq, LastHour: last.Hour.Format(hourLayout)}
	if link.Seq != "" {
		next.AfterHour = link.Hour.Format(hourLayout)
	}
	if err := a.writeHead(ctx, streamName, shard, next); err != nil {
		return err
	}
	for _, g := range runs {
		key := ChainedKey(streamName, g.recs, link)
		body, err := Encode(g.recs)
		if err != nil {
			return err
		}
		if _, err := a.s3.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(a.bucket), Key: aws.String(key), Body: bytes.NewReader(body),
			ContentType: aws.String("application/x-ndjson"), ContentEncoding: aws.String("gzip"),
			ServerSideEncryption: s3types.ServerSideEncryptionAes256,
		}); err != nil {
			return fmt.Errorf("writing %s (%d records) to bucket %s: %w", key, len(g.recs), a.bucket, err)
		}
		link = linkOf(g.recs[len(g.recs)-1])
	}
	return nil
}

type objectGroup struct {
	stream string
	recs   []Record
}

// group splits a batch into objects: one per run of consecutive records of
// a shard that arrived in the same hour, in the batch's order. Arrival
// times need not increase along a shard (Kinesis does not promise it), so
// a shard's batch can go back to an hour it left: that is a new run, so a
// shard's objects never interleave (the reader reads them in sequence
// order and skips an object whose records end before what it has read).
func group(ev events.KinesisEvent) ([]objectGroup, error) {
	var out []objectGroup
	at := map[string]int{} // shard → its current run in out
	for i, r := range ev.Records {
		shard, ok := shardOf(r.EventID)
		if !ok {
			return nil, fmt.Errorf("Records[%d].eventID %q: want shardId-…:<sequence number>", i, strictjson.Cut(r.EventID, maxEcho))
		}
		name, ok := streamOf(r.EventSourceArn)
		if !ok {
			return nil, fmt.Errorf("Records[%d].eventSourceARN %q: want a Kinesis stream's ARN", i, strictjson.Cut(r.EventSourceArn, maxEcho))
		}
		if !seqRE.MatchString(r.Kinesis.SequenceNumber) {
			return nil, fmt.Errorf("Records[%d].kinesis.sequenceNumber %q: not a sequence number", i, strictjson.Cut(r.Kinesis.SequenceNumber, maxEcho))
		}
		if r.Kinesis.ApproximateArrivalTimestamp.IsZero() {
			// Lambda always sets it; a hand-made event may not, and the
			// reader refuses an object with a record that has none.
			return nil, fmt.Errorf("Records[%d].kinesis.approximateArrivalTimestamp: missing: the archive files each record by its arrival hour", i)
		}
		rec := Record{Shard: shard, Seq: r.Kinesis.SequenceNumber, Arrival: r.Kinesis.ApproximateArrivalTimestamp.UTC(),
			Key: r.Kinesis.PartitionKey, Data: r.Kinesis.Data}
		g := name + "\x00" + shard
		j, ok := at[g]
		if !ok || !out[j].recs[0].Arrival.Truncate(time.Hour).Equal(rec.Arrival.Truncate(time.Hour)) {
			j = len(out)
			at[g] = j
			out = append(out, objectGroup{stream: name})
		}
		out[j].recs = append(out[j].recs, rec)
	}
	return out, nil
}

// maxEcho bounds how much of a field an error repeats (strictjson.Cut).
const maxEcho = 200

// streamOf is the stream name of a Kinesis stream ARN
// (arn:aws:kinesis:<region>:<account>:stream/<name>).
func streamOf(arn string) (string, bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[2] != "kinesis" {
		return "", false
	}
	name, ok := strings.CutPrefix(parts[5], "stream/")
	return name, ok && name != ""
}
