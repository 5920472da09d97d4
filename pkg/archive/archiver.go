package archive

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tributary-dev/tributary/pkg/metrics"
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
	s3      objectStore
	bucket  string
	metrics *metrics.Logger
}

// Option configures an Archiver.
type Option func(*Archiver)

// WithMetrics makes the archiver write its metrics (MetricRecordsArchived
// and the others) to m after each invocation; without it, it writes none.
func WithMetrics(m *metrics.Logger) Option { return func(a *Archiver) { a.metrics = m } }

// NewArchiver returns an Archiver writing into bucket with client.
func NewArchiver(client objectStore, bucket string, opts ...Option) *Archiver {
	a := &Archiver{s3: client, bucket: bucket}
	for _, o := range opts {
		o(a)
	}
	return a
}

// The archiver's metrics, written once per invocation (namespace
// Tributary, dimension Function=archive in functions/archive), every one
// of them each time, 0 when nothing happened, so that an alarm on one
// sees a data point whenever the archiver runs. They count what the
// invocation did, a failed one included: a retried batch is written, and
// counted, again.
const (
	// MetricRecordsArchived counts the records of the archive objects
	// written.
	MetricRecordsArchived = "RecordsArchived"
	// MetricObjectsWritten counts the archive objects written (chain heads
	// not included: one GET and one PUT more per shard and batch).
	MetricObjectsWritten = "ObjectsWritten"
	// MetricBytesWritten is the size of the archive objects written, as
	// stored (gzip'd), in bytes.
	MetricBytesWritten = "BytesWritten"
	// MetricChainHeadsUnreadable counts the shards' chain heads that were
	// not what the archiver writes (changed by hand, corrupt, a link that
	// goes backwards): each was taken as none, so the batch's first
	// object has an unknown link, and a hole just before it is not seen.
	MetricChainHeadsUnreadable = "ChainHeadsUnreadable"
	// MetricChainRestarts counts the batches that began inside their
	// shard's last batch but not at its first record, so that the head
	// gave no link (a late duplicate invocation of an earlier batch, a
	// head moved by hand, a stream made again under the same name): the
	// chain starts again there with an unknown link, as after an
	// unreadable head.
	MetricChainRestarts = "ChainRestarts"
)

// tally is what one invocation did, for its metrics.
type tally struct {
	records, objects, bytes int
	unreadable, restarts    int
}

// emit writes t as the invocation's metrics.
func (a *Archiver) emit(ctx context.Context, t *tally) {
	if a.metrics == nil {
		return
	}
	a.metrics.Add(MetricRecordsArchived, metrics.Count, float64(t.records))
	a.metrics.Add(MetricObjectsWritten, metrics.Count, float64(t.objects))
	a.metrics.Add(MetricBytesWritten, metrics.Bytes, float64(t.bytes))
	a.metrics.Add(MetricChainHeadsUnreadable, metrics.Count, float64(t.unreadable))
	a.metrics.Add(MetricChainRestarts, metrics.Count, float64(t.restarts))
	if err := a.metrics.Flush(); err != nil {
		slog.WarnContext(ctx, "archive: writing metrics", "err", err.Error())
	}
}

// Handle writes ev's records, one object per shard and arrival hour, each
// linked to the record before it on its shard (ChainedKey), after writing
// the shard's chain head (chainHead: one GET and one PUT per shard and
// batch). Any failure fails the whole batch, which Lambda retries from its
// first record: the archive must not skip a record, and writing an object
// again is harmless (its name is a function of its records and its link;
// the reader keeps each sequence number once where a retried batch
// overlaps a written one). With WithMetrics it writes its metrics when
// it returns, failed or not.
func (a *Archiver) Handle(ctx context.Context, ev events.KinesisEvent) error {
	var t tally
	defer a.emit(ctx, &t)
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
		if err := a.write(ctx, runs, &t); err != nil {
			return err
		}
		groups = rest
	}
	return nil
}

// write writes one shard's runs: the chain head first, then the objects,
// each linked to the one before; t counts what it wrote and met.
func (a *Archiver) write(ctx context.Context, runs []objectGroup, t *tally) error {
	streamName, shard := runs[0].stream, runs[0].recs[0].Shard
	head, err := a.readHead(ctx, streamName, shard, t)
	if err != nil {
		return err
	}
	first := runs[0].recs[0]
	lastRun := runs[len(runs)-1].recs
	last := linkOf(lastRun[len(lastRun)-1])
	link, restart := linkFor(head, first.Seq)
	if restart {
		t.restarts++
		slog.WarnContext(ctx, "archive: the batch begins inside the chain head's last batch, not at its first record; the chain starts again and the next object's link is unknown",
			"bucket", a.bucket, "key", ChainKey(streamName, shard), "shard", shard, "first", first.Seq, "headFirst", head.First, "headLast", head.Last)
	}
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
		t.records += len(g.recs)
		t.objects++
		t.bytes += len(body)
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
