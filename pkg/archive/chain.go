package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// ChainPrefix is where the archiver keeps each shard's chain head:
// ChainPrefix + <stream>/<shard>.json, outside Prefix so that the
// archive's lifecycle rule (Standard-IA, expiry) and listings leave it be.
const ChainPrefix = "chain/"

// ChainKey is the key of streamName's shard's chain head.
func ChainKey(streamName, shard string) string {
	return ChainPrefix + streamName + "/" + shard + ".json"
}

// chainHead is what the archiver was last handed of a shard, written before
// the batch's objects: the batch's first record, the link its first object
// carries, and its last record. The next batch links its first object to
// Last: if the batch's objects never made it into the bucket (the archiver
// gave up on it after its retries) or one was deleted since, that link
// names a record no object holds, and the reader sees the hole. A retry
// starts at First again and takes After from here, so it writes the same
// names (or, with more records after, an object that overlaps the first
// attempt's, which is no hole).
type chainHead struct {
	First     string `json:"first"`
	After     string `json:"after"`
	AfterHour string `json:"afterHour"`
	Last      string `json:"last"`
	LastHour  string `json:"lastHour"`
}

// maxChainHead bounds the chain head read (it is about 250 bytes).
const maxChainHead = 4096

func (h *chainHead) after() Link {
	at, _ := time.Parse(hourLayout, h.AfterHour)
	return Link{Seq: h.After, Hour: at}
}

func (h *chainHead) last() Link {
	at, _ := time.Parse(hourLayout, h.LastHour)
	return Link{Seq: h.Last, Hour: at}
}

// check refuses a head the archiver would not write.
func (h *chainHead) check() error {
	if !seqRE.MatchString(h.First) || !seqRE.MatchString(h.Last) || stream.CompareSequence(h.First, h.Last) > 0 {
		return fmt.Errorf("first %q, last %q: want sequence numbers, first not after last", h.First, h.Last)
	}
	if _, err := time.Parse(hourLayout, h.LastHour); err != nil {
		return fmt.Errorf("lastHour: %w", err)
	}
	if h.After == "" && h.AfterHour == "" {
		return nil
	}
	if !seqRE.MatchString(h.After) || stream.CompareSequence(h.After, h.First) >= 0 {
		return fmt.Errorf("after %q: want a sequence number before first %s", h.After, h.First)
	}
	if _, err := time.Parse(hourLayout, h.AfterHour); err != nil {
		return fmt.Errorf("afterHour: %w", err)
	}
	return nil
}

// linkFor is the link of a batch whose first record is first, given the
// shard's head (nil: none); restart is true when the head gave no link
// for it (MetricChainRestarts).
func linkFor(head *chainHead, first string) (link Link, restart bool) {
	switch {
	case head == nil:
		return Link{}, false // a new chain: a new shard, or the first batch since the chain began
	case stream.CompareSequence(head.Last, first) < 0:
		return head.last(), false // the next batch
	case head.First == first:
		return head.after(), false // a retry of the last batch, maybe with more or fewer records
	}
	// Begins inside the last batch but not at its start, or before it:
	// not something Lambda sends in order (it retries from a batch's
	// first record), but a late duplicate invocation of an earlier batch
	// does, and a stream deleted and made again under the same name
	// numbers its records anew. The link is unknown rather than wrong.
	return Link{}, true
}

// readHead reads shard's chain head; nil if there is none. A head that is
// not what the archiver writes (changed by hand) is logged, counted in t
// (MetricChainHeadsUnreadable) and taken as none: the batch's first
// object is written with an unknown link and the head written anew,
// rather than failing every batch of the shard until Lambda gives up on
// them.
func (a *Archiver) readHead(ctx context.Context, streamName, shard string, t *tally) (*chainHead, error) {
	key := ChainKey(streamName, shard)
	out, err := a.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(key)})
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nsk) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the chain head %s of shard %s in bucket %s: %w", key, shard, a.bucket, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxChainHead+1))
	if err != nil {
		return nil, fmt.Errorf("reading the chain head %s of shard %s in bucket %s: %w", key, shard, a.bucket, err)
	}
	var h chainHead
	err = strictjson.Decode(b, &h, strictjson.Options{MaxBytes: maxChainHead, Name: key})
	if err == nil {
		err = h.check()
	}
	if err != nil {
		t.unreadable++
		slog.WarnContext(ctx, "archive: the chain head is not what the archiver writes; the next object's link is unknown",
			"bucket", a.bucket, "key", key, "err", err.Error())
		return nil, nil
	}
	return &h, nil
}

// writeHead writes shard's chain head.
func (a *Archiver) writeHead(ctx context.Context, streamName, shard string, h chainHead) error {
	b, err := json.Marshal(&h)
	if err != nil {
		return err
	}
	key := ChainKey(streamName, shard)
	if _, err := a.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(a.bucket), Key: aws.String(key), Body: bytes.NewReader(b),
		ContentType: aws.String("application/json"), ServerSideEncryption: s3types.ServerSideEncryptionAes256,
	}); err != nil {
		return fmt.Errorf("writing the chain head %s of shard %s (records %s-%s) to bucket %s: %w", key, shard, h.First, h.Last, a.bucket, err)
	}
	return nil
}
