package strictjson

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// UnknownParameter is the first, by name, of a request's query parameters
// that is not one of known, and a message naming it for a 400, as an
// unknown field of a body is named: "<name>: is not a parameter of <what>;
// did you mean ...? (known: ...)", or "<name>: <what> takes no query
// parameters". name is "" when every parameter is known. A parameter no
// route reads is refused, never ignored: DELETE /rules/x?dryRun=true would
// otherwise delete, and ?minversion=9 read without the wait it asks for.
func UnknownParameter(query map[string]string, what string, known ...string) (name, message string) {
	for _, p := range slices.Sorted(maps.Keys(query)) {
		if slices.Contains(known, p) {
			continue
		}
		name = Cut(p, maxKeyShown)
		if len(known) == 0 {
			return name, fmt.Sprintf("%s: %s takes no query parameters", name, what)
		}
		message = name + ": is not a parameter of " + what
		if near := Nearest(p, known); near != "" {
			message += fmt.Sprintf("; did you mean %q?", near)
		}
		return name, message + " (known: " + strings.Join(known, ", ") + ")"
	}
	return "", ""
}

// RepeatedParameter is the first query parameter given more than once in
// rawQuery (a request's raw query string, as a function URL passes it in
// rawQueryString), and a message naming it for a 400: "<name>: given 2
// times; give it once". name is "" when none is. A function URL joins a
// repeated parameter's values with commas in queryStringParameters, so
// ?after=a&after=b would read as one value "a,b" that nobody sent.
func RepeatedParameter(rawQuery string) (name, message string) {
	seen := map[string]int{}
	var order []string
	for part := range strings.SplitSeq(rawQuery, "&") {
		if part == "" {
			continue
		}
		k, _, _ := strings.Cut(part, "=")
		if u, err := url.QueryUnescape(k); err == nil {
			k = u
		}
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
	}
	for _, k := range order {
		if n := seen[k]; n > 1 {
			name = Cut(k, maxKeyShown)
			return name, fmt.Sprintf("%s: given %d times; give it once", name, n)
		}
	}
	return "", ""
}
