package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// ParameterStore is what the registry needs of SSM.
type ParameterStore interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
	PutParameter(ctx context.Context, in *ssm.PutParameterInput, optFns ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
	GetParameterHistory(ctx context.Context, in *ssm.GetParameterHistoryInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterHistoryOutput, error)
}

var _ ParameterStore = (*ssm.Client)(nil)

// ErrNoRegistry is returned when the current-views parameter does not exist
// or is empty.
var ErrNoRegistry = errors.New("the current-views parameter does not exist or is empty")

// ErrRegistryMoved is returned when the parameter changed while a replay ran
// (another replay swapped first): the swap is not made.
var ErrRegistryMoved = errors.New("the current-views parameter changed during the replay")

// Registry is the "current views" registry: an SSM String parameter whose
// value is the views table the functions use.
//
// Every swap is a new version of the parameter, so the parameter's own
// history (GetParameterHistory; SSM keeps its last 100 versions) records
// which table was current before which, and since when: that is where
// Previous, rollback and `replay versions` read it from.
type Registry struct {
	ssm  ParameterStore
	name string
}

// NewRegistry returns the registry kept in the SSM parameter name.
func NewRegistry(client ParameterStore, name string) *Registry {
	return &Registry{ssm: client, name: name}
}

// Name is the parameter's name.
func (r *Registry) Name() string { return r.name }

// Current returns the views table the parameter names and the parameter's
// version.
func (r *Registry) Current(ctx context.Context) (table string, version int64, err error) {
	out, err := r.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(r.name)})
	var nf *ssmtypes.ParameterNotFound
	if errors.As(err, &nf) || (err == nil && (out.Parameter == nil || aws.ToString(out.Parameter.Value) == "")) {
		return "", 0, r.missing()
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading parameter %s: %w", r.name, err)
	}
	return aws.ToString(out.Parameter.Value), out.Parameter.Version, nil
}

// Change is one value the parameter held: from At until the next Change.
type Change struct {
	Table   string
	Version int64
	At      time.Time
	By      string // the IAM identity that wrote it, when SSM says
}

// History returns the values the parameter held, oldest first.
func (r *Registry) History(ctx context.Context) ([]Change, error) {
	var out []Change
	p := ssm.NewGetParameterHistoryPaginator(r.ssm, &ssm.GetParameterHistoryInput{Name: aws.String(r.name)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		var nf *ssmtypes.ParameterNotFound
		if errors.As(err, &nf) {
			return nil, r.missing()
		}
		if err != nil {
			return nil, fmt.Errorf("reading the history of parameter %s: %w", r.name, err)
		}
		for _, h := range page.Parameters {
			out = append(out, Change{Table: aws.ToString(h.Value), Version: h.Version, At: aws.ToTime(h.LastModifiedDate), By: aws.ToString(h.LastModifiedUser)})
		}
	}
	return out, nil
}

// Previous returns the table the parameter named before its current value:
// what `replay rollback` points the readers back to. Rolling back twice
// returns to where the first rollback started (each rollback is itself a
// change of the parameter).
func (r *Registry) Previous(ctx context.Context) (Change, error) {
	h, err := r.History(ctx)
	if err != nil {
		return Change{}, err
	}
	if len(h) == 0 {
		return Change{}, r.missing()
	}
	current := h[len(h)-1].Table
	for i := len(h) - 2; i >= 0; i-- {
		if h[i].Table != current {
			return h[i], nil
		}
	}
	return Change{}, refuse("", "parameter %s has named only %s in its history: there is no previous version to roll back to", r.name, current)
}

// missing is the refusal of a parameter that does not exist or is empty.
func (r *Registry) missing() error {
	return &RefusedError{Field: "parameter", Reason: fmt.Sprintf("parameter %s does not exist or is empty (it names the current views table: the stack's ViewsParameterName output)", r.name), Err: ErrNoRegistry}
}

// Swap points the parameter at table, provided it is still at version
// (ErrRegistryMoved otherwise). SSM has no conditional put, so a swap
// racing another one within the same instant is not detected.
func (r *Registry) Swap(ctx context.Context, table string, version int64) error {
	_, v, err := r.Current(ctx)
	if err != nil {
		return err
	}
	if v != version {
		return fmt.Errorf("parameter %s is at version %d, was %d when the replay started: %w", r.name, v, version, ErrRegistryMoved)
	}
	if _, err := r.ssm.PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(r.name), Value: aws.String(table), Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true),
	}); err != nil {
		return fmt.Errorf("writing %s into parameter %s: %w", table, r.name, err)
	}
	return nil
}

// spans are the periods table was current, from the history.
func spans(h []Change, table string) []Span {
	var out []Span
	for i, c := range h {
		if c.Table != table || (i > 0 && h[i-1].Table == table) {
			continue
		}
		s := Span{From: c.At}
		for j := i + 1; j < len(h); j++ {
			if h[j].Table != table {
				s.Until = h[j].At
				break
			}
		}
		out = append(out, s)
	}
	return out
}
