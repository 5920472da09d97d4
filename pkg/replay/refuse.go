package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/state"
)

// ErrRefused is what every refusal wraps: the operation checked what it
// would change and changed nothing.
var ErrRefused = errors.New("refused")

// RefusedError is a refusal. Field names the input that was refused, as the
// command's flag is spelled without its dash ("from", "table", "to-table",
// "allow-empty"), so a command can print "-from …".
type RefusedError struct {
	Field  string
	Reason string
	// Err, when set, is the domain error behind the refusal (ErrNoRegistry).
	Err error
}

// Unwrap returns Err.
func (e *RefusedError) Unwrap() error { return e.Err }

func (e *RefusedError) Error() string {
	if e.Field == "" {
		return "refused: " + e.Reason
	}
	return "refused -" + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func refuse(field, format string, args ...any) error {
	return &RefusedError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ErrNoTable is returned when a table the command names does not exist.
var ErrNoTable = errors.New("table does not exist")

// describeTable is DescribeTable with a missing table turned into ErrNoTable.
func describeTable(ctx context.Context, db TableAdmin, table string) (*types.TableDescription, error) {
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("%s: %w", table, ErrNoTable)
	}
	if err != nil {
		return nil, fmt.Errorf("describing table %s: %w", table, err)
	}
	return d.Table, nil
}

// itemScanner is the DynamoDB call that looks into a table's items.
type itemScanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ itemScanner = (*dynamodb.Client)(nil)

// hasItems reports whether table holds at least one item (one Scan of one
// item, consistent).
func hasItems(ctx context.Context, db itemScanner, table string) (bool, error) {
	in := &dynamodb.ScanInput{TableName: aws.String(table), Limit: aws.Int32(1), ConsistentRead: aws.Bool(true)}
	for {
		out, err := db.Scan(ctx, in)
		if err != nil {
			return false, fmt.Errorf("reading an item of %s: %w", table, err)
		}
		for _, it := range out.Items {
			if !state.IsHandoverItem(it) { // a replay's bookkeeping, not a result
				return true, nil
			}
		}
		if out.LastEvaluatedKey == nil {
			return false, nil
		}
		// A page can be empty with more to read (filtered or deleted items).
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
