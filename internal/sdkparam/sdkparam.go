package sdkparam

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// parameterGetter is what Reader needs of SSM.
type parameterGetter interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

var _ parameterGetter = (*ssm.Client)(nil)

// Reader reads parameters with the SDK's SSM client: a command run by hand
// gets the SDK's whole configuration (profiles,
// per-service endpoints), which the functions' hand-signed reader
// (aggregate.SSMParameters) leaves out to keep their binaries small.
type Reader struct{ ssm parameterGetter }

// New reads parameters with c.
func New(c parameterGetter) Reader { return Reader{ssm: c} }

var _ aggregate.ParameterReader = Reader{}

// Parameter returns the parameter's value ("" if SSM returns none).
func (p Reader) Parameter(ctx context.Context, name string) (string, error) {
	out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil {
		return "", err
	}
	if out.Parameter == nil {
		return "", nil
	}
	return aws.ToString(out.Parameter.Value), nil
}
