package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// make invoke of an event file the strict reader refuses (a key twice, text
// that is not UTF-8) is refused naming the place, before anything is
// invoked: the event is rewritten fresh for the stack, which would keep the
// last copy of the key and mend the text, so the function would get
// another event than the file.
func TestInvokeRefusesAnEventFileThatReadsTwoWays(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, doc, want string }{
		{"a key twice", `{"Records":[],"Records":[{"eventSource":"aws:kinesis"}]}`, "Records"},
		{"text that is not UTF-8", "{\"Records\":[{\"eventSource\":\"aws:kinesis\xff\"}]}", "UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			if err := os.WriteFile(file, []byte(c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := invoke(context.Background(), &options{root: filepath.Join("..", ".."), fn: "aggregate", event: file, lambdaPort: 1})
			if err == nil || !strings.Contains(err.Error(), "event file "+file) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("make invoke of %s: %v; want refused naming %s", c.name, err, c.want)
			}
		})
	}
}
