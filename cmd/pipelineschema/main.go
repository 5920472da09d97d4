// Command pipelineschema writes the JSON Schema of a pipeline file,
// generated from package pipeline's field tables, to pipelines/pipeline.schema.json
// (`make schema`; -o another path, "-" for standard output). A test in
// pkg/pipeline fails when the committed file differs from what it writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

func main() {
	out := flag.String("o", "pipelines/pipeline.schema.json", `where to write the schema ("-": standard output)`)
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "pipelineschema:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	b, err := pipeline.JSONSchema()
	if err != nil {
		return err
	}
	if out == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(out, b, 0o644)
}
