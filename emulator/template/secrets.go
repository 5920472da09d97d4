package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// secretsAPI is what Provision needs of Secrets Manager.
type secretsAPI interface {
	DescribeSecret(ctx context.Context, in *secretsmanager.DescribeSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error)
	CreateSecret(ctx context.Context, in *secretsmanager.CreateSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.CreateSecretOutput, error)
	GetRandomPassword(ctx context.Context, in *secretsmanager.GetRandomPasswordInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetRandomPasswordOutput, error)
}

var _ secretsAPI = (*secretsmanager.Client)(nil)

// secret creates an AWS::SecretsManager::Secret with the template's Name (or
// a generated one) and either its SecretString or a value generated as
// GenerateSecretString says (by the endpoint's GetRandomPassword, with the
// template's length and character rules; with SecretStringTemplate and
// GenerateStringKey the value is that JSON object with the password under
// the key). Ref and Fn::GetAtt Id are the secret's ARN, as the endpoint
// made it (Secrets Manager adds a random suffix, so it is known only after
// Provision). A secret that already exists keeps its value, as a stack
// update does: a second Provision must not change a secret producers hold.
func (p *provisioner) secret(ctx context.Context, id string, ph *physicalResource) error {
	pr, err := p.d.resolvedProps(id)
	if err != nil {
		return err
	}
	if pr.has("SecretString") && pr.has("GenerateSecretString") {
		return fmt.Errorf("%s: a secret has SecretString or GenerateSecretString, not both", pr.path)
	}
	if pr.has("KmsKeyId") || pr.has("ReplicaRegions") {
		p.d.note(fmt.Sprintf("%s: KmsKeyId and ReplicaRegions of secret %s are not applied locally", id, ph.name))
	}
	desc, err := p.secrets.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(ph.name)})
	var nf *smtypes.ResourceNotFoundException
	var arn string
	switch {
	case err == nil:
		ph.reused = true
		arn = aws.ToString(desc.ARN)
		p.d.report(fmt.Sprintf("reused secret %s (its value kept)", ph.name))
	case errors.As(err, &nf):
		value, how, err := p.secretValue(ctx, pr)
		if err != nil {
			return err
		}
		in := &secretsmanager.CreateSecretInput{Name: aws.String(ph.name), SecretString: aws.String(value)}
		if d, _ := pr.str("Description"); d != "" {
			in.Description = aws.String(d)
		}
		out, err := p.secrets.CreateSecret(ctx, in)
		if err != nil {
			return fmt.Errorf("create secret: %w", err)
		}
		arn = aws.ToString(out.ARN)
		p.d.report(fmt.Sprintf("created secret %s (%s)", ph.name, how))
	default:
		return fmt.Errorf("describe secret: %w", err)
	}
	p.d.mu.Lock()
	ph.ref = arn
	ph.attrs["Id"] = arn
	p.d.mu.Unlock()
	return nil
}

// secretValue is the value a new secret gets and how it was made (for the
// progress line; the value itself is never printed).
func (p *provisioner) secretValue(ctx context.Context, pr props) (string, string, error) {
	if pr.has("SecretString") {
		v, err := pr.str("SecretString")
		return v, "value from the template", err
	}
	g, err := pr.obj("GenerateSecretString")
	if err != nil {
		return "", "", err
	}
	in := &secretsmanager.GetRandomPasswordInput{}
	length, err := g.integer("PasswordLength", 32) // CloudFormation's default
	if err != nil {
		return "", "", err
	}
	if length < 1 || length > 4096 {
		return "", "", fmt.Errorf("template: %s: %d is not a length from 1 to 4096", g.at("PasswordLength"), length)
	}
	in.PasswordLength = aws.Int64(int64(length))
	if in.ExcludeCharacters, err = optStr(g, "ExcludeCharacters"); err != nil {
		return "", "", err
	}
	for key, dst := range map[string]**bool{
		"ExcludeLowercase": &in.ExcludeLowercase, "ExcludeUppercase": &in.ExcludeUppercase,
		"ExcludeNumbers": &in.ExcludeNumbers, "ExcludePunctuation": &in.ExcludePunctuation,
		"IncludeSpace": &in.IncludeSpace, "RequireEachIncludedType": &in.RequireEachIncludedType,
	} {
		if !g.has(key) {
			continue
		}
		b, err := g.boolean(key, false)
		if err != nil {
			return "", "", err
		}
		*dst = aws.Bool(b)
	}
	out, err := p.secrets.GetRandomPassword(ctx, in)
	if err != nil {
		return "", "", fmt.Errorf("generate the secret's value: %w", err)
	}
	password := aws.ToString(out.RandomPassword)
	how := fmt.Sprintf("value of %d generated characters", length)
	tmpl, _ := g.str("SecretStringTemplate")
	key, _ := g.str("GenerateStringKey")
	switch {
	case tmpl == "" && key == "":
		return password, how, nil
	case tmpl == "" || key == "":
		return "", "", fmt.Errorf("template: %s: SecretStringTemplate and GenerateStringKey go together", g.path)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(tmpl), &obj); err != nil || obj == nil {
		return "", "", fmt.Errorf("template: %s: not a JSON object", g.at("SecretStringTemplate"))
	}
	obj[key] = password
	b, err := json.Marshal(obj)
	if err != nil {
		return "", "", err
	}
	return string(b), how + " under " + key, nil
}

func optStr(p props, key string) (*string, error) {
	if !p.has(key) {
		return nil, nil
	}
	v, err := p.str(key)
	if err != nil {
		return nil, err
	}
	return aws.String(v), nil
}
