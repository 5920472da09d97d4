package enrich

import (
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func unmarshal(av ddbtypes.AttributeValue, v any) error { return attributevalue.Unmarshal(av, v) }
