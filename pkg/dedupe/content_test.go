package dedupe_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/dedupe"
)

// TestContentOfReadsDataAsAValue: a producer's retry whose encoder writes
// the same data with its keys in another order, white space, or a
// character escaped (\u00fc for ü, \/ for /) is the same event — as
// es.Command.Fingerprint holds a retried command to be — so the ledger
// judges it a Duplicate, not a Conflict (set aside, counted in
// DuplicateConflicts, refused by putback). Other data is other content.
func TestContentOfReadsDataAsAValue(t *testing.T) {
	at := time.Date(2026, 11, 29, 7, 41, 7, 0, time.UTC)
	for _, tc := range []struct {
		name, a, b string
		same       bool
	}{
		{"white space", `{"path":"/pricing","ms":5}`, "{ \"path\" : \"/pricing\",\n\t\"ms\": 5 }", true},
		{"key order", `{"path":"/pricing","ms":5}`, `{"ms":5,"path":"/pricing"}`, true},
		{"key order, nested", `{"a":{"y":1,"x":[{"q":1,"p":2}]}}`, `{"a":{"x":[{"p":2,"q":1}],"y":1}}`, true},
		{"an escaped letter", `{"city":"Zürich"}`, `{"city":"Z\u00fcrich"}`, true},
		{"an escaped slash", `{"path":"/pricing"}`, `{"path":"\/pricing"}`, true},
		{"an escaped key", `{"city":"Zürich"}`, `{"\u0063ity":"Zürich"}`, true},
		{"markup escaped", `{"q":"<b>&"}`, `{"q":"\u003cb\u003e\u0026"}`, true},

		{"another value", `{"path":"/pricing","ms":5}`, `{"path":"/pricing","ms":6}`, false},
		{"a number spelt otherwise", `{"ms":5}`, `{"ms":5.0}`, false},
		{"a number as a string", `{"ms":5}`, `{"ms":"5"}`, false},
		{"a list in another order", `{"l":[1,2]}`, `{"l":[2,1]}`, false},
		{"a key in another case", `{"ms":5}`, `{"MS":5}`, false},
		{"a field more", `{"ms":5}`, `{"ms":5,"x":null}`, false},
		{"spaces inside a string", `{"page":"/a b"}`, `{"page":"/ab"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := dedupe.ContentOf("page_view", at, []byte(tc.a)), dedupe.ContentOf("page_view", at, []byte(tc.b))
			if (a == b) != tc.same {
				t.Errorf("ContentOf(%s) == ContentOf(%s): %v, want %v", tc.a, tc.b, a == b, tc.same)
			}
		})
	}
	if dedupe.ContentOf("page_view", at, []byte(`{"ms":5}`)) == dedupe.ContentOf("page_view", at.Add(time.Millisecond), []byte(`{"ms":5}`)) {
		t.Error("occurredAt is not part of the content")
	}
}

// TestAClaimMadeBeforeContentOfReadDataAsAValueStillMatches: the ledger
// stores content fingerprints, and claims made before ContentOf read data
// as a value hold the data's spelling (dedupe.SpellingOf). Within the
// horizon after the deploy, the copy of an event such a claim holds is
// still a Duplicate (Candidate.Spelling), whichever way its data is spelt
// as long as the copy is spelt as the claimed record was (as before the
// deploy: a copy spelt otherwise was a Conflict then too); an id reused
// with other content is still a Conflict, and a claim made after the
// deploy takes a copy spelt otherwise as a Duplicate.
func TestAClaimMadeBeforeContentOfReadDataAsAValueStillMatches(t *testing.T) {
	const unsorted, sorted, other = `{"path":"/pricing","ms":5}`, `{"ms":5,"path":"/pricing"}`, `{"path":"/pricing","ms":6}`
	at := time.Unix(int64(base), 0)
	candidate := func(id string, seq, arrival int, data string) dedupe.Candidate {
		content, spelling := dedupe.ContentsOf("page_view", at, []byte(data))
		return dedupe.Candidate{Key: "k", Entry: dedupe.Entry{ID: dedupe.IdentityOf("k", id), Content: content,
			Claim: dedupe.ClaimOf("shardId-000000000000", fmt.Sprint(seq)), Arrival: base + uint32(arrival)}, Spelling: spelling}
	}
	// As the version before made its claims: the spelling, no second form.
	before := func(id string, seq int, data string) dedupe.Candidate {
		c := candidate(id, seq, 0, data)
		c.Content, c.Spelling = dedupe.SpellingOf("page_view", at, []byte(data)), dedupe.Fingerprint{}
		return c
	}
	l := dedupe.NewLedger(db, newTable(t), itemKey)
	if got := judge(t, l, before("a", 1, unsorted), before("b", 2, unsorted), before("c", 3, sorted)); fmt.Sprint(got) != verdicts(dedupe.New, dedupe.New, dedupe.New) {
		t.Fatalf("claims before the deploy: %v", got)
	}
	after := dedupe.NewLedger(db, l.Table(), itemKey) // the deployed version, cold
	for _, tc := range []struct {
		name string
		c    dedupe.Candidate
		want dedupe.Verdict
	}{
		{"a copy spelt as the claimed record", candidate("a", 11, 60, unsorted), dedupe.Duplicate},
		{"a copy of canonical data", candidate("c", 12, 60, sorted), dedupe.Duplicate},
		{"an id reused with other content", candidate("b", 13, 60, other), dedupe.Conflict},
		{"a new claim", candidate("d", 14, 60, unsorted), dedupe.New},
		{"a copy of the new claim spelt otherwise", candidate("d", 15, 61, sorted), dedupe.Duplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judge(t, after, tc.c); fmt.Sprint(got) != verdicts(tc.want) {
				t.Errorf("verdict %v, want %v", got, tc.want)
			}
		})
	}
}
