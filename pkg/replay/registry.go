package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// ParameterStore is what the registry needs of SSM.
type ParameterStore interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
	PutParameter(ctx context.Context, in *ssm.PutParameterInput, optFns ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
}

var _ ParameterStore = (*ssm.Client)(nil)

// ErrNoRegistry is returned when the current-views parameter does not exist
// or is empty.
var ErrNoRegistry = errors.New("replay: the current-views parameter does not exist or is empty")

// ErrRegistryMoved is returned when the parameter changed while a replay ran
// (another replay swapped first): the swap is not made.
var ErrRegistryMoved = errors.New("replay: the current-views parameter changed during the replay")

// Registry is the "current views" registry: an SSM String parameter whose
// value is the views table the functions use.
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
	if errors.As(err, &nf) {
		return "", 0, fmt.Errorf("parameter %s: %w", r.name, ErrNoRegistry)
	}
	if err != nil {
		return "", 0, fmt.Errorf("replay: reading parameter %s: %w", r.name, err)
	}
	if out.Parameter == nil || aws.ToString(out.Parameter.Value) == "" {
		return "", 0, fmt.Errorf("parameter %s: %w", r.name, ErrNoRegistry)
	}
	return aws.ToString(out.Parameter.Value), out.Parameter.Version, nil
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
		return fmt.Errorf("replay: writing %s into parameter %s: %w", table, r.name, err)
	}
	return nil
}
