package localdeploy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// stackMarker is the stack name StacksAmong plans a template under: a
// generated name is the stack's name between the same prefix and suffix
// for every stack (<Stack>-<LogicalID>...), so the marker's place in one
// gives them.
const stackMarker = "Zstackmarker0"

// StacksAmong are the stacks, sorted, whose resources the template at path
// names — names gives a deployment's names of one kind: its functions' log
// groups, its streams — among found (what the endpoint has of that kind).
// None when the template does not plan.
func StacksAmong(path string, found []string, names func(*template.Deployment) ([]string, error)) []string {
	d, err := template.Load(path)
	if err != nil {
		return nil
	}
	plan, err := template.Plan(d, template.ProvisionOptions{Stack: stackMarker})
	if err != nil {
		return nil
	}
	own, err := names(plan)
	if err != nil {
		return nil
	}
	stacks := map[string]bool{}
	for _, n := range own {
		pre, suf, ok := strings.Cut(n, stackMarker)
		if !ok {
			continue
		}
		for _, g := range found {
			if len(g) > len(pre)+len(suf) && strings.HasPrefix(g, pre) && strings.HasSuffix(g, suf) {
				stacks[g[len(pre):len(g)-len(suf)]] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(stacks))
}

// StreamNames are a deployment's Kinesis streams' names (for StacksAmong).
func StreamNames(d *template.Deployment) ([]string, error) {
	var out []string
	for _, s := range d.Streams() {
		out = append(out, s.Name)
	}
	return out, nil
}

// streamLister is the Kinesis call RunningStacks makes.
type streamLister interface {
	ListStreams(ctx context.Context, in *kinesis.ListStreamsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListStreamsOutput, error)
}

var _ streamLister = (*kinesis.Client)(nil)

// maxStreamPages bounds RunningStacks' reading: 100 names a page.
const maxStreamPages = 20

// StreamsOn are the names of the Kinesis streams on the endpoint k talks
// to, for StacksAmong with StreamNames (at most maxStreamPages pages).
func StreamsOn(ctx context.Context, k streamLister) ([]string, error) {
	var names []string
	in := &kinesis.ListStreamsInput{Limit: aws.Int32(100)}
	for range maxStreamPages {
		out, err := k.ListStreams(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing the streams to find the running stacks: %w", err)
		}
		names = append(names, out.StreamNames...)
		if !aws.ToBool(out.HasMoreStreams) || len(out.StreamNames) == 0 {
			break
		}
		in = &kinesis.ListStreamsInput{Limit: in.Limit, ExclusiveStartStreamName: aws.String(out.StreamNames[len(out.StreamNames)-1])}
	}
	return names, nil
}

// maxStackEcho bounds what NoStack repeats of -stack's value.
const maxStackEcho = 100

// NoStack is the usage error for a -stack (make's STACK=) that names no
// stack of the running topology, listing those it has (running: as
// RunningStacks gives them).
func NoStack(stack string, running []string) error {
	q := strictjson.QuoteCut(stack, maxStackEcho)
	if len(running) == 0 {
		return cli.Usagef("stack", "%s: no stack of that name in the running topology, nor any other: start one with make local-up", q)
	}
	return cli.Usagef("stack", "%s: no stack of that name in the running topology; stacks: %s (give one, as make local-up prints it)", q, strings.Join(running, ", "))
}

// CheckStack is NoStack when stack is not among running (StacksAmong
// what the endpoint has), else nil.
func CheckStack(stack string, running []string) error {
	if slices.Contains(running, stack) {
		return nil
	}
	return NoStack(stack, running)
}
