package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// maxEventBytes is the Invoke API's payload limit (RequestResponse).
const maxEventBytes = 6 << 20

// invoke sends one event file to a function through the Lambda Invoke API,
// as the console's Test tab does, and prints the function's log and answer.
// It talks to a running `make local-up` (its Lambda API on -lambda-port);
// when none answers there, it brings the topology up on a private stand-in
// for this one invocation and stops it after. With -check it stops after
// checking the event file and the function's name.
func invoke(ctx context.Context, o *options) (err error) {
	if o.fn == "" || o.event == "" {
		return usageError{"invoke needs a function and an event file: make invoke FN=ingest EVENT=events/ingest/function-url-post.json (or -fn and -event)"}
	}
	payload, over, err := limits.ReadFileAtMost(o.event, maxEventBytes)
	if err != nil {
		return fmt.Errorf("event file: %w", err)
	}
	if over {
		return fmt.Errorf("event file %s: over the Invoke API's 6 MB limit", o.event)
	}
	// The strict reader, not json.Valid: the event is decoded and written
	// back fresh (freshen), which would keep the last of a key twice and
	// mend text that is not UTF-8, so the function would get another event
	// than the file's. (A hostile document inside a record's data or a
	// body is sent as it is.)
	if err := strictjson.Check(payload, strictjson.Options{Name: "event", MaxBytes: maxEventBytes}); err != nil {
		return fmt.Errorf("event file %s: %w (the Invoke API takes one JSON document)", o.event, err)
	}
	endpoint := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(o.lambdaPort))
	running := listening(net.JoinHostPort("127.0.0.1", strconv.Itoa(o.lambdaPort)), 500*time.Millisecond)
	if !running {
		// The topology comes up from o.template for this one invocation
		// (a stand-in, the deploy, every function: seconds): a name none
		// of its functions has is refused now, not after all that.
		if err := checkFunction(o); err != nil {
			return err
		}
	}
	if o.checkOnly {
		return nil
	}
	// The samples' fixed times and positions would become a real shard's
	// fence and a watermark days behind: send a fresh copy (the file stays
	// as the console takes it).
	payload, err = freshen(os.Stdout, o.event, payload, time.Now())
	if err != nil {
		return err
	}
	if len(payload) > maxEventBytes {
		return fmt.Errorf("event file %s: rewritten for this stack, over the Invoke API's 6 MB limit", o.event)
	}
	if !running {
		fmt.Printf("▸ nothing answers on %s (no `make local-up` running): bringing the topology up for this one invocation\n", endpoint)
		tm := loadTimings(o.root)
		defer tm.done()
		o.addr = "127.0.0.1:0" // a private stand-in: never deploy onto something else for one event
		srv, stack, err := startStack(ctx, o, tm, ports{url: 0, lambda: 0, dashboard: -1})
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stack.Close(), srv.Stop()) }()
		endpoint = stack.InvokeURL()
	}
	cfg, err := standin.Config(ctx, endpoint)
	if err != nil {
		return err
	}
	client := lambda.NewFromConfig(cfg)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	fmt.Printf("▸ invoking %s with %s through %s\n", o.fn, o.event, endpoint)
	out, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(o.fn), Payload: payload, LogType: lambdatypes.LogTypeTail})
	if err != nil {
		return noFunction(o.fn, err)
	}
	if tail, err := base64.StdEncoding.DecodeString(aws.ToString(out.LogResult)); err == nil && len(tail) > 0 {
		fmt.Println("  log (the last 4 KB):")
		for _, line := range strings.Split(strings.TrimRight(string(tail), "\n"), "\n") {
			fmt.Printf("    %s\n", line)
		}
	}
	fe := aws.ToString(out.FunctionError)
	status := "answered"
	if fe != "" {
		status = "failed (FunctionError " + fe + ")"
	}
	fmt.Printf("▸ %s %s:\n", o.fn, status)
	var pretty bytes.Buffer
	if json.Indent(&pretty, out.Payload, "  ", "  ") == nil {
		fmt.Printf("  %s\n", pretty.String())
	} else {
		fmt.Printf("  %s\n", out.Payload)
	}
	if fe != "" {
		// As the console's Test tab shows "Execution result: failed": a
		// script running make invoke must see it too.
		return fmt.Errorf("%s failed on %s (FunctionError %s): its answer and log are above", o.fn, o.event, fe)
	}
	return nil
}

// noFunction is err, the Invoke API's, but a ResourceNotFoundException (make
// invoke FN=nope) becomes a usage error naming -fn and FN= with the local
// API's message, which lists the running functions, where the SDK's
// "operation error Lambda: Invoke, https response error StatusCode: 404,
// RequestID: , ResourceNotFoundException: …" named neither.
func noFunction(fn string, err error) error {
	var nf *lambdatypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		return err
	}
	msg := nf.ErrorMessage()
	// "Function not found: <name>: no function <name> in the running
	// topology; the functions are: …": the name once is enough.
	if i := strings.Index(msg, "no function "); i >= 0 {
		msg = msg[i:]
	} else if _, rest, ok := strings.Cut(msg, strictjson.QuoteCut(fn, maxFnEcho)+": "); ok {
		msg = rest // "2 functions run aggregate here, one per pipeline: …"
	}
	return usageError{fmt.Sprintf("-fn %s (make invoke FN=): %s", strictjson.QuoteCut(fn, maxFnEcho), strictjson.Cut(msg, maxAPIMessage))}
}

// checkFunction refuses an -fn that no function of o.template answers to
// once it runs, as the Invoke API would refuse it, naming the template's
// functions. It reads the template only.
func checkFunction(o *options) error {
	err := local.CheckFunction(o.template, freshStack, o.fn)
	var nf *local.NoFunctionError
	if errors.As(err, &nf) {
		return usageError{fmt.Sprintf("-fn %s (make invoke FN=): %s", strictjson.QuoteCut(o.fn, maxFnEcho), strictjson.Cut(nf.Error(), maxAPIMessage))}
	}
	return err
}

// Bounds of what noFunction repeats: of -fn, and of the API's message (a
// list of some twenty functions' names).
const (
	maxFnEcho     = 100
	maxAPIMessage = 2000
)

// freshen rewrites a sample's times to now and its positions to a
// namespace no real one has (local.FreshSample), and prints one line per
// rewrite.
func freshen(w io.Writer, name string, payload []byte, now time.Time) ([]byte, error) {
	fresh, rewrites, err := local.FreshSample(payload, now)
	if err != nil {
		return nil, fmt.Errorf("event file %s: %w", name, err)
	}
	if len(rewrites) == 0 {
		fmt.Fprintf(w, "▸ %s carries no times or positions: sent as it is\n", name)
		return payload, nil
	}
	fmt.Fprintf(w, "▸ sending a fresh copy of %s (the file is unchanged), so that it cannot move this stack's watermarks or positions:\n", name)
	for _, r := range rewrites {
		fmt.Fprintf(w, "    %s\n", r)
	}
	if why := local.SampleSafety(payload); why != "" {
		fmt.Fprintf(w, "  %s\n", why)
	}
	return fresh, nil
}

// listening reports whether something accepts connections on addr within
// patience.
func listening(addr string, patience time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, patience)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
