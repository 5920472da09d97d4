package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 5, "measured runs per path and batch size; medians and min–max are printed")
	flag.StringVar(&o.batches, "batches", "100,max", "batch sizes, comma separated; max is the largest event that fits Lambda's 6 MB payload")
	flag.IntVar(&o.perRun, "records", 12000, "records per run and path (at least one invocation or interval)")
	flag.IntVar(&o.keys, "keys", 50, "distinct keys")
	flag.StringVar(&o.pipelines, "pipelines", "bench,deployed", "pipelines, comma separated: bench (a count per key per minute: the BENCH throughput lines), deployed (pipelines/pageviews.json: BENCH throughput_deployed lines) or a config file")
	flag.IntVar(&o.deployedRecords, "deployed-records", 3000, "records per run and path for pipelines other than bench")
	flag.BoolVar(&o.benthos, "benthos", true, "also run the Benthos peer on the same events")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the handler runs to this file")
	flag.Parse()
	runtime.GOMAXPROCS(1) // one core, as the goals are stated
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "throughput: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	runs            int
	batches         string
	perRun          int
	keys            int
	pipelines       string
	deployedRecords int
	benthos         bool
	cpuprofile      string
}

// batchSizes parses -batches; 0 stands for max.
func (o options) batchSizes() ([]int, error) {
	var out []int
	for _, f := range strings.Split(o.batches, ",") {
		f = strings.TrimSpace(f)
		if f == "max" {
			out = append(out, 0)
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-batches: %q is not a positive number or max", f)
		}
		out = append(out, n)
	}
	return out, nil
}
