package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// timings says where the wall time of a run went: the Makefile's steps
// (installs, builds, synth), which its recipes append to
// .build/timings/<TRIBUTARY_MAKE_STARTED> as "<phase> <start ms> <end ms>"
// lines (milliseconds since the epoch), and this process's own.
type timings struct {
	from   time.Time // when make started, or this process
	byMake bool
	phases []phase
	file   string
	// overlapped is set when make's phases (installs, builds, synth) add
	// up to more than the time make took: make local runs them at once.
	overlapped bool
}

type phase struct {
	name string
	d    time.Duration
}

// span is one recipe's run, in milliseconds since the epoch.
type span struct{ from, to int64 }

// wall is how long at least one of spans was running: recipes of one phase
// that ran at once (the four installs, say) count once, not four times.
func wall(spans []span) time.Duration {
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	var total, end int64
	for i, s := range spans {
		if i == 0 || s.from > end {
			total += s.to - s.from
			end = s.to
		} else if s.to > end {
			total += s.to - end
			end = s.to
		}
	}
	return time.Duration(total) * time.Millisecond
}

// makeStartedEnv carries when `make` started (nanoseconds since the epoch).
const makeStartedEnv = "TRIBUTARY_MAKE_STARTED"

func loadTimings(root string) *timings {
	t := &timings{from: started}
	id := os.Getenv(makeStartedEnv)
	ns, err := strconv.ParseInt(id, 10, 64)
	if err != nil || ns <= 0 {
		return t
	}
	t.from, t.byMake = time.Unix(0, ns), true
	t.file = filepath.Join(root, ".build", "timings", id)
	byPhase := map[string][]span{}
	var order []string
	if f, err := os.Open(t.file); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) != 3 {
				continue
			}
			from, err1 := strconv.ParseInt(fields[1], 10, 64)
			to, err2 := strconv.ParseInt(fields[2], 10, 64)
			if err1 != nil || err2 != nil || to < from {
				continue
			}
			name := fields[0]
			if _, seen := byPhase[name]; !seen {
				order = append(order, name)
			}
			byPhase[name] = append(byPhase[name], span{from, to})
		}
		f.Close()
	}
	var all []span
	for _, name := range []string{"installs", "builds", "synth"} {
		t.phases = append(t.phases, phase{name, wall(byPhase[name])})
	}
	for _, name := range order {
		if name != "installs" && name != "builds" && name != "synth" {
			t.phases = append(t.phases, phase{name, wall(byPhase[name])})
		}
	}
	var inMake time.Duration
	for _, p := range t.phases {
		inMake += p.d
	}
	for _, spans := range byPhase {
		all = append(all, spans...)
	}
	// make deciding what is up to date, and starting this binary: the time
	// before this process started that no recipe was running.
	busy := wall(all)
	if rest := started.Sub(t.from) - busy; rest > 0 {
		t.phases = append(t.phases, phase{"make", rest})
	}
	t.overlapped = inMake > busy+time.Second
	return t
}

func (t *timings) add(name string, d time.Duration) { t.phases = append(t.phases, phase{name, d}) }

// since times a phase that started at from and ends now.
func (t *timings) since(name string, from time.Time) { t.add(name, time.Since(from)) }

// total is the wall time so far.
func (t *timings) total() time.Duration { return time.Since(t.from) }

// String is "1m12s from `make local` to here: installs 0s · builds 2.1s · …".
func (t *timings) String() string {
	what := "this process started"
	if t.byMake {
		what = "`make local` started"
	}
	parts := make([]string, len(t.phases))
	for i, p := range t.phases {
		parts[i] = p.name + " " + roundDuration(p.d)
	}
	s := fmt.Sprintf("%s since %s: %s", roundDuration(time.Since(t.from)), what, strings.Join(parts, " · "))
	if t.overlapped {
		s += " (installs and builds ran at the same time, so these add up to more)"
	}
	return s
}

// done removes the run's timings file and any a crashed run left.
func (t *timings) done() {
	if t.file == "" {
		return
	}
	dir := filepath.Dir(t.file)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.Remove(filepath.Join(dir, e.Name()))
	}
}

func roundDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
