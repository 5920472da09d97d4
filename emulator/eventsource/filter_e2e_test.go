package eventsource_test

import (
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/eventsource"
)

func TestKinesisFilterDropsAndSkipsPastRecords(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	fn, log := startFunction(t, "", nil)
	seqs := putRecords(t, stream, "k",
		`{"type":"order","amount":25}`,
		`{"type":"order","amount":5}`,
		`{"type":"refund","amount":50}`,
		`plain text`,
		`{"type":"order","amount":99.5}`)
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn,
		FilterPatterns: []string{`{"data":{"type":["order"],"amount":[{"numeric":[">",10]}]}}`}, Enabled: true}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)
	got := log.deliveries()
	for i, want := range []int{1, 0, 0, 0, 1} {
		if got[seqs[i]] != want {
			t.Errorf("record %d delivered %d times, want %d", i, got[seqs[i]], want)
		}
	}
	if s := p.Stats(); s.Filtered != 3 || s.Records != 2 {
		t.Errorf("stats = %+v, want 3 filtered, 2 delivered", s)
	}
}
