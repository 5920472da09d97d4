package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The benchmarks call the store in process, so the AWS SDK's own work on
// each request — serializing the input to DynamoDB's JSON, signing it
// (SigV4), running its middleware and decoding the answer — is not in the
// CPU they time. In Lambda it is the function's CPU, on every request. So
// the store keeps a sample of the requests a run really makes (up to
// sdkSamplesPerOp of each operation, with their answers), sdkCost replays
// them through a real dynamodb.Client whose HTTP client answers at once
// with the recorded answer as DynamoDB would encode it, and the CPU that
// takes per request, by operation, is added to every invocation's CPU
// time. What it leaves out is TLS and the socket, a few microseconds a
// request at these sizes.

// sdkSamplesPerOp bounds the requests kept per operation.
const sdkSamplesPerOp = 64

// sdkSample is one request as the handler made it and what the store answered.
type sdkSample struct {
	in, out any
}

// sdkCPU is the SDK's CPU time per request, by operation.
type sdkCPU map[string]time.Duration

// of is the SDK's CPU for the requests of u.
func (c sdkCPU) of(u usage) time.Duration {
	var d time.Duration
	for op, n := range u.Requests {
		d += time.Duration(n) * c[op]
	}
	return d
}

// perRequest is the mean over the requests of u.
func (c sdkCPU) perRequest(u usage) time.Duration {
	if n := u.TotalRequests(); n > 0 {
		return c.of(u) / time.Duration(n)
	}
	return 0
}

// String lists the operations and their cost in microseconds.
func (c sdkCPU) String() string {
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

// cannedHTTP answers every request with the next recorded body.
type cannedHTTP struct{ body []byte }

func (h *cannedHTTP) Do(r *http.Request) (*http.Response, error) {
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

// sdkCost replays samples through the SDK, rounds times each, five times
// over, and returns the median CPU per request by operation (one reading
// moves with whatever else the machine does).
func sdkCost(ctx context.Context, samples map[string][]sdkSample, rounds int) (sdkCPU, error) {
	client, h := sdkClient()
	cost := sdkCPU{}
	for op, ss := range samples {
		bodies := make([][]byte, len(ss))
		for i, s := range ss {
			b, err := answerJSON(s.out)
			if err != nil {
				return nil, fmt.Errorf("sdk cost %s: %w", op, err)
			}
			bodies[i] = b
		}
		if _, err := replay(ctx, client, h, ss[0], bodies[0]); err != nil { // warm-up
			return nil, fmt.Errorf("sdk cost %s: %w", op, err)
		}
		var readings []time.Duration
		for range 5 {
			c0 := cpuTime()
			for r := 0; r < rounds; r++ {
				for i, s := range ss {
					if _, err := replay(ctx, client, h, s, bodies[i]); err != nil {
						return nil, fmt.Errorf("sdk cost %s: %w", op, err)
					}
				}
			}
			readings = append(readings, (cpuTime()-c0)/time.Duration(rounds*len(ss)))
		}
		slices.Sort(readings)
		cost[op] = readings[len(readings)/2]
	}
	return cost, nil
}

// sdkClient is a DynamoDB client as the functions make it, whose requests h answers.
func sdkClient() (*dynamodb.Client, *cannedHTTP) {
	h := &cannedHTTP{}
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://127.0.0.1:1"), // never dialled: h answers
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDBENCH", "bench-secret", ""),
		HTTPClient:   h,
	}), h
}

func replay(ctx context.Context, c *dynamodb.Client, h *cannedHTTP, s sdkSample, body []byte) (any, error) {
	h.body = body
	switch in := s.in.(type) {
	case *dynamodb.UpdateItemInput:
		return c.UpdateItem(ctx, in)
	case *dynamodb.PutItemInput:
		return c.PutItem(ctx, in)
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
	return nil, fmt.Errorf("no replay for %T", s.in)
}

// answerJSON is out as DynamoDB's JSON protocol encodes it.
func answerJSON(out any) ([]byte, error) {
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
