// Command rules manages the CEP rules behind an IAM-authenticated function
// URL: list, add, disable, enable and delete the rules in the DynamoDB
// table RULES_TABLE_NAME while detect runs, and test rules offline against
// events (see cep.Admin for the routes). cmd/rules does the same from a
// terminal.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func main() {
	m := lambdamain.Main{Function: "rules"}
	table := m.RequireTable("RULES_TABLE_NAME", "the DynamoDB table (key id) holding the rules")
	timing, err := cep.TimingFromEnv(os.LookupEnv)
	if err != nil {
		m.Fail("%v", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	store := cep.NewStore(dynamodb.NewFromConfig(m.AWSConfig()), table, nil).WithLogger(log).WithTiming(timing)
	lambda.Start(lambdamain.Typed(stream.EventFunctionURL, cep.NewAdmin(store, nil, log).Handle))
}
