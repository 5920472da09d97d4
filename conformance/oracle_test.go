package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/testtools"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// The Kafka Streams oracle: a Maven project in kstreams/ whose jar reads
// histories as JSON lines on stdin and writes what Kafka Streams did with
// each as one JSON line on stdout (see kstreams/src/.../Oracle.java).
const (
	oracleDir = "kstreams"
	oracleJar = "kstreams/target/kstreams-oracle.jar"
)

// kafkaHistory is one history in the oracle's terms: Kafka's window
// parameters (already aligned, see alignKafka) and the records in the order
// Kafka reads them.
type kafkaHistory struct {
	ID           string        `json:"id"`
	Kind         string        `json:"kind"`
	SizeMs       int64         `json:"sizeMs"`
	AdvanceMs    int64         `json:"advanceMs"`
	DifferenceMs int64         `json:"differenceMs"`
	GapMs        int64         `json:"gapMs"`
	GraceMs      int64         `json:"graceMs"`
	Records      []kafkaRecord `json:"records"`
}

type kafkaRecord struct {
	Key string `json:"key"`
	T   int64  `json:"t"`
	V   int64  `json:"v"`
}

// kafkaResult is what Kafka Streams did with one history: every update of
// the windowed table, in order, and the records that raised its
// dropped-records metric (indexes into the history's records).
type kafkaResult struct {
	ID      string        `json:"id"`
	Updates []kafkaUpdate `json:"updates"`
	Dropped []int         `json:"dropped"`
	Error   string        `json:"error"`
}

// kafkaUpdate is one window's new value, or its deletion (a session merged
// into a larger one), caused by record I. Start and End are Kafka's
// Window.start() and end().
type kafkaUpdate struct {
	I       int    `json:"i"`
	Key     string `json:"key"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	Deleted bool   `json:"deleted"`
	Count   int64  `json:"count"`
	Sum     int64  `json:"sum"`
	Min     int64  `json:"min"`
	Max     int64  `json:"max"`
}

// buildOracle builds the Kafka Streams oracle's jar when it is missing or
// older than its sources (buildJar). Without Java (or Maven, when the jar
// must be built) it skips t saying what to install, as the join and Flink
// CEP conformance tests do, or fails it under testtools.RequireEnv.
func buildOracle(t *testing.T) {
	t.Helper()
	testtools.Need(t, "the Kafka Streams conformance oracle (conformance/"+oracleDir+") runs on a JDK 17 or later (apt-get install openjdk-17-jdk-headless)", "java")
	if stale, why := jarStale(oracleDir, oracleJar); stale {
		testtools.Need(t, "the Kafka Streams conformance test builds its oracle (conformance/"+oracleDir+": "+why+") with Maven (apt-get install maven)", "mvn")
	}
	buildJar(t, "Kafka Streams", oracleDir, oracleJar)
}

// buildJar builds the jar of the Maven project in dir (the oracle of
// engine) when it is missing or older than its sources (mvn -q package),
// and fails the test with what to do when Maven is missing.
func buildJar(t *testing.T, engine, dir, jar string) {
	t.Helper()
	stale, why := jarStale(dir, jar)
	if !stale {
		return
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		t.Fatalf("mvn is not on PATH: the %s conformance test builds its oracle (conformance/%s, %s) with Maven; install it (apt-get install maven) or build the jar elsewhere with mvn -q -f conformance/%s/pom.xml package -DskipTests", engine, dir, why, dir)
	}
	t.Logf("building the %s oracle (%s): mvn -q package in conformance/%s; the first build downloads %s from Maven Central", engine, why, dir, engine)
	start := time.Now()
	cmd := exec.Command(mvn, "-q", "-B", "package", "-DskipTests")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("building the %s oracle failed (mvn -q package in conformance/%s): %v\n%s", engine, dir, err, out)
	}
	t.Logf("built %s in %s", jar, time.Since(start).Round(time.Millisecond))
}

// jarStale reports whether the jar of the Maven project in dir must be
// built, and why.
func jarStale(dir, jar string) (bool, string) {
	info, err := os.Stat(jar)
	if err != nil {
		return true, jar + " is missing"
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(jar), "lib")); err != nil {
		return true, "its dependencies (target/lib) are missing"
	}
	var newer string
	walk := func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().After(info.ModTime()) {
			newer = path
			return fs.SkipAll
		}
		return nil
	}
	for _, root := range []string{filepath.Join(dir, "pom.xml"), filepath.Join(dir, "src")} {
		if err := filepath.WalkDir(root, walk); err != nil && !errors.Is(err, fs.SkipAll) {
			return true, err.Error()
		}
		if newer != "" {
			return true, newer + " is newer than the jar"
		}
	}
	return false, ""
}

// oracle is one running JVM of the oracle, for every history of the test
// (the JVM's start costs seconds, a history milliseconds). Each subtest
// submits its history, runs it through the aggregate function while the
// JVM runs it through Kafka Streams, then waits for Kafka's result.
type oracle struct {
	cmd     *exec.Cmd
	stderr  bytes.Buffer
	in      chan kafkaHistory
	mu      sync.Mutex
	results map[string]chan kafkaResult
	done    chan struct{} // closed when stdout ends
	readErr error
}

// startJar starts java on jar (its main class mainClass, or the manifest's
// when ""), what in messages, its stderr into stderr, and returns its
// pipes: a JVM tuned to start fast (the oracles live for one test).
func startJar(t *testing.T, what, jar, mainClass string, stderr *bytes.Buffer) (*exec.Cmd, io.WriteCloser, io.Reader) {
	t.Helper()
	args := []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-jar", jar}
	if mainClass != "" {
		// The manifest's Class-Path (lib/) applies to a jar on -cp too.
		args = []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", jar, mainClass}
	}
	cmd := exec.Command("java", args...)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	return cmd, stdin, stdout
}

// startOracle starts the JVM; it stops when the test ends.
func startOracle(t *testing.T) *oracle {
	t.Helper()
	o := &oracle{in: make(chan kafkaHistory), results: map[string]chan kafkaResult{}, done: make(chan struct{})}
	var stdin io.WriteCloser
	var stdout io.Reader
	o.cmd, stdin, stdout = startJar(t, "the Kafka Streams oracle", oracleJar, "", &o.stderr)
	t.Cleanup(func() {
		close(o.in)
		_ = o.cmd.Wait()
	})
	go func() {
		defer stdin.Close()
		enc := json.NewEncoder(stdin)
		for h := range o.in {
			if err := enc.Encode(&h); err != nil {
				for range o.in { // the JVM died: the reader reports it
				}
			}
		}
	}()
	go o.read(stdout)
	return o
}

// submit sends h to Kafka Streams; result waits for what it did.
func (o *oracle) submit(h kafkaHistory) {
	o.mu.Lock()
	o.results[h.ID] = make(chan kafkaResult, 1)
	o.mu.Unlock()
	o.in <- h
}

func (o *oracle) read(stdout io.Reader) {
	defer close(o.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var r kafkaResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			o.readErr = fmt.Errorf("the oracle wrote a line that is not a result: %.200q: %w", sc.Text(), err)
			return
		}
		o.mu.Lock()
		ch, ok := o.results[r.ID]
		o.mu.Unlock()
		if !ok {
			o.readErr = fmt.Errorf("the oracle answered for history %q, which it was not sent", r.ID)
			return
		}
		ch <- r
	}
	o.readErr = sc.Err()
}

// result waits for the result of history id.
func (o *oracle) result(t *testing.T, id string) kafkaResult {
	t.Helper()
	o.mu.Lock()
	ch := o.results[id]
	o.mu.Unlock()
	select {
	case r := <-ch:
		if r.Error != "" {
			t.Fatalf("Kafka Streams failed on history %s: %s", id, r.Error)
		}
		return r
	case <-o.done:
		select {
		case r := <-ch:
			return r
		default:
		}
		_ = o.cmd.Wait() // its stderr is complete
		t.Fatalf("the Kafka Streams oracle ended before answering for %s (read error: %v); its stderr:\n%s", id, o.readErr, o.stderr.String())
	}
	return kafkaResult{}
}

// lineOracle is one running JVM of an oracle that answers each history
// (a JSON line on its stdin) with one JSON line on its stdout, in order:
// the Flink CEP oracle and the Kafka Streams join oracle.
type lineOracle struct {
	what   string
	cmd    *exec.Cmd
	stderr bytes.Buffer
	enc    *json.Encoder
	out    *bufio.Scanner
}

// startLineOracle starts what (for messages): jar's main class mainClass
// ("" for the manifest's). It stops when the test ends.
func startLineOracle(t *testing.T, what, jar, mainClass string) *lineOracle {
	t.Helper()
	o := &lineOracle{what: what}
	var stdin io.WriteCloser
	var stdout io.Reader
	o.cmd, stdin, stdout = startJar(t, what, jar, mainClass, &o.stderr)
	t.Cleanup(func() {
		stdin.Close()
		_ = o.cmd.Wait()
	})
	o.enc = json.NewEncoder(stdin)
	o.out = bufio.NewScanner(stdout)
	o.out.Buffer(make([]byte, 0, 1<<20), 64<<20)
	return o
}

// ask sends history id (in) and decodes the oracle's answer into out.
func (o *lineOracle) ask(t *testing.T, id string, in, out any) {
	t.Helper()
	if err := o.enc.Encode(in); err != nil {
		t.Fatalf("writing history %s to %s: %v; its stderr:\n%s", id, o.what, err, o.stderr.String())
	}
	if !o.out.Scan() {
		t.Fatalf("%s ended before answering for %s (%v); its stderr:\n%s", o.what, id, o.out.Err(), o.stderr.String())
	}
	if err := json.Unmarshal(o.out.Bytes(), out); err != nil {
		t.Fatalf("%s wrote a line that is not a result: %.200q: %v", o.what, o.out.Text(), err)
	}
}

// distinctOutputs decodes an output stream's records (what names them in
// messages: "output", "match") and keeps one of each id, in order: emission
// is at least once, so a copy is expected, but a copy whose bytes differ
// from the first is a problem, returned naming both.
func distinctOutputs(t *testing.T, records [][]byte, what string) (envs []stream.Envelope, problems []string) {
	t.Helper()
	byID := map[string][]byte{}
	for _, b := range records {
		var env stream.Envelope
		if err := stream.Unmarshal(b, &env); err != nil {
			t.Fatalf("%s record %s: %v", what, b, err)
		}
		if prev, ok := byID[env.ID]; ok {
			if !bytes.Equal(prev, b) {
				problems = append(problems, fmt.Sprintf("%s id %s emitted as %s and as %s", what, env.ID, prev, b))
			}
			continue
		}
		byID[env.ID] = b
		envs = append(envs, env)
	}
	return envs, problems
}
