package strictjson

import (
	"fmt"
	"maps"
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
