package local

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/tributary-dev/tributary/emulator/template"
)

// A CloudWatch dashboard as its DashboardBody describes it (the dashboard
// body structure of the CloudWatch API reference), read from the stack's
// AWS::CloudWatch::Dashboard resources so that the dashboard is defined
// once, in the CDK app.

// board is one AWS::CloudWatch::Dashboard of the template.
type board struct {
	LogicalID string
	Name      string
	Widgets   []widget
	// Err is why the body could not be resolved or read; the page shows it.
	Err error
}

// widget is one entry of the body's widgets array.
type widget struct {
	Type                string          `json:"type"`
	X, Y, Width, Height int             `json:"-"`
	Properties          json.RawMessage `json:"properties"`
}

// UnmarshalJSON reads x, y, width and height as CloudWatch does: numbers,
// width 6 and height 6 by default.
func (w *widget) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type       string          `json:"type"`
		X          *float64        `json:"x"`
		Y          *float64        `json:"y"`
		Width      *float64        `json:"width"`
		Height     *float64        `json:"height"`
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	w.Type, w.Properties = raw.Type, raw.Properties
	w.Width, w.Height = 6, 6
	if raw.X != nil {
		w.X = int(*raw.X)
	}
	if raw.Y != nil {
		w.Y = int(*raw.Y)
	}
	if raw.Width != nil {
		w.Width = min(max(int(*raw.Width), 1), 24)
	}
	if raw.Height != nil {
		w.Height = min(max(int(*raw.Height), 1), 1000)
	}
	return nil
}

// metricProps are a metric widget's properties.
type metricProps struct {
	Metrics [][]any `json:"metrics"`
	View    string  `json:"view"` // timeSeries (default), singleValue, bar, pie, gauge, table
	Stacked bool    `json:"stacked"`
	Region  string  `json:"region"`
	Stat    string  `json:"stat"`
	Period  int     `json:"period"`
	Title   string  `json:"title"`
}

// textProps are a text widget's properties.
type textProps struct {
	Markdown string `json:"markdown"`
}

// logProps are a log (Logs Insights) widget's properties.
type logProps struct {
	Query string `json:"query"`
	Title string `json:"title"`
	View  string `json:"view"`
}

// alarmProps are an alarm or alarm status widget's properties.
type alarmProps struct {
	Alarms []string `json:"alarms"`
	Title  string   `json:"title"`
}

// maxWidgets bounds a dashboard body as CloudWatch does (500 widgets).
const maxWidgets = 500

// loadBoards reads every AWS::CloudWatch::Dashboard of d's template, its
// DashboardBody (usually an Fn::Join of strings and references) resolved
// against the local deployment. A body that cannot be resolved or read is a
// board with Err set.
func loadBoards(d *template.Deployment) []board {
	t := d.Template()
	var ids []string
	for id, r := range t.Resources {
		if r.Type == "AWS::CloudWatch::Dashboard" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var out []board
	for _, id := range ids {
		r := t.Resources[id]
		b := board{LogicalID: id, Name: id}
		if n, ok := r.Properties["DashboardName"]; ok {
			if name, err := d.Resolve(n); err == nil {
				b.Name = name
			}
		}
		body, err := d.Resolve(r.Properties["DashboardBody"])
		if err != nil {
			b.Err = fmt.Errorf("Resources.%s.Properties.DashboardBody: %w", id, err)
			out = append(out, b)
			continue
		}
		var parsed struct {
			Widgets []widget `json:"widgets"`
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		if err := dec.Decode(&parsed); err != nil {
			b.Err = fmt.Errorf("Resources.%s.Properties.DashboardBody is not a dashboard body: %w", id, err)
		} else if len(parsed.Widgets) > maxWidgets {
			b.Err = fmt.Errorf("Resources.%s.Properties.DashboardBody: %d widgets; CloudWatch allows %d", id, len(parsed.Widgets), maxWidgets)
		}
		b.Widgets = parsed.Widgets
		out = append(out, b)
	}
	return out
}

// metricRow is one entry of a metric widget's metrics array: a metric
// [Namespace, MetricName, DimName, DimValue, …, {options}] or a math
// expression [{"expression": …}].
type metricRow struct {
	ID         string
	Expression string
	Namespace  string
	Name       string
	Dims       [][2]string
	Stat       string
	Period     int
	Label      string
	Color      string
	Visible    bool
}

// dims is the row's dimensions as a map.
func (r metricRow) dims() map[string]string {
	m := make(map[string]string, len(r.Dims))
	for _, d := range r.Dims {
		m[d[0]] = d[1]
	}
	return m
}

// label is the row's label, or what CloudWatch would show for it.
func (r metricRow) label() string {
	if r.Label != "" {
		return r.Label
	}
	if r.Expression != "" {
		return r.Expression
	}
	var vals []string
	for _, d := range r.Dims {
		vals = append(vals, d[1])
	}
	if len(vals) == 0 {
		return r.Name
	}
	return r.Name + " " + strings.Join(vals, " ")
}

var percentileStat = regexp.MustCompile(`^p(\d{1,2}(\.\d+)?|100)$`)

// parseRows reads a metrics array. In a row, "." repeats the previous
// row's value at that position and "..." stands for as many of the previous
// row's values as make the row as long (["...", "other-fn"] changes the last
// value only), as in the CloudWatch console's source view. Rows
// without an id get m1, m2, … (metrics) or e1, e2, … (expressions) by
// position, as CloudWatch names them.
func parseRows(rows [][]any, defStat string, defPeriod int) ([]metricRow, error) {
	if defStat == "" {
		defStat = "Average"
	}
	var out []metricRow
	var prev []string
	for i, row := range rows {
		r := metricRow{Stat: defStat, Period: defPeriod, Visible: true}
		var opts map[string]any
		var parts []string
		for j, e := range row {
			switch v := e.(type) {
			case string:
				switch {
				case v == "...":
					// As many of the previous row's values as make this row
					// as long as that one, the values after "..." last.
					after := 0
					for _, x := range row[j+1:] {
						if _, ok := x.(string); ok {
							after++
						}
					}
					if end := len(prev) - after; end > len(parts) {
						parts = append(parts, prev[len(parts):end]...)
					}
				case v == "." && len(parts) < len(prev):
					parts = append(parts, prev[len(parts)])
				default:
					parts = append(parts, v)
				}
			case map[string]any:
				if j != len(row)-1 {
					return nil, fmt.Errorf("metrics[%d]: the options object must come last", i)
				}
				opts = v
			default:
				return nil, fmt.Errorf("metrics[%d][%d]: %v is neither a string nor an options object", i, j, e)
			}
		}
		str := func(k string) string { s, _ := opts[k].(string); return s }
		if e := str("expression"); e != "" {
			r.Expression = e
		} else {
			if len(parts) < 2 || len(parts)%2 != 0 {
				return nil, fmt.Errorf("metrics[%d]: want [Namespace, MetricName, DimensionName, DimensionValue, …], got %q", i, parts)
			}
			r.Namespace, r.Name = parts[0], parts[1]
			for k := 2; k+1 < len(parts); k += 2 {
				r.Dims = append(r.Dims, [2]string{parts[k], parts[k+1]})
			}
			prev = parts
		}
		r.ID, r.Label, r.Color = str("id"), str("label"), str("color")
		if s := str("stat"); s != "" {
			r.Stat = s
		}
		if p, ok := opts["period"].(float64); ok && p > 0 {
			r.Period = int(p)
		}
		if v, ok := opts["visible"].(bool); ok {
			r.Visible = v
		}
		if r.ID == "" {
			prefix := "m"
			if r.Expression != "" {
				prefix = "e"
			}
			r.ID = fmt.Sprintf("%s%d", prefix, i+1)
		}
		out = append(out, r)
	}
	return out, nil
}

// insightsSources reads the log groups of a Logs Insights query written as
// a dashboard log widget writes it: "SOURCE 'group' | SOURCE 'other' | …".
func insightsSources(query string) []string {
	var groups []string
	for _, m := range regexp.MustCompile(`SOURCE\s+'([^']+)'`).FindAllStringSubmatch(query, -1) {
		groups = append(groups, m[1])
	}
	return groups
}
