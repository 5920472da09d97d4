package cloudwatchlocal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// Limits of the Embedded Metric Format specification.
const (
	maxDimensionsPerSet = 30
	maxMetricsPerDirect = 100
	maxValuesPerMetric  = 100
)

// EMFError says why a log line that looked like an EMF document gave no
// metrics. On AWS, CloudWatch keeps such a line as a log event and drops its
// metrics in the same way.
type EMFError struct {
	Function string
	Line     string
	Reason   string
}

func (e *EMFError) Error() string {
	line := e.Line
	if len(line) > 120 {
		line = line[:120] + "…"
	}
	return fmt.Sprintf("cloudwatchlocal: %s: EMF document gives no metrics: %s (line %s)", e.Function, e.Reason, line)
}

// emfBatch is the metric data one EMF document asks for, by namespace.
type emfBatch map[string][]types.MetricDatum

// isEMF reports whether line is meant as an EMF document: a JSON object with
// an _aws member holding CloudWatchMetrics.
func isEMF(line string) bool {
	b := bytes.TrimSpace([]byte(line))
	return len(b) > 0 && b[0] == '{' && bytes.Contains(b, []byte(`"_aws"`)) && bytes.Contains(b, []byte(`"CloudWatchMetrics"`))
}

// parseEMF extracts the metric data of an EMF document, following the
// specification: every directive's dimension sets times its metrics, values
// and dimension values taken from the root node's target members.
func parseEMF(line string) (emfBatch, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(line)))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if dec.More() {
		return nil, errors.New("extra data after the JSON object")
	}
	meta, ok := root["_aws"].(map[string]any)
	if !ok {
		return nil, errors.New("_aws is not an object")
	}
	tsn, ok := meta["Timestamp"].(json.Number)
	if !ok {
		return nil, errors.New("_aws.Timestamp is required and must be a number of milliseconds since the epoch")
	}
	ms, err := tsn.Int64()
	if err != nil {
		f, ferr := tsn.Float64()
		if ferr != nil {
			return nil, fmt.Errorf("_aws.Timestamp %s is not a number", tsn)
		}
		ms = int64(f)
	}
	ts := time.UnixMilli(ms).UTC()
	directives, ok := meta["CloudWatchMetrics"].([]any)
	if !ok {
		return nil, errors.New("_aws.CloudWatchMetrics must be an array of metric directives")
	}
	out := emfBatch{}
	for i, d := range directives {
		at := fmt.Sprintf("_aws.CloudWatchMetrics[%d]", i)
		dir, ok := d.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", at)
		}
		ns, _ := dir["Namespace"].(string)
		if ns == "" || len(ns) > 255 || ns[0] == ':' {
			return nil, fmt.Errorf("%s.Namespace must be a string of 1 to 255 characters not starting with ':'", at)
		}
		sets, err := dimensionSets(dir["Dimensions"], at+".Dimensions")
		if err != nil {
			return nil, err
		}
		defs, ok := dir["Metrics"].([]any)
		if !ok {
			return nil, fmt.Errorf("%s.Metrics must be an array of metric definitions", at)
		}
		if len(defs) > maxMetricsPerDirect {
			return nil, fmt.Errorf("%s.Metrics has %d definitions; at most %d are allowed", at, len(defs), maxMetricsPerDirect)
		}
		// Dimension values come from the root node and must be strings.
		dimValue := map[string]string{}
		for _, set := range sets {
			for _, k := range set {
				v, ok := root[k]
				if !ok {
					return nil, fmt.Errorf("dimension %q (%s) has no member on the root node", k, at)
				}
				s, ok := v.(string)
				if !ok || s == "" || len(s) > 1024 {
					return nil, fmt.Errorf("dimension %q must be a string of 1 to 1024 characters, got %v", k, v)
				}
				dimValue[k] = s
			}
		}
		for j, md := range defs {
			mat := fmt.Sprintf("%s.Metrics[%d]", at, j)
			def, ok := md.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s is not an object", mat)
			}
			name, _ := def["Name"].(string)
			if name == "" || len(name) > 255 {
				return nil, fmt.Errorf("%s.Name must be a string of 1 to 255 characters", mat)
			}
			unit := types.StandardUnitNone
			if u, ok := def["Unit"]; ok {
				us, _ := u.(string)
				if !slices.Contains(types.StandardUnit("").Values(), types.StandardUnit(us)) {
					return nil, fmt.Errorf("%s.Unit %v is not a CloudWatch unit", mat, u)
				}
				unit = types.StandardUnit(us)
			}
			var resolution *int32
			if r, ok := def["StorageResolution"]; ok {
				rn, _ := r.(json.Number)
				switch rn.String() {
				case "1":
					resolution = aws.Int32(1)
				case "60":
					resolution = aws.Int32(60)
				default:
					return nil, fmt.Errorf("%s.StorageResolution must be 1 or 60, got %v", mat, r)
				}
			}
			values, err := metricValues(root[name], name)
			if err != nil {
				return nil, err
			}
			for _, set := range sets {
				datum := types.MetricDatum{
					MetricName:        aws.String(name),
					Timestamp:         aws.Time(ts),
					Unit:              unit,
					StorageResolution: resolution,
				}
				for _, k := range set {
					datum.Dimensions = append(datum.Dimensions, types.Dimension{Name: aws.String(k), Value: aws.String(dimValue[k])})
				}
				setValues(&datum, values)
				out[ns] = append(out[ns], datum)
			}
		}
	}
	return out, nil
}

// dimensionSets reads a DimensionSet array: an array of arrays of dimension
// keys. An empty set publishes the metric without dimensions.
func dimensionSets(v any, at string) ([][]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s must be an array of dimension sets (arrays of keys)", at)
	}
	sets := make([][]string, 0, len(arr))
	for i, s := range arr {
		keys, ok := s.([]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d] must be an array of dimension keys (a flat array of keys is a common mistake)", at, i)
		}
		if len(keys) > maxDimensionsPerSet {
			return nil, fmt.Errorf("%s[%d] has %d keys; at most %d are allowed", at, i, len(keys), maxDimensionsPerSet)
		}
		set := make([]string, len(keys))
		for j, k := range keys {
			ks, ok := k.(string)
			if !ok || ks == "" {
				return nil, fmt.Errorf("%s[%d][%d] must be a dimension key string", at, i, j)
			}
			set[j] = ks
		}
		sets = append(sets, set)
	}
	return sets, nil
}

// metricValues reads a metric's target member: a number or an array of up
// to 100 numbers.
func metricValues(v any, name string) ([]float64, error) {
	num := func(x any) (float64, bool) {
		n, ok := x.(json.Number)
		if !ok {
			return 0, false
		}
		f, err := n.Float64()
		return f, err == nil
	}
	switch x := v.(type) {
	case nil:
		return nil, fmt.Errorf("metric %q has no member on the root node", name)
	case []any:
		if len(x) == 0 || len(x) > maxValuesPerMetric {
			return nil, fmt.Errorf("metric %q has %d values; want 1 to %d", name, len(x), maxValuesPerMetric)
		}
		out := make([]float64, len(x))
		for i, e := range x {
			f, ok := num(e)
			if !ok {
				return nil, fmt.Errorf("metric %q value %d is %v, not a number", name, i, e)
			}
			out[i] = f
		}
		return out, nil
	}
	f, ok := num(v)
	if !ok {
		return nil, fmt.Errorf("metric %q is %v, not a number or an array of numbers", name, v)
	}
	return []float64{f}, nil
}

// setValues puts values on d: one Value, or distinct Values with Counts.
func setValues(d *types.MetricDatum, values []float64) {
	if len(values) == 1 {
		d.Value = aws.Float64(values[0])
		return
	}
	counts := map[float64]float64{}
	for _, v := range values {
		counts[v]++
	}
	distinct := make([]float64, 0, len(counts))
	for v := range counts {
		distinct = append(distinct, v)
	}
	sort.Float64s(distinct)
	for _, v := range distinct {
		d.Values = append(d.Values, v)
		d.Counts = append(d.Counts, counts[v])
	}
}
