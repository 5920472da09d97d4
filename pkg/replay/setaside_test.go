package replay_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestRebuildNamesTheRecordsItCanNeverApply: a record the live function set
// aside (its value of the wrong type) is, in a rebuild, not retried and
// skipped "for the reasons in the lines above" but named at once with its
// field and reason, counted once (the pipelines of a Fanout may each set it
// aside), and the records around it are applied.
func TestRebuildNamesTheRecordsItCanNeverApply(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	f.send("a", 4, 0)
	at := f.base.Add(30 * time.Second)
	bad, _ := json.Marshal(&stream.Envelope{ID: "bad-1", Type: "click", Key: "k1", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"n":"NaN"}`)})
	put, err := f.kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(f.stream), Data: bad, PartitionKey: aws.String("k1")})
	if err != nil {
		t.Fatal(err)
	}
	f.send("b", 4, 1)
	for _, tc := range []struct {
		name    string
		handler replay.HandlerFor
	}{
		{"one pipeline", f.handler},
		{"two pipelines that both set it aside", func(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
			one, _ := f.handler(table, aside)
			two, _ := f.handler(table, aside)
			return replay.Fanout{one, two}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var progress syncbuf.Buffer
			o := f.quick(&progress)
			o.From, o.MaxAttempts = time.Now().Add(-time.Hour), 3
			res, err := f.replayer(nil).Run(ctx, o, tc.handler)
			if err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			if res.Read != 9 || res.Applied != 9 || res.SetAside != 1 || res.Skipped != 0 {
				t.Errorf("read %d applied %d set aside %d skipped %d, want 9 read and handed, 1 set aside, none skipped", res.Read, res.Applied, res.SetAside, res.Skipped)
			}
			out := progress.String()
			line := "record " + aws.ToString(put.SequenceNumber) + " can never be applied (invalid, data.n: "
			if strings.Count(out, line) != 1 || strings.Contains(out, "still failed after") {
				t.Errorf("progress names the record %d times (want once, with its field and reason, and nothing skipped):\n%s", strings.Count(out, line), out)
			}
			if summary := strings.Join(res.Summary, "\n"); !strings.Contains(summary, "1 of those handed could never be applied") {
				t.Errorf("summary does not count it:\n%s", summary)
			}
		})
	}
}
