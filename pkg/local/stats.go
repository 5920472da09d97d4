package local

import (
	"fmt"
	"io"
	"sync"
	"text/tabwriter"

	"github.com/tributary-dev/tributary/pkg/eventsource"
)

// Stats counts what every mapping did, by function, for the end-of-run table.
type Stats struct {
	mu sync.Mutex
	by map[string]*MappingStats
}

// MappingStats are one function's mapping totals.
type MappingStats struct {
	Batches, Records, FunctionErrors, ItemFailures, Retries, Bisects, OnFailure, Filtered, Errors int
}

func newStats() *Stats { return &Stats{by: map[string]*MappingStats{}} }

func (s *Stats) observer(function string) eventsource.Observer {
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
