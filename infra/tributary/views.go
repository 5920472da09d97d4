package tributary

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsssm"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Environment variables by which the windowed pipeline's functions find
// the current views table (package aggregate reads them).
const (
	EnvViewsParameterName = "VIEWS_PARAMETER_NAME"
	EnvViewsRefresh       = "VIEWS_REFRESH_SECONDS"
)

// ViewsRefreshSeconds is how often a warm function re-reads the parameter:
// a replay's swap reaches every reader within it, and cmd/replay's
// -handover must be at least as long.
const ViewsRefreshSeconds = 30

// ViewsRegistry is the "current views" registry: an SSM String parameter
// naming the views table the functions use, initially the stack's table;
// cmd/replay rebuilds a view into <table>-v2 (-v3, …) and writes the new
// name into it.
type ViewsRegistry struct {
	constructs.Construct
	// Parameter's value is the current views table's name.
	Parameter awsssm.StringParameter
}

// NewViewsRegistry creates the parameter under scope with views' name as
// its value, and for each reader: sets VIEWS_PARAMETER_NAME and
// VIEWS_REFRESH_SECONDS, grants ssm:GetParameter on the parameter, and
// grants on the versions (<views>-v*, and their open-windows index) the
// same DynamoDB actions the reader has on views, since a swap moves it to
// a table the stack does not create.
func NewViewsRegistry(scope constructs.Construct, id string, views awsdynamodb.ITable, readers ...*GoFunction) *ViewsRegistry {
	if views == nil {
		panic(fmt.Sprintf("ViewsRegistry %q: views is required", id))
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	r := &ViewsRegistry{Construct: c}
	r.Parameter = awsssm.NewStringParameter(c, jsii.String("CurrentViews"), &awsssm.StringParameterProps{
		Description: jsii.String("The views table the aggregate and ticker functions use; cmd/replay swaps it to a rebuilt version"),
		StringValue: views.TableName(),
		Tier:        awsssm.ParameterTier_STANDARD,
	})
	versions := awscdk.Fn_Join(jsii.String(""), &[]*string{views.TableArn(), jsii.String("-v*")})
	versionIndex := awscdk.Fn_Join(jsii.String(""), &[]*string{views.TableArn(), jsii.String("-v*/index/" + ViewsOpenIndex)})
	for _, fn := range readers {
		fn.Function.AddEnvironment(jsii.String(EnvViewsParameterName), r.Parameter.ParameterName(), nil)
		fn.Function.AddEnvironment(jsii.String(EnvViewsRefresh), jsii.String(strconv.Itoa(ViewsRefreshSeconds)), nil)
		fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("ssm:GetParameter"),
			Resources: &[]*string{r.Parameter.ParameterArn()},
		}))
		fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(viewsTableActions...),
			Resources: &[]*string{versions},
		}))
		fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(viewsIndexActions...),
			Resources: &[]*string{versionIndex},
		}))
		cdknag.NagSuppressions_AddResourceSuppressions(fn.Role, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-IAM5"),
			Reason: jsii.String("The views table's rebuilt versions (<views>-v2, -v3, ...) are created by cmd/replay after deploy, " +
				"so their names are known only by this prefix; the wildcard covers those tables and their open-windows index only."),
			AppliesTo: &[]any{cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<[A-Za-z0-9]+\.Arn>-v\*(\/index\/` + ViewsOpenIndex + `)?$/`)}},
		}}, jsii.Bool(true))
	}
	return r
}
