package local

import (
	"fmt"
	"io"
	"sync"
	"text/tabwriter"

	"github.com/tributary-dev/tributary/emulator/eventsource"
	"github.com/tributary-dev/tributary/emulator/template"
)

// Stats counts what every mapping did, by function, for the end-of-run table,
// and which records each mapping delivered, for the fan-out check.
type Stats struct {
	mu         sync.Mutex
	by         map[string]*MappingStats
	deliveries map[string]*delivery // by mapping logical id
}

// maxTrackedRecords bounds the record ids kept per mapping, so that a long
// `make local-up` does not grow without end; Delivery reports the cap.
const maxTrackedRecords = 1_000_000

// delivery is what one mapping delivered.
type delivery struct {
	function, source, consumer string
	records                    int // with redeliveries
	filtered                   int
	ids                        map[string]struct{}
	capped                     bool
}

// MappingStats are one function's mapping totals.
type MappingStats struct {
	Batches, Records, FunctionErrors, ItemFailures, Retries, Bisects, OnFailure, Filtered, Errors int
}

func newStats() *Stats {
	return &Stats{by: map[string]*MappingStats{}, deliveries: map[string]*delivery{}}
}

// observer counts mapping's events under function (its binary name).
func (s *Stats) observer(function string, mapping template.MappingSpec) eventsource.Observer {
	s.mu.Lock()
	d := &delivery{function: function, source: mapping.SourceARN, consumer: mapping.ConsumerARN, ids: map[string]struct{}{}}
	s.deliveries[mapping.LogicalID] = d
	s.mu.Unlock()
	return eventsource.ObserverFunc(func(e eventsource.Event) {
		s.mu.Lock()
		defer s.mu.Unlock()
		m, ok := s.by[function]
		if !ok {
			m = &MappingStats{}
			s.by[function] = m
		}
		switch e.Type {
		case eventsource.EventBatch:
			m.Batches++
			m.Records += e.Size
			if e.FunctionError != "" {
				m.FunctionErrors++
			}
			d.records += len(e.Records)
			for _, id := range e.Records {
				if len(d.ids) >= maxTrackedRecords {
					d.capped = true
					break
				}
				if e.Shard != "" {
					// Sequence numbers are unique within a shard.
					id = e.Shard + "/" + id
				}
				d.ids[id] = struct{}{}
			}
		case eventsource.EventItemFailures:
			m.ItemFailures += len(e.Failed)
		case eventsource.EventRetry:
			m.Retries++
		case eventsource.EventBisect:
			m.Bisects++
		case eventsource.EventOnFailure:
			m.OnFailure += e.Size
		case eventsource.EventFiltered:
			m.Filtered += e.Size
			d.filtered += e.Size
		case eventsource.EventError:
			m.Errors++
		}
	})
}

// Of returns a copy of function's totals.
func (s *Stats) Of(function string) MappingStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.by[function]; ok {
		return *m
	}
	return MappingStats{}
}

// Delivery is what one event source mapping delivered to its function.
type Delivery struct {
	// Mapping is the mapping's logical id; Function the function's binary.
	Mapping, Function string
	// Source is the stream, table stream or queue ARN; Consumer the
	// enhanced fan-out consumer the mapping reads through, or "".
	Source, Consumer string
	// Records counts deliveries, redeliveries included; Filtered the
	// records its filter criteria dropped.
	Records, Filtered int
	// IDs are the distinct records delivered ("<shard id>/<sequence
	// number>" or message ids); Capped is true once maxTrackedRecords were
	// kept.
	IDs    map[string]struct{}
	Capped bool
}

// Deliveries returns, in mapping order, a copy of what each mapping on
// source (a stream, table stream or queue ARN) delivered.
func (s *Stats) Deliveries(source string) []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Delivery
	for _, id := range sortedKeys(s.deliveries) {
		d := s.deliveries[id]
		if d.source != source {
			continue
		}
		ids := make(map[string]struct{}, len(d.ids))
		for k := range d.ids {
			ids[k] = struct{}{}
		}
		out = append(out, Delivery{Mapping: id, Function: d.function, Source: d.source, Consumer: d.consumer,
			Records: d.records, Filtered: d.filtered, IDs: ids, Capped: d.capped})
	}
	return out
}

// Print writes one row per function.
func (s *Stats) Print(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "FUNCTION\tBATCHES\tRECORDS\tFUNCTION ERRORS\tITEM FAILURES\tRETRIES\tBISECTS\tTO ON-FAILURE\tFILTERED\t")
	for _, fn := range sortedKeys(s.by) {
		m := s.by[fn]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", fn, m.Batches, m.Records, m.FunctionErrors, m.ItemFailures, m.Retries, m.Bisects, m.OnFailure, m.Filtered)
	}
	_ = tw.Flush()
}
