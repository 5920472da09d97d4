package sdkcost

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// SamplesPerOp bounds the requests a Sampler keeps per operation.
const SamplesPerOp = 64

// Sample is one request as the handler made it (a *dynamodb.…Input) and
// what the store answered (the matching *dynamodb.…Output).
type Sample struct {
	In, Out any
}

// Sampler keeps a uniform sample (a reservoir) of each operation's
// requests, at most SamplesPerOp of each. Safe for concurrent use.
type Sampler struct {
	mu      sync.Mutex
	samples map[string][]Sample
	seen    map[string]int
	rng     *rand.Rand
}

// Keep offers one successful request of operation op to the sample.
func (s *Sampler) Keep(op string, in, out any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples == nil {
		s.samples, s.seen, s.rng = map[string][]Sample{}, map[string]int{}, rand.New(rand.NewPCG(1, 2))
	}
	s.seen[op]++
	if len(s.samples[op]) < SamplesPerOp {
		s.samples[op] = append(s.samples[op], Sample{in, out})
	} else if i := s.rng.IntN(s.seen[op]); i < SamplesPerOp {
		s.samples[op][i] = Sample{in, out}
	}
}

// Samples returns the sample kept so far, by operation.
func (s *Sampler) Samples() map[string][]Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]Sample, len(s.samples))
	for op, ss := range s.samples {
		out[op] = slices.Clone(ss)
	}
	return out
}

// CPU is the SDK's CPU time per request, by operation ("UpdateItem", …).
type CPU map[string]time.Duration

// Of is the SDK's CPU for requests, counted by operation.
func (c CPU) Of(requests map[string]int) time.Duration {
	var d time.Duration
	for op, n := range requests {
		d += time.Duration(n) * c[op]
	}
	return d
}

// String lists the operations and their cost in microseconds.
func (c CPU) String() string {
	ops := make([]string, 0, len(c))
	for op := range c {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b bytes.Buffer
	for i, op := range ops {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%.0f", op, float64(c[op])/1e3)
	}
	return b.String()
}

// Canned is an HTTP client that answers every request at once, 200 OK,
// with the body Replay set.
type Canned struct{ body []byte }

// Do reads the request's body and answers.
func (h *Canned) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
	}
	return &http.Response{
		StatusCode:    http.StatusOK,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:          io.NopCloser(bytes.NewReader(h.body)),
		ContentLength: int64(len(h.body)),
		Request:       r,
	}, nil
}

// Measure replays samples through the SDK, rounds times each, five times
// over, and returns the median CPU per request by operation, as clock
// (the caller's CPU time) tells it; one reading moves with whatever else
// the machine does.
func Measure(ctx context.Context, samples map[string][]Sample, rounds int, clock func() time.Duration) (CPU, error) {
	client, h := Client()
	cost := CPU{}
	for op, ss := range samples {
		bodies := make([][]byte, len(ss))
		for i, s := range ss {
			b, err := AnswerJSON(s.Out)
			if err != nil {
				return nil, fmt.Errorf("sdk cost %s: %w", op, err)
			}
			bodies[i] = b
		}
		if _, err := Replay(ctx, client, h, ss[0], bodies[0]); err != nil { // warm-up
			return nil, fmt.Errorf("sdk cost %s: %w", op, err)
		}
		var readings []time.Duration
		for range 5 {
			c0 := clock()
			for r := 0; r < rounds; r++ {
				for i, s := range ss {
					if _, err := Replay(ctx, client, h, s, bodies[i]); err != nil {
						return nil, fmt.Errorf("sdk cost %s: %w", op, err)
					}
				}
			}
			readings = append(readings, (clock()-c0)/time.Duration(rounds*len(ss)))
		}
		slices.Sort(readings)
		cost[op] = readings[len(readings)/2]
	}
	return cost, nil
}

// Client is a DynamoDB client as the functions make it, whose requests h
// answers with the body Replay gives it.
func Client() (*dynamodb.Client, *Canned) {
	h := &Canned{}
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://127.0.0.1:1"), // never dialled: h answers
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDBENCH", "bench-secret", ""),
		HTTPClient:   h,
	}), h
}

// Replay makes s's request through c, h answering it with body.
func Replay(ctx context.Context, c *dynamodb.Client, h *Canned, s Sample, body []byte) (any, error) {
	h.body = body
	switch in := s.In.(type) {
	case *dynamodb.UpdateItemInput:
		return c.UpdateItem(ctx, in)
	case *dynamodb.PutItemInput:
		return c.PutItem(ctx, in)
	case *dynamodb.DeleteItemInput:
		return c.DeleteItem(ctx, in)
	case *dynamodb.GetItemInput:
		return c.GetItem(ctx, in)
	case *dynamodb.QueryInput:
		return c.Query(ctx, in)
	case *dynamodb.BatchWriteItemInput:
		return c.BatchWriteItem(ctx, in)
	case *dynamodb.BatchGetItemInput:
		return c.BatchGetItem(ctx, in)
	case *dynamodb.TransactWriteItemsInput:
		return c.TransactWriteItems(ctx, in)
	}
	return nil, fmt.Errorf("no replay for %T", s.In)
}

// AnswerJSON is out as DynamoDB's JSON protocol encodes it.
func AnswerJSON(out any) ([]byte, error) {
	m := map[string]any{}
	switch o := out.(type) {
	case *dynamodb.UpdateItemOutput:
		if o.Attributes != nil {
			m["Attributes"] = itemJSON(o.Attributes)
		}
	case *dynamodb.PutItemOutput:
		if o.Attributes != nil {
			m["Attributes"] = itemJSON(o.Attributes)
		}
	case *dynamodb.DeleteItemOutput:
		if o.Attributes != nil {
			m["Attributes"] = itemJSON(o.Attributes)
		}
	case *dynamodb.GetItemOutput:
		if o.Item != nil {
			m["Item"] = itemJSON(o.Item)
		}
	case *dynamodb.QueryOutput:
		items := make([]any, len(o.Items))
		for i, it := range o.Items {
			items[i] = itemJSON(it)
		}
		m["Items"], m["Count"], m["ScannedCount"] = items, o.Count, o.ScannedCount
		if o.LastEvaluatedKey != nil {
			m["LastEvaluatedKey"] = itemJSON(o.LastEvaluatedKey)
		}
	case *dynamodb.BatchGetItemOutput:
		resp := map[string]any{}
		for t, items := range o.Responses {
			l := make([]any, len(items))
			for i, it := range items {
				l[i] = itemJSON(it)
			}
			resp[t] = l
		}
		m["Responses"] = resp
	case *dynamodb.BatchWriteItemOutput, *dynamodb.TransactWriteItemsOutput:
	default:
		return nil, fmt.Errorf("no encoding for %T", out)
	}
	return json.Marshal(m)
}

func itemJSON(item map[string]types.AttributeValue) map[string]any {
	m := make(map[string]any, len(item))
	for k, v := range item {
		m[k] = valueJSON(v)
	}
	return m
}

func valueJSON(v types.AttributeValue) map[string]any {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": x.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": x.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(x.Value)}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": x.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": true}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": x.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": x.Value}
	case *types.AttributeValueMemberBS:
		l := make([]string, len(x.Value))
		for i, b := range x.Value {
			l[i] = base64.StdEncoding.EncodeToString(b)
		}
		return map[string]any{"BS": l}
	case *types.AttributeValueMemberL:
		l := make([]any, len(x.Value))
		for i, e := range x.Value {
			l[i] = valueJSON(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		return map[string]any{"M": itemJSON(x.Value)}
	}
	return map[string]any{"NULL": true}
}
