package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Limits of Lambda's Invoke API on the request payload.
const (
	maxSyncPayload  = 6 << 20 // RequestResponse: 6 MB
	maxAsyncPayload = 1 << 20 // Event: 1 MB
	// maxLogTail is how much of an invocation's log X-Amz-Log-Result carries
	// (the last 4 KB, as Lambda returns with LogType Tail).
	maxLogTail = 4096
	// maxNameEcho bounds what an error repeats of a FunctionName.
	maxNameEcho = 100
)

// invokeServer serves Lambda's Invoke API (POST
// /2015-03-31/functions/{name}/invocations) on 127.0.0.1 for every function
// of the stack, as `sam local start-lambda` does, so the AWS CLI
// (`aws lambda invoke --endpoint-url …`) and the SDKs' Lambda clients invoke
// the local functions.
type invokeServer struct {
	stack *Stack
	srv   *http.Server
	ln    net.Listener
	functionIndex
	// aliases maps a local resource's friendly or logical name, as a sample
	// event may give it, to its physical name (see localizeNames).
	aliases  map[string]resourceAlias
	progress io.Writer
	async    sync.WaitGroup
}

// resourceAlias is a table, stream or queue a payload may name by its
// construct id or logical id.
type resourceAlias struct {
	kind     string // "table", "stream" or "queue"
	physical string // the local name
	url      string // queues only
	arn      string
}

func newInvokeServer(s *Stack, ln net.Listener, progress io.Writer) *invokeServer {
	var running []template.FunctionSpec
	for _, f := range s.specs {
		if _, ok := s.functions[s.names[f.LogicalID]]; ok {
			running = append(running, f)
		}
	}
	v := &invokeServer{stack: s, ln: ln, functionIndex: newFunctionIndex(running, s.names, "the running topology"), progress: progress}
	v.aliases = resourceAliases(s.deployment)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{name}/invocations", v.invoke)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "UnknownOperationException", "only Invoke (POST /2015-03-31/functions/{FunctionName}/invocations) is served locally; got "+r.Method+" "+r.URL.Path)
	})
	v.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = v.srv.Serve(ln) }()
	return v
}

// URL is the endpoint to give a Lambda client (--endpoint-url).
func (v *invokeServer) URL() string { return "http://" + v.ln.Addr().String() }

func (v *invokeServer) close(ctx context.Context) error {
	err := v.srv.Shutdown(ctx)
	v.async.Wait()
	return err
}

// functionIndex is what the Invoke API resolves a FunctionName against:
// the functions of a stack, by every name it accepts for them.
type functionIndex struct {
	// names maps every accepted function name to the runner's name of the
	// function: that name (ingest, aggregate-pageviews), the template's
	// logical id, the physical name and its ARN.
	names map[string]string
	// known lists the functions' names, for errors.
	known []string
	// several lists, for a binary several functions run (one per
	// pipeline), their names, for the error naming them.
	several map[string][]string
	// where names the functions' topology in errors: "the running
	// topology", or the template they are read from.
	where string
}

// newFunctionIndex indexes specs by the runner's names of them (names, by
// logical id: functionNames).
func newFunctionIndex(specs []template.FunctionSpec, names map[string]string, where string) functionIndex {
	x := functionIndex{names: map[string]string{}, several: map[string][]string{}, where: where}
	for _, f := range specs {
		name := names[f.LogicalID]
		for _, n := range []string{name, f.LogicalID, f.FunctionName, f.ARN} {
			if n != "" {
				x.names[n] = name
			}
		}
		x.known = append(x.known, name)
		if name != f.Binary {
			x.several[f.Binary] = append(x.several[f.Binary], name)
		}
	}
	sort.Strings(x.known)
	return x
}

// CheckFunction returns nil when fn is a FunctionName the Invoke API would
// accept once the template at path runs as stack (Up), and otherwise the
// error the API would answer with, naming the template and listing its
// functions. It reads the template only: nothing is deployed or started,
// so a caller can refuse a wrong name before anything slow runs.
func CheckFunction(path, stack, fn string) error {
	t, err := template.Load(path)
	if err != nil {
		return err
	}
	d, err := template.Plan(t, template.ProvisionOptions{Stack: stack, Region: standin.Region})
	if err != nil {
		return err
	}
	specs := d.FunctionNames()
	x := newFunctionIndex(specs, functionNames(specs), path)
	if _, err := x.binaryFor(fn, ""); err != nil {
		return &NoFunctionError{msg: err.Error()}
	}
	return nil
}

// NoFunctionError is CheckFunction's error for a name that no function of
// the template answers to, told apart from a template it cannot read; its
// message is the one the Invoke API would give.
type NoFunctionError struct{ msg string }

func (e *NoFunctionError) Error() string { return e.msg }

// binaryFor resolves a FunctionName as the Invoke API accepts it: a name, a
// logical id, an ARN or partial ARN (account:function:name), each optionally
// with the qualifier $LATEST (the only version that runs locally).
func (v *functionIndex) binaryFor(name, qualifier string) (string, error) {
	n := name
	if i := strings.Index(n, ":function:"); i >= 0 {
		n = n[i+len(":function:"):]
	}
	if base, q, ok := strings.Cut(n, ":"); ok {
		n = base
		if qualifier == "" {
			qualifier = q
		}
	}
	if qualifier != "" && qualifier != "$LATEST" {
		return "", fmt.Errorf("version or alias %s: only $LATEST runs locally", strictjson.QuoteCut(qualifier, maxNameEcho))
	}
	if b, ok := v.names[n]; ok {
		return b, nil
	}
	if fns := v.several[n]; len(fns) > 1 {
		return "", fmt.Errorf("%d functions run %s here, one per pipeline: name one of %s", len(fns), n, strings.Join(fns, ", "))
	}
	return "", fmt.Errorf("no function %s in %s; the functions are: %s (or their logical ids, physical names or ARNs)", strictjson.QuoteCut(n, maxNameEcho), v.where, strings.Join(v.known, ", "))
}

func (v *invokeServer) invoke(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	binary, err := v.binaryFor(name, r.URL.Query().Get("Qualifier"))
	if err != nil {
		apiError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+strictjson.QuoteCut(name, maxNameEcho)+": "+err.Error())
		return
	}
	typ := r.Header.Get("X-Amz-Invocation-Type")
	if typ == "" {
		typ = "RequestResponse"
	}
	limit := maxSyncPayload
	switch typ {
	case "RequestResponse", "DryRun":
	case "Event":
		limit = maxAsyncPayload
	default:
		apiError(w, http.StatusBadRequest, "InvalidParameterValueException", fmt.Sprintf("X-Amz-Invocation-Type %q: want RequestResponse, Event or DryRun", typ))
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidRequestContentException", "reading the payload: "+err.Error())
		return
	}
	if len(payload) > limit {
		apiError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException", fmt.Sprintf("Request must be smaller than %d bytes for the Invoke operation (%s)", limit, typ))
		return
	}
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = []byte("{}")
	}
	if !json.Valid(payload) {
		apiError(w, http.StatusBadRequest, "InvalidRequestContentException", "Could not parse request body into json: the payload of "+binary+" is not valid JSON")
		return
	}
	payload, notes := v.localizeNames(payload)
	for _, n := range notes {
		fmt.Fprintf(v.progress, "    invoke %s: %s\n", binary, n)
	}
	switch typ {
	case "DryRun":
		w.WriteHeader(http.StatusNoContent)
		return
	case "Event":
		// Lambda queues the event and answers at once; locally it runs once,
		// in the background (no asynchronous retries).
		v.async.Add(1)
		go func() {
			defer v.async.Done()
			res, err := v.stack.Invoke(v.stack.runCtx, binary, payload)
			switch {
			case err != nil:
				fmt.Fprintf(v.progress, "    invoke %s (Event): %v\n", binary, err)
			case res.FunctionError != "":
				fmt.Fprintf(v.progress, "    invoke %s (Event) failed: %s\n", binary, truncateBytes(res.Payload, 200))
			}
		}()
		w.Header().Set("X-Amzn-Requestid", newRequestID())
		w.WriteHeader(http.StatusAccepted)
		return
	}
	res, err := v.stack.Invoke(r.Context(), binary, payload)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "ServiceException", "invoking "+binary+" under aws-lambda-rie: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amz-Executed-Version", "$LATEST")
	h.Set("X-Amzn-Requestid", res.RequestID)
	if res.FunctionError != "" {
		h.Set("X-Amz-Function-Error", res.FunctionError)
	}
	if r.Header.Get("X-Amz-Log-Type") == "Tail" {
		tail := v.stack.invocationLog(res.RequestID)
		if len(tail) > maxLogTail {
			tail = tail[len(tail)-maxLogTail:]
		}
		h.Set("X-Amz-Log-Result", base64.StdEncoding.EncodeToString(tail))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res.Payload)
}

// apiError answers as the Lambda API does: the error code in
// X-Amzn-ErrorType, a JSON body with Type and Message.
func apiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", code)
	w.WriteHeader(status)
	typ := "User"
	if status >= 500 {
		typ = "Service"
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": typ, "Message": msg, "message": msg})
}

// resourceAliases names each table, stream and queue of the deployment by
// its construct id (the last id of its CDK path, lower-cased: "profiles")
// and by its logical id, when that name is not shared by two resources of
// the same kind.
func resourceAliases(d *template.Deployment) map[string]resourceAlias {
	out := map[string]resourceAlias{}
	ambiguous := map[string]bool{}
	add := func(kind, logicalID string, a resourceAlias) {
		a.kind = kind
		names := []string{strings.ToLower(logicalID)}
		if c := constructID(d.Template(), logicalID); c != "" {
			// "profiles", and "tributary-profiles" as a sample's ARN may
			// spell it (<stack>-<construct id>).
			names = append(names, strings.ToLower(c), strings.ToLower(d.Template().Name+"-"+c))
		}
		for _, n := range names {
			k := kind + "/" + n
			if prev, ok := out[k]; ok && prev.physical != a.physical {
				ambiguous[k] = true
			}
			out[k] = a
		}
	}
	for _, t := range d.Tables() {
		add("table", t.LogicalID, resourceAlias{physical: t.Name, arn: t.ARN})
	}
	for _, s := range d.Streams() {
		add("stream", s.LogicalID, resourceAlias{physical: s.Name, arn: s.ARN})
	}
	for _, q := range d.Queues() {
		add("queue", q.LogicalID, resourceAlias{physical: q.Name, url: q.URL, arn: q.ARN})
	}
	for k := range ambiguous {
		delete(out, k)
	}
	return out
}

// nameMembers are the members of a payload whose value names a local
// resource, by kind; a member named so whose value is a friendly or logical
// name of a resource of that kind gets the local physical name.
var nameMembers = map[string]string{
	"table": "table", "tablename": "table",
	"stream": "stream", "streamname": "stream",
	"queue": "queue", "queuename": "queue", "queueurl": "queue",
}

// localizeNames rewrites the resource names a sample payload gives by their
// friendly name ("table": "profiles") or logical id to the names the local
// deployment uses ("Tributary-ProfilesCDCProfiles4B4A3E71"), so that a
// console test event written for the stack works locally as it is. Only
// members named table, tableName, stream, streamName, queue, queueName or
// queueUrl (any case) are considered, and only values that are not already
// a physical name. It returns the payload unchanged when nothing matched, and
// one note per substitution.
func (v *invokeServer) localizeNames(payload []byte) ([]byte, []string) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return payload, nil
	}
	var notes []string
	var walk func(x any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			for k, e := range t {
				if s, ok := e.(string); ok && strings.EqualFold(k, "eventSourceARN") {
					if local, ok := v.localARN(s); ok {
						t[k] = local
						notes = append(notes, fmt.Sprintf("%s %s is %s here", k, s, local))
					}
					continue
				}
				kind, named := nameMembers[strings.ToLower(k)]
				if s, ok := e.(string); ok && named {
					if a, ok := v.aliases[kind+"/"+strings.ToLower(s)]; ok && s != a.physical && s != a.url {
						repl := a.physical
						if strings.EqualFold(k, "queueUrl") {
							repl = a.url
						}
						t[k] = repl
						notes = append(notes, fmt.Sprintf("%q: %q is %s here (the local deployment's name for it)", k, s, repl))
					}
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(doc)
	if len(notes) == 0 {
		return payload, nil
	}
	notes = slices.Compact(slices.Sorted(slices.Values(notes)))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(doc) != nil {
		return payload, nil
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), notes
}

// localARN maps the ARN of a sample's event source — a Kinesis stream, a
// DynamoDB table's stream or an SQS queue named by a friendly or logical
// name — to the local resource's ARN (a table stream keeps the sample's
// label). ok is false for an ARN of anything else.
func (v *invokeServer) localARN(arn string) (string, bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return "", false
	}
	service, resource := parts[2], parts[5]
	var kind, name, rest string
	switch service {
	case "sqs":
		kind, name = "queue", resource
	case "kinesis":
		n, ok := strings.CutPrefix(resource, "stream/")
		if !ok {
			return "", false
		}
		kind, name = "stream", n
		if i := strings.IndexByte(n, '/'); i >= 0 { // an EFO consumer's ARN
			return "", false
		}
	case "dynamodb":
		n, ok := strings.CutPrefix(resource, "table/")
		if !ok {
			return "", false
		}
		kind = "table"
		name, rest, _ = strings.Cut(n, "/")
		if rest != "" {
			rest = "/" + rest
		}
	default:
		return "", false
	}
	a, ok := v.aliases[kind+"/"+strings.ToLower(name)]
	if !ok || a.physical == name || a.arn == "" {
		return "", false
	}
	return a.arn + rest, true
}

// InvokeURL is the endpoint of the local Lambda Invoke API, or "" when it
// is not served.
func (s *Stack) InvokeURL() string {
	if s.invokeAPI == nil {
		return ""
	}
	return s.invokeAPI.URL()
}

// FunctionNames lists the names the Invoke API accepts for each running
// function, by the runner's name of it (its binary, or
// "<binary>-<pipeline>"): its logical id and its physical name.
func (s *Stack) FunctionNames() map[string][2]string {
	out := map[string][2]string{}
	for _, f := range s.specs {
		name := s.names[f.LogicalID]
		if _, ok := s.functions[name]; ok {
			out[name] = [2]string{f.LogicalID, f.FunctionName}
		}
	}
	return out
}

// invocationLogs keeps each invocation's log lines, by request id, for the
// Invoke API's LogType Tail: the lines an environment printed from START
// to REPORT. Only the last maxKeptInvocations are kept.
type invocationLogs struct {
	mu      sync.Mutex
	current map[string]*bytes.Buffer // by log stream: the invocation under way
	done    map[string][]byte        // by request id
	order   []string
}

const maxKeptInvocations = 256

func newInvocationLogs() *invocationLogs {
	return &invocationLogs{current: map[string]*bytes.Buffer{}, done: map[string][]byte{}}
}

func (l *invocationLogs) line(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if strings.HasPrefix(line, "START RequestId: ") {
		l.current[stream] = &bytes.Buffer{}
	}
	b := l.current[stream]
	if b == nil {
		return
	}
	if b.Len() < 1<<20 {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	if rest, ok := strings.CutPrefix(line, "REPORT RequestId: "); ok {
		id, _, _ := strings.Cut(rest, "\t")
		id = strings.TrimSpace(id)
		l.done[id] = b.Bytes()
		l.order = append(l.order, id)
		delete(l.current, stream)
		if len(l.order) > maxKeptInvocations {
			delete(l.done, l.order[0])
			l.order = l.order[1:]
		}
	}
}

func (l *invocationLogs) take(id string) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.done[id]
	delete(l.done, id)
	return b
}

// invocationLog returns (once) the log of the invocation with request id.
func (s *Stack) invocationLog(id string) []byte { return s.invLogs.take(id) }

func truncateBytes(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// newRequestID is a random UUID, the shape of Lambda's request ids.
func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
