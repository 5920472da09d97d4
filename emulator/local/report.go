package local

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/emulator/template"
)

// deployReport gathers what Provision reports, to print a few lines instead
// of one per resource: counts by kind, and each note about a local
// difference once, with the resources it applies to ("StreamEncryption
// ignored locally" once, not once per stream).
type deployReport struct {
	tpl *template.Template

	mu    sync.Mutex          // add is called from the provisioning goroutines at once
	notes map[string][]string // note text → logical ids
	order []string
}

func newDeployReport(tpl *template.Template) *deployReport {
	return &deployReport{tpl: tpl, notes: map[string][]string{}}
}

// notePrefix matches "<LogicalID>: <note>".
var notePrefix = regexp.MustCompile(`^([A-Za-z0-9]+): (.+)$`)

func (r *deployReport) add(msg string) {
	m := notePrefix.FindStringSubmatch(msg)
	if m == nil {
		return // "created …", "reused …": counted from the deployment
	}
	if _, ok := r.tpl.Resources[m[1]]; !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.notes[m[2]]; !seen {
		r.order = append(r.order, m[2])
	}
	r.notes[m[2]] = append(r.notes[m[2]], m[1])
}

func (r *deployReport) print(w io.Writer, d *template.Deployment, took time.Duration) {
	var parts []string
	count := func(n, reused int, one, many string) {
		if n == 0 {
			return
		}
		name := many
		if n == 1 {
			name = one
		}
		p := fmt.Sprintf("%d %s", n, name)
		if reused > 0 {
			p += fmt.Sprintf(" (%d already there)", reused)
		}
		parts = append(parts, p)
	}
	reusedOf := func(flags []bool) int {
		n := 0
		for _, f := range flags {
			if f {
				n++
			}
		}
		return n
	}
	var fs []bool
	for _, x := range d.Streams() {
		fs = append(fs, x.Reused)
	}
	count(len(fs), reusedOf(fs), "Kinesis stream", "Kinesis streams")
	fs = nil
	for _, x := range d.Tables() {
		fs = append(fs, x.Reused)
	}
	count(len(fs), reusedOf(fs), "DynamoDB table", "DynamoDB tables")
	fs = nil
	for _, x := range d.Queues() {
		fs = append(fs, x.Reused)
	}
	count(len(fs), reusedOf(fs), "SQS queue", "SQS queues")
	byType := map[string]int{}
	for _, res := range r.tpl.Resources {
		byType[res.Type]++
	}
	count(byType["AWS::SSM::Parameter"], 0, "SSM parameter", "SSM parameters")
	count(byType["AWS::Kinesis::StreamConsumer"], 0, "stream consumer", "stream consumers")
	fmt.Fprintf(w, "  %s in %s\n", strings.Join(parts, ", "), took.Round(100*time.Millisecond))
	for _, note := range r.order {
		ids := r.notes[note]
		names := make([]string, len(ids))
		seen := map[string]int{}
		for i, id := range ids {
			names[i] = friendlyName(r.tpl, id)
			seen[names[i]]++
		}
		for i, id := range ids {
			if seen[names[i]] > 1 {
				names[i] = id // constructs of one id in several places: say which
			}
		}
		sort.Strings(names)
		fmt.Fprintf(w, "  not as on AWS: %s — %s\n", note, strings.Join(names, ", "))
	}
}

// friendlyName is a resource's construct id (Events, Profiles), or its
// logical id when its CDK path does not say.
func friendlyName(t *template.Template, logicalID string) string {
	if c := constructID(t, logicalID); c != "" {
		return c
	}
	return logicalID
}

// constructID is the id of the construct that made resource logicalID: the
// last part of its aws:cdk:path other than "Resource" ("Tributary/
// ProfilesCDC/Profiles/Resource" → "Profiles"), or "".
func constructID(t *template.Template, logicalID string) string {
	path, _ := t.Resources[logicalID].Metadata["aws:cdk:path"].(string)
	parts := strings.Split(path, "/")
	for i := len(parts) - 1; i >= 1; i-- { // parts[0] is the stack
		if parts[i] != "Resource" && parts[i] != "Default" {
			return parts[i]
		}
	}
	return ""
}

// sourceNames labels event sources by the name of the stream, table or
// queue (not an ARN's tail).
type sourceNames struct {
	byARN map[string]string
}

func sourceLabels(d *template.Deployment) sourceNames {
	n := sourceNames{byARN: map[string]string{}}
	for _, s := range d.Streams() {
		n.byARN[s.ARN] = "stream " + s.Name
	}
	for _, t := range d.Tables() {
		if t.StreamARN != "" {
			n.byARN[t.StreamARN] = "table " + t.Name + " (its stream)"
		}
	}
	for _, q := range d.Queues() {
		n.byARN[q.ARN] = "queue " + q.Name
	}
	return n
}

// of labels m's source: "stream <name>" (with "via EFO consumer <name>"),
// "table <name> (its stream)" or "queue <name>"; an ARN from outside the
// template is shown whole.
func (n sourceNames) of(m template.MappingSpec) string {
	label, ok := n.byARN[m.SourceARN]
	if !ok {
		label = m.SourceARN
	}
	if m.ConsumerARN != "" {
		consumer := m.ConsumerARN
		if i := strings.LastIndex(consumer, "/consumer/"); i >= 0 {
			consumer = consumer[i+len("/consumer/"):]
			if j := strings.IndexByte(consumer, ':'); j >= 0 {
				consumer = consumer[:j]
			}
		}
		label += " via EFO consumer " + consumer
	}
	return label
}
