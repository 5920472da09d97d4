package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// timings says where the wall time of a run went: the Makefile's steps
// (installs, builds, synth), which its recipes append to
// .build/timings/<TRIBUTARY_MAKE_STARTED> as "<phase> <ms>" lines, and this
// process's own.
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
	sums := map[string]time.Duration{}
	var order []string
	if f, err := os.Open(t.file); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			name, ms, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
			n, err := strconv.ParseInt(ms, 10, 64)
			if !ok || err != nil {
				continue
			}
			if _, seen := sums[name]; !seen {
				order = append(order, name)
			}
			sums[name] += time.Duration(n) * time.Millisecond
		}
		f.Close()
	}
	var inMake time.Duration
	for _, name := range []string{"installs", "builds", "synth"} {
		t.phases = append(t.phases, phase{name, sums[name]})
		inMake += sums[name]
	}
	for _, name := range order {
		if name != "installs" && name != "builds" && name != "synth" {
			t.phases = append(t.phases, phase{name, sums[name]})
			inMake += sums[name]
		}
	}
	// make deciding what is up to date, and starting this binary.
	if rest := started.Sub(t.from) - inMake; rest > 0 {
		t.phases = append(t.phases, phase{"make", rest})
	} else if rest < 0 {
		t.overlapped = true
	}
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
