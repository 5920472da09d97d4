package local

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A small part of CloudWatch Logs Insights, enough for a dashboard's log
// widgets to show locally what they show on AWS: the commands SOURCE,
// fields (and display), filter (conditions joined by "and": field = or !=
// a string or number, field like /regex/ or "text", ispresent(field)), stats
// (count(*), count, sum, avg, min, max, optionally "as name", "by" fields),
// sort and limit. A log event's fields are @timestamp, @message and
// @logStream, and the members of a message that is a JSON object (nested
// ones as parent.child). A query with anything else is not evaluated: the
// widget says so and shows the latest lines instead.

// insightsQuery is a parsed query.
type insightsQuery struct {
	sources []string
	fields  []string // fields or display; empty: @timestamp, @message
	filters []insightsCond
	stats   []insightsAgg
	by      []string
	sortBy  string
	desc    bool
	limit   int
}

type insightsCond struct {
	field, op string // "=", "!=", "like", "present"
	value     string
	re        *regexp.Regexp
}

type insightsAgg struct {
	fn, field, name string
}

var (
	sourceCmd = regexp.MustCompile(`^SOURCE\s+'([^']+)'$`)
	condRE    = regexp.MustCompile(`^(@?[\w.]+)\s*(=|!=)\s*(?:"([^"]*)"|'([^']*)'|(-?[0-9.]+))$`)
	likeRE    = regexp.MustCompile(`^(@?[\w.]+)\s+like\s+(?:/((?:[^/\\]|\\.)*)/|"([^"]*)")$`)
	presentRE = regexp.MustCompile(`^ispresent\(\s*(@?[\w.]+)\s*\)$`)
	aggRE     = regexp.MustCompile(`^(count|sum|avg|min|max)\(\s*(\*|@?[\w.]+)\s*\)(?:\s+as\s+(\w+))?$`)
	sortRE    = regexp.MustCompile(`^(@?[\w.]+)(?:\s+(asc|desc))?$`)
	andRE     = regexp.MustCompile(`\s+and\s+`)
)

// parseInsights parses query; an error names what is not evaluated locally.
func parseInsights(query string) (insightsQuery, error) {
	q := insightsQuery{limit: defaultLogLines}
	for _, part := range splitPipes(query) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		cmd, rest, _ := strings.Cut(part, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToLower(cmd) {
		case "source":
			m := sourceCmd.FindStringSubmatch(part)
			if m == nil {
				return q, fmt.Errorf("%q: want SOURCE 'log group'", part)
			}
			q.sources = append(q.sources, m[1])
		case "fields", "display":
			q.fields = nil
			for _, f := range strings.Split(rest, ",") {
				if f = strings.TrimSpace(f); f != "" {
					q.fields = append(q.fields, f)
				}
			}
		case "filter":
			for _, c := range andRE.Split(rest, -1) {
				c = strings.TrimSpace(c)
				switch {
				case condRE.MatchString(c):
					m := condRE.FindStringSubmatch(c)
					q.filters = append(q.filters, insightsCond{field: m[1], op: m[2], value: m[3] + m[4] + m[5]})
				case likeRE.MatchString(c):
					m := likeRE.FindStringSubmatch(c)
					expr := m[2]
					if m[3] != "" {
						expr = regexp.QuoteMeta(m[3])
					}
					re, err := regexp.Compile(expr)
					if err != nil {
						return q, fmt.Errorf("filter %q: %v", c, err)
					}
					q.filters = append(q.filters, insightsCond{field: m[1], op: "like", re: re})
				case presentRE.MatchString(c):
					q.filters = append(q.filters, insightsCond{field: presentRE.FindStringSubmatch(c)[1], op: "present"})
				default:
					return q, fmt.Errorf("filter %q is not evaluated locally", c)
				}
			}
		case "stats":
			aggs, by, _ := strings.Cut(rest, " by ")
			for _, a := range strings.Split(aggs, ",") {
				m := aggRE.FindStringSubmatch(strings.TrimSpace(a))
				if m == nil {
					return q, fmt.Errorf("stats %q is not evaluated locally", strings.TrimSpace(a))
				}
				name := m[3]
				if name == "" {
					name = m[1] + "(" + m[2] + ")"
				}
				q.stats = append(q.stats, insightsAgg{fn: m[1], field: m[2], name: name})
			}
			for _, f := range strings.Split(by, ",") {
				if f = strings.TrimSpace(f); f != "" {
					q.by = append(q.by, f)
				}
			}
		case "sort":
			m := sortRE.FindStringSubmatch(rest)
			if m == nil {
				return q, fmt.Errorf("sort %q is not evaluated locally", rest)
			}
			q.sortBy, q.desc = m[1], m[2] == "desc"
		case "limit":
			n, err := strconv.Atoi(rest)
			if err != nil || n <= 0 {
				return q, fmt.Errorf("limit %q", rest)
			}
			q.limit = min(n, maxLogLines)
		default:
			return q, fmt.Errorf("command %s is not evaluated locally", cmd)
		}
	}
	return q, nil
}

// splitPipes splits a query at the | that are outside quotes and regexes.
func splitPipes(s string) []string {
	var out []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '/':
			quote = c
		case c == '|':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// insightsRow is one event's fields.
type insightsRow map[string]any

func eventFields(e logLine) insightsRow {
	row := insightsRow{"@timestamp": e.t, "@message": e.msg, "@logStream": e.stream}
	msg := strings.TrimSpace(e.msg)
	if strings.HasPrefix(msg, "{") {
		var doc map[string]any
		if json.Unmarshal([]byte(msg), &doc) == nil {
			flatten("", doc, row)
		}
	}
	return row
}

func flatten(prefix string, doc map[string]any, row insightsRow) {
	for k, v := range doc {
		if m, ok := v.(map[string]any); ok {
			flatten(prefix+k+".", m, row)
			continue
		}
		row[prefix+k] = v
	}
}

func (c insightsCond) holds(row insightsRow) bool {
	v, ok := row[c.field]
	switch c.op {
	case "present":
		return ok
	case "like":
		return ok && c.re.MatchString(cellText(v))
	}
	eq := ok && cellText(v) == c.value
	if f, isNum := v.(float64); ok && isNum {
		if n, err := strconv.ParseFloat(c.value, 64); err == nil {
			eq = f == n
		}
	}
	if c.op == "!=" {
		return !eq
	}
	return eq
}

// run evaluates the query over events (newest first or in any order) and
// returns the result's columns and rows.
func (q insightsQuery) run(events []logLine) (columns []string, rows [][]string) {
	var matched []insightsRow
	for _, e := range events {
		row := eventFields(e)
		ok := true
		for _, c := range q.filters {
			if !c.holds(row) {
				ok = false
				break
			}
		}
		if ok {
			matched = append(matched, row)
		}
	}
	if len(q.stats) > 0 {
		columns, matched = q.aggregate(matched)
	} else {
		columns = q.fields
		if len(columns) == 0 {
			columns = []string{"@timestamp", "@message"}
		}
	}
	sortBy, desc := q.sortBy, q.desc
	if sortBy == "" && len(q.stats) == 0 {
		sortBy, desc = "@timestamp", true
	}
	if sortBy != "" {
		sort.SliceStable(matched, func(i, j int) bool {
			less := cellLess(matched[i][sortBy], matched[j][sortBy])
			if desc {
				return cellLess(matched[j][sortBy], matched[i][sortBy])
			}
			return less
		})
	}
	if len(matched) > q.limit {
		matched = matched[:q.limit]
	}
	for _, r := range matched {
		row := make([]string, len(columns))
		for i, c := range columns {
			row[i] = cellText(r[c])
		}
		rows = append(rows, row)
	}
	return columns, rows
}

// aggregate computes stats over rows, by the by fields.
func (q insightsQuery) aggregate(rows []insightsRow) ([]string, []insightsRow) {
	type group struct {
		key  insightsRow
		vals [][]float64
		n    []int
	}
	groups := map[string]*group{}
	var order []string
	for _, r := range rows {
		var parts []string
		for _, b := range q.by {
			parts = append(parts, cellText(r[b]))
		}
		k := strings.Join(parts, "\x00")
		g, ok := groups[k]
		if !ok {
			g = &group{key: insightsRow{}, vals: make([][]float64, len(q.stats)), n: make([]int, len(q.stats))}
			for _, b := range q.by {
				g.key[b] = r[b]
			}
			groups[k] = g
			order = append(order, k)
		}
		for i, a := range q.stats {
			if a.field == "*" {
				g.n[i]++
				continue
			}
			v, ok := r[a.field]
			if !ok {
				continue
			}
			g.n[i]++
			if f, ok := number(v); ok {
				g.vals[i] = append(g.vals[i], f)
			}
		}
	}
	columns := append([]string(nil), q.by...)
	for _, a := range q.stats {
		columns = append(columns, a.name)
	}
	var out []insightsRow
	for _, k := range order {
		g := groups[k]
		row := insightsRow{}
		for b, v := range g.key {
			row[b] = v
		}
		for i, a := range q.stats {
			vs := g.vals[i]
			var r float64
			switch a.fn {
			case "count":
				r = float64(g.n[i])
			case "sum", "avg":
				for _, v := range vs {
					r += v
				}
				if a.fn == "avg" && len(vs) > 0 {
					r /= float64(len(vs))
				}
			case "min", "max":
				if len(vs) == 0 {
					continue
				}
				r = vs[0]
				for _, v := range vs {
					if a.fn == "min" {
						r = math.Min(r, v)
					} else {
						r = math.Max(r, v)
					}
				}
			}
			row[a.name] = r
		}
		out = append(out, row)
	}
	return columns, out
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.000")
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func cellLess(a, b any) bool {
	if ta, ok := a.(time.Time); ok {
		tb, _ := b.(time.Time)
		return ta.Before(tb)
	}
	fa, oka := number(a)
	fb, okb := number(b)
	if oka && okb {
		return fa < fb
	}
	return cellText(a) < cellText(b)
}
