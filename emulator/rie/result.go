package rie

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// Unhandled is the FunctionError of an invocation that failed inside the
// function (error, panic, exit, timeout), as the Lambda Invoke API names it.
const Unhandled = "Unhandled"

// errorDocument is the body Lambda returns for a failed invocation.
type errorDocument struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

// classify maps what RIE answered onto Lambda's Invoke result. What RIE does,
// found by experiment with aws-lambda-rie at Version and aws-lambda-go:
//
//   - success: 200, the handler's response as the body;
//   - handler error: 200 (RIE drops the Error-Type header), body
//     {"errorMessage","errorType"} as the runtime posted it to /error;
//   - panic: 502, the same document plus "stackTrace" (aws-lambda-go reports
//     the panic, then the runtime exits);
//   - os.Exit / crash: 502, {"errorType":"Runtime.ExitError",...};
//   - init failure (the bootstrap exits before asking for work): 502, empty body;
//   - timeout: 200, plain text "Task timed out after N.00 seconds", the
//     runtime is SIGKILLed.
//
// After a crash or timeout RIE starts a fresh runtime on the next invocation
// (a cold start, as on Lambda). Other statuses are emulator failures.
func classify(status int, body []byte, reqID string) (Result, error) {
	switch status {
	case http.StatusOK:
		if msg, ok := bytes.CutPrefix(body, []byte("Task timed out after")); ok {
			return Result{FunctionError: Unhandled, Payload: errorJSON("Sandbox.Timedout",
				fmt.Sprintf("RequestId: %s Error: Task timed out after%s", reqID, msg))}, nil
		}
		if isErrorDocument(body) {
			return Result{FunctionError: Unhandled, Payload: body}, nil
		}
		return Result{Payload: body}, nil
	case http.StatusBadGateway:
		if isErrorDocument(body) {
			return Result{FunctionError: Unhandled, Payload: body}, nil
		}
		return Result{FunctionError: Unhandled, Payload: errorJSON("Runtime.ExitError",
			fmt.Sprintf("RequestId: %s Error: Runtime exited without providing a reason (init failed; see the function's log)", reqID))}, nil
	}
	return Result{}, fmt.Errorf("emulator answered HTTP %d: %.200s", status, body)
}

// isErrorDocument reports whether body is the error document a runtime posts
// to /runtime/invocation/{id}/error: a JSON object with string errorMessage
// and errorType and nothing but stackTrace or cause besides. RIE does not
// tell a handler error from a response any other way, so a handler that
// returns exactly such an object is taken for a failure (documented limit).
func isErrorDocument(body []byte) bool {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	var msg, typ string
	if json.Unmarshal(m["errorMessage"], &msg) != nil || json.Unmarshal(m["errorType"], &typ) != nil || typ == "" {
		return false
	}
	for k := range m {
		switch k {
		case "errorMessage", "errorType", "stackTrace", "cause", "requestId":
		default:
			return false
		}
	}
	return true
}

func errorJSON(typ, msg string) []byte {
	b, _ := json.Marshal(errorDocument{ErrorMessage: msg, ErrorType: typ})
	return b
}

// Error types of the failures RIE itself reports (see classify).
const (
	ErrorTypeExit    = "Runtime.ExitError" // the runtime process exited: a crash
	ErrorTypeTimeout = "Sandbox.Timedout"  // the invocation ran past the function timeout
)

// ErrorType is the errorType of a failed invocation's error document
// (ErrorTypeExit for a crash, ErrorTypeTimeout for a timeout, else what the
// handler reported), "" for a success.
func (r Result) ErrorType() string {
	if r.FunctionError == "" {
		return ""
	}
	var doc errorDocument
	_ = json.Unmarshal(r.Payload, &doc)
	return doc.ErrorType
}
