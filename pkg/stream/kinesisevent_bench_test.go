package stream

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// benchEvents are the events the decode benchmarks read: Lambda's bytes
// for the default batch of 100 and for the largest batch that fits the
// 6 MB payload limit, plain and with a window carrying state.
func benchEvents(tb testing.TB) []struct {
	name string
	n    int
	raw  []byte
} {
	largest := streamtest.MaxRecords(streamtest.KinesisEvent{}, streamtest.PayloadLimit)
	state := map[string]string{}
	for k := range 200 { // a carried interval: partial aggregates for 200 (key, window) pairs
		state["p|tumbling-1m|20261129T1041|user-"+strconv.Itoa(k)] = "49601189658422359378836298521827638475320189010000000001 49601189658422359378836298521827638475320189010000000100 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8w"
	}
	var out []struct {
		name string
		n    int
		raw  []byte
	}
	for _, e := range []struct {
		name string
		ev   streamtest.KinesisEvent
	}{
		{"plain", streamtest.KinesisEvent{Records: 100}},
		{"plain", streamtest.KinesisEvent{Records: largest}},
		{"window", streamtest.KinesisEvent{Records: 100, Window: true, State: state}},
	} {
		raw := e.ev.JSON()
		if len(raw) > streamtest.PayloadLimit {
			tb.Fatalf("%s event of %d records is %d bytes, over the payload limit", e.name, e.ev.Records, len(raw))
		}
		out = append(out, struct {
			name string
			n    int
			raw  []byte
		}{e.name + "/batch=" + strconv.Itoa(e.ev.Records), e.ev.Records, raw})
	}
	return out
}

// cpuTime is the CPU time the process has used (every thread, so the
// garbage collector's work counts): on a machine shared with other work,
// records per CPU second is the figure for one core that wall time is not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKinesisDecode decodes Lambda's event bytes: with KinesisBatch
// (the floor a handler of the deployed path is measured against), with
// encoding/json and aws-lambda-go's types as the aggregate function did (a
// probe for the window, then the whole event), and each followed by
// decoding every record's envelope. It reports records/s and allocations
// per record.
func BenchmarkKinesisDecode(b *testing.B) {
	for _, ev := range benchEvents(b) {
		var batch KinesisBatch
		var env Envelope
		decoders := []struct {
			name   string
			decode func([]byte) error
		}{
			{"KinesisBatch", func(raw []byte) error { return batch.Decode(raw) }},
			{"KinesisBatch+envelopes", func(raw []byte) error {
				if err := batch.Decode(raw); err != nil {
					return err
				}
				for i := range batch.Records {
					if err := batch.Records[i].DecodeEnvelope(&env); err != nil {
						return err
					}
				}
				return nil
			}},
			{"encoding-json", func(raw []byte) error {
				_, _, err := decodeKinesisStd(raw)
				return err
			}},
			{"encoding-json+envelopes", func(raw []byte) error {
				ev, _, err := decodeKinesisStd(raw)
				if err != nil {
					return err
				}
				for i := range ev.Records {
					if err := DecodeKinesis(&ev.Records[i], &env); err != nil {
						return err
					}
				}
				return nil
			}},
			// What lambda.Start does before a handler taking
			// json.RawMessage runs: decode the payload into a RawMessage
			// (a scan and a copy). A handler implementing lambda.Handler
			// gets the payload bytes as they are.
			{"runtime-rawmessage", func(raw []byte) error {
				var m json.RawMessage
				return json.NewDecoder(bytes.NewBuffer(raw)).Decode(&m)
			}},
		}
		for _, d := range decoders {
			b.Run(ev.name+"/"+d.name, func(b *testing.B) {
				if err := d.decode(ev.raw); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(ev.raw)))
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				cpu := cpuTime()
				for b.Loop() {
					if err := d.decode(ev.raw); err != nil {
						b.Fatal(err)
					}
				}
				cpu = cpuTime() - cpu
				runtime.ReadMemStats(&after)
				records := float64(ev.n) * float64(b.N)
				b.ReportMetric(records/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(records/cpu.Seconds(), "records/cpu-s")
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/records, "allocs/record")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/records, "ns/record")
			})
		}
	}
}
