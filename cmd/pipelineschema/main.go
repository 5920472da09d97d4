// Command pipelineschema writes the JSON Schema of a pipeline file,
// generated from package pipeline's field tables, to pipelines/pipeline.schema.json
// (`make schema`; -o another path, "-" for standard output). A test in
// pkg/pipeline fails when the committed file differs from what it writes.
// Exit status: 0 written, 1 error, 2 usage (nothing written).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: pipelineschema [-o pipelines/pipeline.schema.json | -o -]
Writes the JSON Schema of a pipeline file.`

// run writes the schema where -o says; a stray argument (a path given
// without -o) is a usage error, not a write to the default path.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pipelineschema", flag.ContinueOnError)
	out := fs.String("o", "pipelines/pipeline.schema.json", `where to write the schema ("-": standard output)`)
	if err := cli.Parse(fs, args, stdout, usage, "Exit status: 0 written, 1 error, 2 usage (nothing written)."); errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	} else if err != nil {
		return cli.Fail(stderr, "pipelineschema", err, "")
	}
	b, err := pipeline.JSONSchema()
	if err == nil {
		if *out == "-" {
			_, err = stdout.Write(b)
		} else {
			err = os.WriteFile(*out, b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "pipelineschema:", err)
		return cli.ExitError
	}
	return cli.ExitOK
}
