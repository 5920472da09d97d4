package template

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// ssmAPI is what Provision needs of SSM Parameter Store.
type ssmAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
	PutParameter(ctx context.Context, in *ssm.PutParameterInput, opts ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
}

var _ ssmAPI = (*ssm.Client)(nil)

// parameter creates an AWS::SSM::Parameter (String or StringList) with the
// template's Name (or a generated one), Value and Type; Ref is its name,
// Fn::GetAtt Type and Value its type and value. A parameter that already
// exists keeps its value, as a CloudFormation update that does not change
// the template's Value leaves it: a value written since (a replay's swap of
// the current views table) must survive a second Provision. That value is
// what Value resolves to, and a note says it differs from the template.
func (p *provisioner) parameter(ctx context.Context, id string, ph *physicalResource) error {
	pr, err := p.d.resolvedProps(id)
	if err != nil {
		return err
	}
	typ, err := pr.str("Type")
	if err != nil {
		return err
	}
	value, err := pr.str("Value")
	if err != nil {
		return err
	}
	switch {
	case typ != "String" && typ != "StringList":
		return fmt.Errorf("%s: %q: CloudFormation creates String or StringList parameters", pr.at("Type"), typ)
	case value == "":
		return fmt.Errorf("%s: a parameter needs a non-empty value", pr.at("Value"))
	}
	if tier, _ := pr.str("Tier"); (tier != "" && tier != "Standard") || pr.has("Policies") || pr.has("AllowedPattern") {
		p.d.note(fmt.Sprintf("%s: Tier, Policies and AllowedPattern of parameter %s are not applied locally", id, ph.name))
	}
	out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(ph.name)})
	var nf *ssmtypes.ParameterNotFound
	switch {
	case errors.As(err, &nf):
		in := &ssm.PutParameterInput{Name: aws.String(ph.name), Value: aws.String(value), Type: ssmtypes.ParameterType(typ)}
		if desc, _ := pr.str("Description"); desc != "" {
			in.Description = aws.String(desc)
		}
		if _, err := p.ssm.PutParameter(ctx, in); err != nil {
			return fmt.Errorf("put parameter: %w", err)
		}
		p.d.report(fmt.Sprintf("created SSM parameter %s = %s", ph.name, value))
	case err != nil:
		return fmt.Errorf("get parameter: %w", err)
	default:
		ph.reused = true
		if cur := aws.ToString(out.Parameter.Value); cur != value {
			p.d.note(fmt.Sprintf("%s: SSM parameter %s kept its value %s (the template says %s): changed since it was created, as by a replay's swap", id, ph.name, cur, value))
			value = cur
		}
		p.d.report(fmt.Sprintf("reused SSM parameter %s = %s", ph.name, value))
	}
	p.d.mu.Lock()
	ph.attrs["Type"], ph.attrs["Value"] = typ, value
	p.d.mu.Unlock()
	return nil
}
