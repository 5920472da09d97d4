package envvar

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Kind is the kind of resource a variable names.
type Kind int

// The kinds of names, each with the form its service's API takes.
const (
	// Table is a DynamoDB table: its name (3 to 255 of [A-Za-z0-9_.-]) or
	// its ARN, both of which DynamoDB's item operations take.
	Table Kind = iota
	// Index is a DynamoDB secondary index: 3 to 255 of [A-Za-z0-9_.-].
	Index
	// Stream is a Kinesis stream's name, 1 to 128 of [A-Za-z0-9_.-]: the
	// StreamName parameter takes no ARN.
	Stream
	// Bucket is an S3 bucket's name: 3 to 63 of [a-z0-9.-], starting and
	// ending with a letter or digit.
	Bucket
	// Attribute is the name of a table's key attribute: 1 to 255
	// characters of UTF-8 (DynamoDB's KeySchemaElement.AttributeName),
	// with no space or control character at either end and no control
	// character inside, which in a variable are a slip of the editor, not
	// a key anyone named.
	Attribute
)

// tableARN is a DynamoDB table's ARN, which DynamoDB's item operations
// take in place of its name (limits.DynamoDBTableName).
var tableARN = regexp.MustCompile(`^arn:aws[A-Za-z0-9-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}$`)

var kinds = [...]struct {
	name string
	re   interface{ MatchString(string) bool }
	want string
}{
	Table: {"table", matchEither{limits.DynamoDBTableName, tableARN},
		"a DynamoDB table name (3 to 255 letters, digits, '_', '-' and '.') or table ARN"},
	Index:  {"index", regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`), "a DynamoDB index name (3 to 255 letters, digits, '_', '-' and '.')"},
	Stream: {"stream", regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`), "a Kinesis stream name (1 to 128 letters, digits, '_', '-' and '.'; its name, not its ARN)"},
	Bucket: {"bucket", regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`), "an S3 bucket name (3 to 63 lower-case letters, digits, '-' and '.'; its name, not its ARN)"},
	Attribute: {"attribute", keyAttributeName{},
		"a DynamoDB key attribute name (1 to 255 characters of UTF-8, no space at either end, no control character)"},
}

// maxKeyAttributeName is DynamoDB's limit on a key attribute's name, in
// characters.
const maxKeyAttributeName = 255

// keyAttributeName matches the names Attribute takes.
type keyAttributeName struct{}

func (keyAttributeName) MatchString(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxKeyAttributeName || strings.TrimSpace(s) != s {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

func (k Kind) String() string { return kinds[k].name }

// matchEither matches what either expression matches.
type matchEither [2]*regexp.Regexp

func (m matchEither) MatchString(s string) bool { return m[0].MatchString(s) || m[1].MatchString(s) }

// maxEcho bounds what an error repeats of a value.
const maxEcho = 128

// Name reads the variable name with lookup (os.LookupEnv) and checks it
// names a resource of kind; what says what it is for (in the error). A
// variable unset, empty or not such a name is an error naming it.
func Name(lookup func(string) (string, bool), name, what string, kind Kind) (string, error) {
	v, _ := lookup(name)
	if v == "" {
		return "", fmt.Errorf("environment variable %s is not set (%s)", name, what)
	}
	if err := Check(v, kind); err != nil {
		return "", fmt.Errorf("environment variable %s: %w (%s)", name, err, what)
	}
	return v, nil
}

// Check reports whether v is a name of kind, as its service takes it.
func Check(v string, kind Kind) error {
	k := kinds[kind]
	if !k.re.MatchString(v) {
		return fmt.Errorf("%s is not %s", strictjson.QuoteCut(v, maxEcho), k.want)
	}
	return nil
}
