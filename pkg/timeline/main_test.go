package timeline

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// sharedDB is the stand-in every test of the package shares (each names
// its tables after itself): one moto for the package, not one a test.
var sharedDB *dynamodb.Client

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) { sharedDB = dynamodb.NewFromConfig(cfg) }))
}

var tableSeq atomic.Int64

// uniqueName is name made unique among the tables of the shared stand-in.
func uniqueName(name string) string { return fmt.Sprintf("%s-%d", name, tableSeq.Add(1)) }
