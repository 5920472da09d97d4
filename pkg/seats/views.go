package seats

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/projection"
)

// The views table: keys pk and sk (strings), and the index DayIndex.
//
//	pk "show#<showId>"         sk "seatmap"                     the seat map (StateView; written by each command)
//	pk "show#<showId>"         sk "availability"                free seats (FoldView; from the stream)
//	pk "customer#<customerId>" sk "<showId>#<reservationId>"    a booking (EntityView; from the stream)
//
// DayIndex (partition key day, sort key at = "<startsAt>#<showId>") lists
// the availability items of a day, across shows.
const (
	AttrPK          = "pk"
	AttrSK          = "sk"
	AttrDay         = "day"
	AttrAt          = "at"
	DayIndex        = "byDay"
	skSeatMap       = "seatmap"
	skAvailability  = "availability"
	showPrefix      = "show#"
	customerPrefix  = "customer#"
	StatusReserved  = "reserved"
	StatusCancelled = "cancelled"
)

// View names.
const (
	ViewSeatMap      = "seatmap"
	ViewAvailability = "availability"
	ViewBookings     = "bookings"
)

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: &types.AttributeValueMemberS{Value: pk}, AttrSK: &types.AttributeValueMemberS{Value: sk}}
}

// SeatMapKey is the key of a show's seat map.
func SeatMapKey(showID string) map[string]types.AttributeValue {
	return key(showPrefix+showID, skSeatMap)
}

// AvailabilityKey is the key of a show's availability.
func AvailabilityKey(showID string) map[string]types.AttributeValue {
	return key(showPrefix+showID, skAvailability)
}

// SeatMap is the seat map view of a show: its state at a version.
type SeatMap struct {
	ShowID       string                 `dynamodbav:"showId" json:"showId"`
	Version      int64                  `dynamodbav:"version" json:"version"`
	Title        string                 `dynamodbav:"title" json:"title"`
	StartsAt     string                 `dynamodbav:"startsAt" json:"startsAt"`
	Rows         int                    `dynamodbav:"rows" json:"rows"`
	SeatsPerRow  int                    `dynamodbav:"seatsPerRow" json:"seatsPerRow"`
	Capacity     int                    `dynamodbav:"capacity" json:"capacity"`
	Free         int                    `dynamodbav:"free" json:"free"`
	Seats        map[string]string      `dynamodbav:"seats" json:"seats"`
	Reservations map[string]Reservation `dynamodbav:"reservations" json:"reservations"`
}

// SeatMapItem is the seat map item of show at version.
func SeatMapItem(showID string, version int64, s Show) (map[string]types.AttributeValue, error) {
	m := SeatMap{ShowID: showID, Version: version, Title: s.Title, StartsAt: s.StartsAt, Rows: s.Rows, SeatsPerRow: s.SeatsPerRow,
		Capacity: s.Capacity(), Free: s.Free(), Seats: s.Seats, Reservations: s.Reservations}
	if m.Seats == nil {
		m.Seats = map[string]string{}
	}
	if m.Reservations == nil {
		m.Reservations = map[string]Reservation{}
	}
	item, err := attributevalue.MarshalMapWithOptions(m, func(o *attributevalue.EncoderOptions) { o.NullEmptySets = true })
	if err != nil {
		return nil, fmt.Errorf("seats: seat map of %s: %w", showID, err)
	}
	for k, v := range SeatMapKey(showID) {
		item[k] = v
	}
	return item, nil
}

// SyncView is the executor's WithSyncView: each command writes its show's
// seat map in the same transaction as its events, so the seat map is never
// behind the command's answer. It is put whole, unless the table holds it
// at the same version or newer (only a rebuild racing the command could).
func SyncView(table projection.Table) es.SyncView[Show] {
	return func(ctx context.Context, showID string, version int64, s Show) ([]types.TransactWriteItem, error) {
		item, err := SeatMapItem(showID, version, s)
		if err != nil {
			return nil, err
		}
		return []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(table.Current(ctx)), Item: item,
			ConditionExpression:       aws.String("attribute_not_exists(#v) OR #v < :v"),
			ExpressionAttributeNames:  map[string]string{"#v": projection.AttrVersion},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)}}}}}, nil
	}
}

// seatMapView is the seat map as a projection.StateView: a rebuild reads
// each show's state from the store.
type seatMapView struct {
	x interface {
		Load(ctx context.Context, aggregateID string) (Show, int64, error)
	}
}

func (seatMapView) Name() string          { return ViewSeatMap }
func (seatMapView) AggregateType() string { return AggregateType }

func (v seatMapView) Current(ctx context.Context, showID string) (map[string]types.AttributeValue, int64, error) {
	s, version, err := v.x.Load(ctx, showID)
	if err != nil {
		return nil, 0, err
	}
	if version == 0 {
		return nil, 0, nil
	}
	item, err := SeatMapItem(showID, version, s)
	return item, version, err
}

// availabilityView is free seats per show, folded from the events alone:
// the item of a show is created by ShowScheduled and moved by each
// reservation and cancellation (free − n, free + n).
type availabilityView struct{}

func (availabilityView) Name() string          { return ViewAvailability }
func (availabilityView) AggregateType() string { return AggregateType }
func (availabilityView) Key(showID string) map[string]types.AttributeValue {
	return AvailabilityKey(showID)
}

func (availabilityView) Fold(after int64, evs []es.Event) (expression.UpdateBuilder, error) {
	var upd expression.UpdateBuilder
	delta := 0
	var scheduled *ShowScheduled
	for i, e := range evs {
		fail := func(field, format string, args ...any) error {
			return &projection.ApplyError{View: ViewAvailability, Event: e.ID(), Version: e.Version, Field: field, Reason: fmt.Sprintf(format, args...)}
		}
		switch e.Type {
		case EvShowScheduled:
			if after != 0 || i != 0 {
				return upd, fail("type", "ShowScheduled at version %d, not first", e.Version)
			}
			var d ShowScheduled
			if err := json.Unmarshal(e.Data, &d); err != nil || d.Rows < 1 || d.SeatsPerRow < 1 {
				return upd, fail("data", "not a ShowScheduled: %v", err)
			}
			scheduled = &d
		case EvSeatsReserved, EvReservationCancelled:
			if after == 0 && i == 0 {
				return upd, fail("type", "%s before the show was scheduled", e.Type)
			}
			var d SeatsChanged
			if err := json.Unmarshal(e.Data, &d); err != nil || len(d.Seats) == 0 {
				return upd, fail("data.seats", "not a list of seats: %v", err)
			}
			if e.Type == EvSeatsReserved {
				delta -= len(d.Seats)
			} else {
				delta += len(d.Seats)
			}
		default:
			return upd, fail("type", "%q is not an event of a show", e.Type)
		}
	}
	if scheduled != nil {
		showID := evs[0].AggregateID
		capacity := scheduled.Rows * scheduled.SeatsPerRow
		day, _, _ := strings.Cut(scheduled.StartsAt, "T")
		return expression.Set(expression.Name("showId"), expression.Value(showID)).
			Set(expression.Name("title"), expression.Value(scheduled.Title)).
			Set(expression.Name("startsAt"), expression.Value(scheduled.StartsAt)).
			Set(expression.Name(AttrDay), expression.Value(day)).
			Set(expression.Name(AttrAt), expression.Value(scheduled.StartsAt+"#"+showID)).
			Set(expression.Name("capacity"), expression.Value(capacity)).
			Set(expression.Name("free"), expression.Value(capacity+delta)), nil
	}
	return expression.Set(expression.Name("free"), expression.Name("free").Plus(expression.Value(delta))), nil
}

// bookingsView is each customer's bookings across shows: one item per
// reservation, set whole by its last event (reserved, then cancelled).
type bookingsView struct{}

func (bookingsView) Name() string          { return ViewBookings }
func (bookingsView) AggregateType() string { return AggregateType }

func (bookingsView) Entities(e es.Event) ([]map[string]types.AttributeValue, error) {
	status := StatusReserved
	switch e.Type {
	case EvShowScheduled:
		return nil, nil
	case EvSeatsReserved:
	case EvReservationCancelled:
		status = StatusCancelled
	default:
		return nil, &projection.ApplyError{View: ViewBookings, Event: e.ID(), Version: e.Version, Field: "type", Reason: fmt.Sprintf("%q is not an event of a show", e.Type)}
	}
	var d SeatsChanged
	if err := json.Unmarshal(e.Data, &d); err != nil || d.CustomerID == "" || d.ReservationID == "" {
		return nil, &projection.ApplyError{View: ViewBookings, Event: e.ID(), Version: e.Version, Field: "data", Reason: fmt.Sprintf("not a reservation's event: %v", err)}
	}
	item := BookingKey(d.CustomerID, e.AggregateID, d.ReservationID)
	item["showId"] = &types.AttributeValueMemberS{Value: e.AggregateID}
	item["reservationId"] = &types.AttributeValueMemberS{Value: d.ReservationID}
	item["customerId"] = &types.AttributeValueMemberS{Value: d.CustomerID}
	item["status"] = &types.AttributeValueMemberS{Value: status}
	seats := make([]types.AttributeValue, len(d.Seats))
	for i, s := range d.Seats {
		seats[i] = &types.AttributeValueMemberS{Value: s}
	}
	item["seats"] = &types.AttributeValueMemberL{Value: seats}
	return []map[string]types.AttributeValue{item}, nil
}

// BookingKey is the key of a booking.
func BookingKey(customerID, showID, reservationID string) map[string]types.AttributeValue {
	return key(customerPrefix+customerID, showID+"#"+reservationID)
}

// Views are the domain's views for a projector; the seat map reads the
// shows' state through x (es.Executor.Load) when a rebuild writes it.
func Views(x interface {
	Load(ctx context.Context, aggregateID string) (Show, int64, error)
}) projection.Views {
	return projection.Views{
		Folds:    []projection.FoldView{availabilityView{}},
		Entities: []projection.EntityView{bookingsView{}},
		States:   []projection.StateView{seatMapView{x: x}},
	}
}

// CreateViewsTable creates a views table with the schema the CDK stack
// declares: for tests and tools.
func CreateViewsTable(ctx context.Context, db interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}, name string) error {
	s := types.ScalarAttributeTypeS
	k := func(n string, t types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: aws.String(n), KeyType: t}
	}
	a := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: s}
	}
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{k(AttrPK, types.KeyTypeHash), k(AttrSK, types.KeyTypeRange)},
		AttributeDefinitions: []types.AttributeDefinition{a(AttrPK), a(AttrSK), a(AttrDay), a(AttrAt)},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String(DayIndex),
			KeySchema:  []types.KeySchemaElement{k(AttrDay, types.KeyTypeHash), k(AttrAt, types.KeyTypeRange)},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
	})
	if err != nil {
		return fmt.Errorf("seats: creating views table %s: %w", name, err)
	}
	return nil
}
