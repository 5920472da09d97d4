package setaside

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Rule is what the field at fault must hold for the function that set the
// record aside to read it: the rule the field broke, as that function
// knows it. Its item keeps it (attribute rule), so that a record put back
// corrected is held to it (package putback) rather than accepted and set
// aside again for a new mistake in the same field. It is a kind and a
// bound, never free text, so it stays small: bound drops one whose bound
// DynamoDB could not store, and an item without one (written before it
// was kept, or by a function that keeps none) is judged as before.
type Rule struct {
	// Holds is what the field must be: RuleNumber. A kind this version
	// does not know checks nothing.
	Holds string `dynamodbav:"holds" json:"holds"`
	// Within bounds a number's magnitude (RuleNumber): at most Within
	// either side of 0; 0 for no bound beyond a float64's.
	Within float64 `dynamodbav:"within,omitempty" json:"within,omitempty"`
}

// RuleNumber is a field that must be a JSON number a float64 holds (not
// ±Inf: 1e400 is refused) within ±Within, as a pipeline's value must be
// (pipeline.MaxValue, the range a window aggregates without overflow).
const RuleNumber = "number"

// NumberRule is the rule of a field that must be a finite number within
// ±within.
func NumberRule(within float64) *Rule { return &Rule{Holds: RuleNumber, Within: within} }

// maxRuleBound bounds a Rule's Within: DynamoDB's numbers reach 1e125 and
// no smaller than 1e-130, so a bound outside what it stores (or NaN, or
// negative) is dropped with its rule by bound, not written and refused on
// every retry.
const (
	maxRuleBound = 1e120
	minRuleBound = 1e-120
)

// storable reports whether DynamoDB stores r's bound.
func (r *Rule) storable() bool {
	w := r.Within
	return w == 0 || (w >= minRuleBound && w <= maxRuleBound)
}

// String says what the field must hold, as a refusal repeats it.
func (r *Rule) String() string {
	switch r.Holds {
	case RuleNumber:
		if r.Within == 0 {
			return "a JSON number a 64-bit float holds (1e400 is not one)"
		}
		return "a JSON number within ±" + strconv.FormatFloat(r.Within, 'f', -1, 64)
	}
	return strictjson.QuoteCut(r.Holds, 64)
}

// maxValueShown bounds what a refusal repeats of the value it refuses.
const maxValueShown = 40

// Check says why v, the JSON text of the field (nil when the record has
// no such field), is not what r holds; nil when it is, or when r is of a
// kind this version does not know. A number is read as strconv.ParseFloat
// reads it, as a pipeline reads its value: 1e-400 is 0 and holds, 1e400
// does not, and -9007199254740993 is -2^53 and holds within ±2^53.
func (r *Rule) Check(v []byte) error {
	if r.Holds != RuleNumber {
		return nil
	}
	if len(v) == 0 {
		return fmt.Errorf("is missing")
	}
	switch v[0] {
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
	default:
		return fmt.Errorf("is %s, not a number", strictjson.TypeOf(v))
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsInf(f, 0) {
		return fmt.Errorf("%s is not a finite 64-bit number", strictjson.Cut(string(v), maxValueShown))
	}
	if r.Within > 0 && math.Abs(f) > r.Within {
		return fmt.Errorf("%s is outside ±%s", strictjson.Cut(string(v), maxValueShown), strconv.FormatFloat(r.Within, 'f', -1, 64))
	}
	return nil
}
