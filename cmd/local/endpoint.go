package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// describeEndpoint says what answers at endpoint: LocalStack (its health
// endpoint), moto (its dashboard API, also behind another run's stand-in),
// or something else speaking the AWS APIs.
func describeEndpoint(ctx context.Context, endpoint string) string {
	client := &http.Client{Timeout: 2 * time.Second}
	get := func(path string) ([]byte, int) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+path, nil)
		if err != nil {
			return nil, 0
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return b, resp.StatusCode
	}
	if b, status := get("/_localstack/health"); status == http.StatusOK {
		var h struct{ Version, Edition string }
		if json.Unmarshal(b, &h) == nil && h.Version != "" {
			return fmt.Sprintf("LocalStack %s (%s)", h.Version, h.Edition)
		}
		return "LocalStack"
	}
	if b, status := get("/moto-api/"); status == http.StatusOK && strings.Contains(strings.ToLower(string(b)), "moto") {
		return "moto (another `make local-up`, or a moto server)"
	}
	return "an AWS-compatible endpoint of unknown kind"
}
