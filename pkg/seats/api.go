package seats

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Headers of the API's answers.
const (
	// HeaderReplayed is "true" on the first answer to a command sent again.
	HeaderReplayed = "Idempotency-Replayed"
	// HeaderWaited is how long a read with minVersion waited for its view
	// (milliseconds).
	HeaderWaited = "X-Tributary-Waited-Ms"
)

// Bounds of a read's wait for its view to reach minVersion.
const (
	DefaultWait  = 2 * time.Second
	MaxWait      = 5 * time.Second
	pollFirst    = 20 * time.Millisecond
	pollMax      = 200 * time.Millisecond
	maxBookings  = 200 // a customer's bookings listed in one answer
	maxDayShows  = 200 // shows listed for a day
	answerMargin = 500 * time.Millisecond
)

// viewsReader is what the API reads of the views table.
type viewsReader interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ viewsReader = (*dynamodb.Client)(nil)

// API is the commands function: its function URL takes commands and serves
// the views.
//
//	POST /commands                                 a command (see package es): 200 accepted, 422 refused, 409 conflict, 400 invalid
//	GET  /shows/{showId}[?minVersion=N&wait=2s]    the seat map (written with each command: never behind its answer)
//	GET  /shows/{showId}/availability[?minVersion] free seats (from the stream: waits up to wait for minVersion)
//	GET  /days/{yyyy-mm-dd}/availability[?after=A] free seats of every show that day (eventually consistent)
//	GET  /customers/{customerId}/bookings[?show=S&minVersion=N&after=A]  the customer's bookings (from the stream)
//
// A query parameter a read does not take (minversion for minVersion) is a
// 400 naming it, not ignored.
//
// A listing answers at most 200 items and "more"; when there are more,
// "next" is what after takes to list the ones after them.
//
// A read with minVersion answers once its view holds that version of the
// show (or a later one), waiting up to wait (default 2 s, at most 5 s); a
// view still behind then is a 503 naming the version it holds. A bookings
// read waits for the customer's last event of the show up to minVersion
// (read from the log, at most maxLookback versions back; further is a 400
// naming minVersion): a customer's bookings carry only their own versions.
type API struct {
	x       *es.Executor[Show]
	db      viewsReader
	table   projection.Table
	metrics *metrics.Logger
	log     *slog.Logger
}

// APIOption configures an API.
type APIOption func(*API)

// APIWithMetrics flushes the executor's metrics (give it the same logger)
// after each request, with ViewReads, ViewWaits and EventLogDamaged.
func APIWithMetrics(m *metrics.Logger) APIOption { return func(a *API) { a.metrics = m } }

// APIWithLogger sets the logger (default: discard).
func APIWithLogger(l *slog.Logger) APIOption { return func(a *API) { a.log = l } }

// NewAPI returns the API running commands with x and reading views from
// table.
func NewAPI(x *es.Executor[Show], db viewsReader, table projection.Table, opts ...APIOption) *API {
	a := &API{x: x, db: db, table: table, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(a)
	}
	return a
}

const routes = "POST /commands, GET /shows/{showId}, GET /shows/{showId}/availability, GET /days/{yyyy-mm-dd}/availability, GET /customers/{customerId}/bookings"

// Handle serves one function URL request.
func (a *API) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	resp := a.route(ctx, req)
	if a.metrics != nil {
		if err := a.metrics.Flush(); err != nil {
			a.log.WarnContext(ctx, "flushing metrics", "error", err)
		}
	}
	return resp, nil
}

func (a *API) route(ctx context.Context, req events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	method := req.RequestContext.HTTP.Method
	parts := strings.Split(strings.Trim(req.RawPath, "/"), "/")
	get := func() bool { return method == http.MethodGet }
	read := func(known []string, serve func() events.LambdaFunctionURLResponse) events.LambdaFunctionURLResponse {
		if !get() {
			return notAllowed(http.MethodGet)
		}
		if bad := unknownParameter(req.QueryStringParameters, known); bad != nil {
			return *bad
		}
		// A function URL joins a repeated parameter's values with commas:
		// ?minVersion=2&minVersion=2 read as "2,2", "not a version".
		if name, msg := strictjson.RepeatedParameter(req.RawQueryString); name != "" {
			return errorAnswer(http.StatusBadRequest, name, msg)
		}
		return serve()
	}
	switch {
	case len(parts) == 1 && parts[0] == "commands":
		if method != http.MethodPost {
			return notAllowed(http.MethodPost)
		}
		if name, msg := strictjson.UnknownParameter(req.QueryStringParameters, "POST /commands"); name != "" {
			return errorAnswer(http.StatusBadRequest, name, msg)
		}
		return a.command(ctx, req)
	case len(parts) == 2 && parts[0] == "shows":
		return read(freshnessParameters, func() events.LambdaFunctionURLResponse { return a.seatMap(ctx, req, parts[1]) })
	case len(parts) == 3 && parts[0] == "shows" && parts[2] == "availability":
		return read(freshnessParameters, func() events.LambdaFunctionURLResponse { return a.availability(ctx, req, parts[1]) })
	case len(parts) == 3 && parts[0] == "days" && parts[2] == "availability":
		return read(dayParameters, func() events.LambdaFunctionURLResponse { return a.day(ctx, req, parts[1]) })
	case len(parts) == 3 && parts[0] == "customers" && parts[2] == "bookings":
		return read(bookingsParameters, func() events.LambdaFunctionURLResponse { return a.bookings(ctx, req, parts[1]) })
	}
	// The path is echoed cut: an answer is bounded whatever was asked.
	return errorAnswer(http.StatusNotFound, "", fmt.Sprintf("%q is not a route (%s)", strictjson.Cut(req.RawPath, maxEchoBytes), routes))
}

func (a *API) command(ctx context.Context, req events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	if msg, compressed := strictjson.CompressedBody(req.Headers); compressed {
		r := errorAnswer(http.StatusUnsupportedMediaType, "Content-Encoding", msg)
		r.Headers["Accept-Encoding"] = "identity"
		return r
	}
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return errorAnswer(http.StatusBadRequest, "", "the body is not valid base64")
		}
		body = b
	}
	if len(body) > es.MaxCommandBytes {
		return errorAnswer(http.StatusRequestEntityTooLarge, "", fmt.Sprintf("the command is %d bytes, more than %d", len(body), es.MaxCommandBytes))
	}
	ctx, cancel := reserve(ctx)
	defer cancel()
	res, err := a.x.Execute(ctx, body)
	if errors.Is(err, es.ErrAheadOfLog) {
		// Permanent: a 503 would have the sender retry for ever.
		a.log.ErrorContext(ctx, "command failed: the show's views are ahead of its log", "error", err)
		return errorAnswer(http.StatusInternalServerError, "", strictjson.Cut(err.Error(), 600))
	}
	if r, ok := a.damaged(ctx, err); ok {
		return r
	}
	if err != nil {
		a.log.ErrorContext(ctx, "command failed; the sender may retry it with the same id", "error", err)
		r := errorAnswer(http.StatusServiceUnavailable, "", "the command could not be completed now (retry it with the same id: it runs at most once): "+strictjson.Cut(err.Error(), 300))
		r.Headers["Retry-After"] = "1"
		return r
	}
	r := events.LambdaFunctionURLResponse{StatusCode: res.HTTPStatus, Body: string(res.Body),
		Headers: map[string]string{"Content-Type": "application/json"}}
	if res.Replayed {
		r.Headers[HeaderReplayed] = "true"
	}
	return r
}

// reserve ends ctx a moment before the invoke deadline, to answer.
func reserve(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, d.Add(-answerMargin))
	}
	return context.WithCancel(ctx)
}

// The query parameters each read takes.
var (
	freshnessParameters = []string{"minVersion", "wait"}
	dayParameters       = []string{"after"}
	bookingsParameters  = []string{"show", "minVersion", "wait", "after"}
)

// unknownParameter is the 400 of a query parameter a read does not take,
// naming it and the one it is nearest: ignored, a misspelt minVersion would
// answer at whatever version the view holds, as if it were fresh enough.
func unknownParameter(query map[string]string, known []string) *events.LambdaFunctionURLResponse {
	name, msg := strictjson.UnknownParameter(query, "this read", known...)
	if name == "" {
		return nil
	}
	r := errorAnswer(http.StatusBadRequest, name, msg)
	return &r
}

// freshness is a read's minVersion and wait.
type freshness struct {
	min  int64
	wait time.Duration
}

func readFreshness(req events.LambdaFunctionURLRequest) (freshness, *events.LambdaFunctionURLResponse) {
	q := req.QueryStringParameters
	f := freshness{wait: DefaultWait}
	if v, ok := q["minVersion"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if errors.Is(err, strconv.ErrRange) && n > 0 {
			// A whole number all the same: past what a version (an
			// int64) can reach, so no command ever made it.
			r := errorAnswer(http.StatusBadRequest, "minVersion", fmt.Sprintf("minVersion: %s is larger than any version can be (at most %d)", strictjson.Cut(v, maxEchoBytes), int64(math.MaxInt64)))
			return f, &r
		}
		// Digits only, as a command's expectedVersion: ParseInt also takes
		// a sign, "-0" and "+4".
		if err != nil || n < 0 || v[0] == '-' || v[0] == '+' {
			r := errorAnswer(http.StatusBadRequest, "minVersion", fmt.Sprintf("minVersion: %q is not a version (a whole number from 0)", strictjson.Cut(v, maxEchoBytes)))
			return f, &r
		}
		f.min = n
	}
	if v, ok := q["wait"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxWait {
			r := errorAnswer(http.StatusBadRequest, "wait", fmt.Sprintf("wait: %q must be a duration from 0s to %s", strictjson.Cut(v, maxEchoBytes), MaxWait))
			return f, &r
		}
		f.wait = d
	}
	return f, nil
}

// waitFor reads the item at key (consistently) until its version is at
// least f.min or f.wait has passed. When the first read finds the view
// behind and there is time to wait, it reads the show's log once: a
// minVersion no command made is refused at once (notMade), where waiting
// could never bring it.
func (a *API) waitFor(ctx context.Context, key map[string]types.AttributeValue, showID string, f freshness) (map[string]types.AttributeValue, int64, time.Duration, *events.LambdaFunctionURLResponse, error) {
	start := time.Now()
	poll := pollFirst
	for {
		// waited is how long before this read began: 0 when the first
		// read answers.
		waited := time.Since(start)
		out, err := a.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.table.Current(ctx)), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, 0, waited, nil, err
		}
		a.metrics.Add("ViewReads", metrics.Count, 1)
		v := itemVersion(out.Item)
		if v >= f.min || time.Since(start)+poll > f.wait {
			return out.Item, v, waited, nil, nil
		}
		if poll == pollFirst {
			if r := a.notMade(ctx, showID, f.min); r != nil {
				return nil, v, waited, r, nil
			}
		}
		a.metrics.Add("ViewWaits", metrics.Count, 1)
		select {
		case <-ctx.Done():
			return out.Item, v, time.Since(start), nil, nil
		case <-time.After(poll):
		}
		poll = min(2*poll, pollMax)
	}
}

func itemVersion(item map[string]types.AttributeValue) int64 {
	if n, ok := item[projection.AttrVersion].(*types.AttributeValueMemberN); ok {
		v, _ := strconv.ParseInt(n.Value, 10, 64)
		return v
	}
	return 0
}

func (a *API) seatMap(ctx context.Context, req events.LambdaFunctionURLRequest, showID string) events.LambdaFunctionURLResponse {
	return a.perShow(ctx, req, showID, ViewSeatMap, SeatMapKey(showID), func(item map[string]types.AttributeValue) (any, error) {
		var m SeatMap
		err := attributevalue.UnmarshalMap(item, &m)
		return m, err
	})
}

// Availability is a show's availability as the API answers it.
type Availability struct {
	ShowID   string `dynamodbav:"showId" json:"showId"`
	Version  int64  `dynamodbav:"version" json:"version"`
	Title    string `dynamodbav:"title" json:"title"`
	StartsAt string `dynamodbav:"startsAt" json:"startsAt"`
	Day      string `dynamodbav:"day" json:"day"`
	Capacity int    `dynamodbav:"capacity" json:"capacity"`
	Free     int    `dynamodbav:"free" json:"free"`
}

func (a *API) availability(ctx context.Context, req events.LambdaFunctionURLRequest, showID string) events.LambdaFunctionURLResponse {
	return a.perShow(ctx, req, showID, ViewAvailability, AvailabilityKey(showID), func(item map[string]types.AttributeValue) (any, error) {
		var av Availability
		err := attributevalue.UnmarshalMap(item, &av)
		return av, err
	})
}

// perShow answers a read of one show's item of a view.
func (a *API) perShow(ctx context.Context, req events.LambdaFunctionURLRequest, showID, view string, key map[string]types.AttributeValue,
	decode func(map[string]types.AttributeValue) (any, error)) events.LambdaFunctionURLResponse {
	if err := es.CheckAggregateID(showID); err != nil {
		return errorAnswer(http.StatusBadRequest, "showId", "showId: "+err.Error())
	}
	f, bad := readFreshness(req)
	if bad != nil {
		return *bad
	}
	ctx, cancel := reserve(ctx)
	defer cancel()
	start := time.Now()
	item, version, waited, refused, err := a.waitFor(ctx, key, showID, f)
	if err != nil {
		return a.unavailable(ctx, err)
	}
	if refused != nil {
		return *refused
	}
	if version < f.min {
		return a.behind(ctx, view, showID, version, f, time.Since(start))
	}
	if len(item) == 0 {
		return errorAnswer(http.StatusNotFound, "showId", fmt.Sprintf("the %s view has no show %s (not scheduled, or not yet projected: read with minVersion)", view, showID))
	}
	v, err := decode(item)
	if err != nil {
		return a.unavailable(ctx, err)
	}
	r := jsonAnswer(http.StatusOK, v)
	r.Headers[HeaderWaited] = strconv.FormatInt(waited.Milliseconds(), 10)
	return r
}

// behind answers a read whose view did not reach minVersion in time: a
// 503 to read again, unless the show's log has not reached minVersion
// either (notMade).
func (a *API) behind(ctx context.Context, view, showID string, version int64, f freshness, waited time.Duration) events.LambdaFunctionURLResponse {
	if r := a.notMade(ctx, showID, f.min); r != nil {
		return *r
	}
	return behindAnswer(view, showID, version, f, waited)
}

// notMade is the answer to a read whose minVersion the show's log (one
// consistent read) has not reached: no command made that version, so no
// read ever would see it — a 400 naming minVersion and the log's version.
// It is nil when the log holds that version, or cannot be read (logged:
// the read is then answered as behind).
func (a *API) notMade(ctx context.Context, showID string, minVersion int64) *events.LambdaFunctionURLResponse {
	latest, err := a.x.Store().Version(ctx, showID)
	if err != nil {
		a.log.WarnContext(ctx, "reading the show's version for a read behind minVersion", "show", showID, "error", err.Error())
		return nil
	}
	if latest >= minVersion {
		return nil
	}
	r := errorAnswer(http.StatusBadRequest, "minVersion", fmt.Sprintf(
		"minVersion: show %s is at version %d in its log; no command has made version %d (pass the version a command's answer named)", showID, latest, minVersion))
	return &r
}

// behindAnswer is the 503 of a view that did not reach minVersion in time.
func behindAnswer(view, showID string, version int64, f freshness, waited time.Duration) events.LambdaFunctionURLResponse {
	r := jsonAnswer(http.StatusServiceUnavailable, map[string]any{
		"error": fmt.Sprintf("the %s view of show %s is at version %d, behind the %d asked for (minVersion), after waiting %s; read again",
			view, showID, version, f.min, waited.Round(time.Millisecond)),
		"view": view, "showId": showID, "version": version, "minVersion": f.min})
	r.Headers["Retry-After"] = "1"
	r.Headers[HeaderWaited] = strconv.FormatInt(waited.Milliseconds(), 10)
	return r
}

func (a *API) day(ctx context.Context, req events.LambdaFunctionURLRequest, day string) events.LambdaFunctionURLResponse {
	if _, err := time.Parse("2006-01-02", day); err != nil {
		return errorAnswer(http.StatusBadRequest, "day", fmt.Sprintf("day: %q is not a date (yyyy-mm-dd)", strictjson.Cut(day, maxEchoBytes)))
	}
	var start map[string]types.AttributeValue
	if after, ok := req.QueryStringParameters["after"]; ok {
		// The "next" of the answer before: "<startsAt>#<showId>", the
		// index's sort key of the last show it listed.
		at, show, found := strings.Cut(after, "#")
		if _, err := time.Parse(time.RFC3339, at); err != nil || !found || es.CheckAggregateID(show) != nil || len(show) > maxIDLength {
			return errorAnswer(http.StatusBadRequest, "after", fmt.Sprintf("after: %q is not the \"next\" of a day's answer (<startsAt>#<showId>)", strictjson.Cut(after, maxEchoBytes)))
		}
		start = AvailabilityKey(show)
		start[AttrDay] = &types.AttributeValueMemberS{Value: day}
		start[AttrAt] = &types.AttributeValueMemberS{Value: after}
	}
	e, err := expression.NewBuilder().WithKeyCondition(expression.Key(AttrDay).Equal(expression.Value(day))).Build()
	if err != nil {
		return a.unavailable(ctx, err)
	}
	out, err := a.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(a.table.Current(ctx)), IndexName: aws.String(DayIndex),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ExclusiveStartKey: start, Limit: aws.Int32(maxDayShows)})
	if err != nil {
		return a.unavailable(ctx, err)
	}
	list := []Availability{}
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &list); err != nil {
		return a.unavailable(ctx, err)
	}
	return jsonAnswer(http.StatusOK, withNext(map[string]any{"day": day, "shows": list}, out.LastEvaluatedKey, AttrAt))
}

// withNext adds to a listing's answer "more" and, when there is more,
// "next": the sort key (attr) of the last item listed, which the next
// read passes as after to list the items after it.
func withNext(answer map[string]any, last map[string]types.AttributeValue, attr string) map[string]any {
	answer["more"] = last != nil
	if s, ok := last[attr].(*types.AttributeValueMemberS); ok {
		answer["next"] = s.Value
	}
	return answer
}

// Booking is a booking as the API answers it.
type Booking struct {
	ShowID        string   `dynamodbav:"showId" json:"showId"`
	ReservationID string   `dynamodbav:"reservationId" json:"reservationId"`
	Seats         []string `dynamodbav:"seats" json:"seats"`
	Status        string   `dynamodbav:"status" json:"status"`
	Version       int64    `dynamodbav:"version" json:"version"`
}

func (a *API) bookings(ctx context.Context, req events.LambdaFunctionURLRequest, customerID string) events.LambdaFunctionURLResponse {
	if err := es.CheckAggregateID(customerID); err != nil || len(customerID) > maxIDLength {
		return errorAnswer(http.StatusBadRequest, "customerId", fmt.Sprintf("customerId: %q: 1 to %d letters, digits, - _ . :", strictjson.Cut(customerID, maxEchoBytes), maxIDLength))
	}
	f, bad := readFreshness(req)
	if bad != nil {
		return *bad
	}
	show := req.QueryStringParameters["show"]
	if show != "" && (es.CheckAggregateID(show) != nil || len(show) > maxIDLength) {
		return errorAnswer(http.StatusBadRequest, "show", fmt.Sprintf("show: %q: 1 to %d letters, digits, - _ . :", strictjson.Cut(show, maxEchoBytes), maxIDLength))
	}
	if f.min > 0 && show == "" {
		return errorAnswer(http.StatusBadRequest, "show", "show: minVersion is a version of one show: name it (show=<showId>)")
	}
	var from map[string]types.AttributeValue
	after, paged := req.QueryStringParameters["after"]
	if paged {
		// The "next" of the answer before: "<showId>#<reservationId>",
		// the sort key of the last booking it listed.
		s, r, found := strings.Cut(after, "#")
		if !found || es.CheckAggregateID(s) != nil || len(s) > maxIDLength || es.CheckAggregateID(r) != nil || len(r) > maxIDLength {
			return errorAnswer(http.StatusBadRequest, "after", fmt.Sprintf("after: %q is not the \"next\" of a bookings answer (<showId>#<reservationId>)", strictjson.Cut(after, maxEchoBytes)))
		}
		from = BookingKey(customerID, s, r)
	}
	ctx, cancel := reserve(ctx)
	defer cancel()
	e, err := expression.NewBuilder().WithKeyCondition(expression.Key(AttrPK).Equal(expression.Value(customerPrefix + customerID))).Build()
	if err != nil {
		return a.unavailable(ctx, err)
	}
	start, poll := time.Now(), pollFirst
	// target is the version of the show the customer's bookings of it
	// must reach: minVersion until the log says otherwise (known).
	target, known := f.min, false
	for {
		waited := time.Since(start)
		out, err := a.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(a.table.Current(ctx)), KeyConditionExpression: e.KeyCondition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true),
			ExclusiveStartKey: from, Limit: aws.Int32(maxBookings)})
		if err != nil {
			return a.unavailable(ctx, err)
		}
		a.metrics.Add("ViewReads", metrics.Count, 1)
		list := []Booking{}
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &list); err != nil {
			return a.unavailable(ctx, err)
		}
		version := int64(0)
		for _, b := range list {
			if b.ShowID == show {
				version = max(version, b.Version)
			}
		}
		if version < target && (out.LastEvaluatedKey != nil || paged) {
			// The answer lists maxBookings across shows; the show's may
			// come before or after them.
			if version, err = a.showBookingsVersion(ctx, customerID, show); err != nil {
				return a.unavailable(ctx, err)
			}
		}
		if version < target && !known {
			// The versions of the show after the customer's bookings
			// may all be other customers' commands: the read waits for
			// the customer's last event up to minVersion, not for
			// minVersion itself, which no booking of theirs may carry.
			var refused *events.LambdaFunctionURLResponse
			if target, refused, err = a.customerNeeds(ctx, customerID, show, version, f.min); err != nil {
				return a.unavailable(ctx, err)
			}
			if refused != nil {
				return *refused
			}
			known = true
		}
		if version >= target {
			r := jsonAnswer(http.StatusOK, withNext(map[string]any{"customerId": customerID, "bookings": list}, out.LastEvaluatedKey, AttrSK))
			r.Headers[HeaderWaited] = strconv.FormatInt(waited.Milliseconds(), 10)
			return r
		}
		if time.Since(start)+poll > f.wait || ctx.Err() != nil {
			if target < f.min {
				return bookingsBehind(customerID, show, version, target, f, time.Since(start))
			}
			return a.behind(ctx, ViewBookings, show, version, f, time.Since(start))
		}
		a.metrics.Add("ViewWaits", metrics.Count, 1)
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
		poll = min(2*poll, pollMax)
	}
}

// maxLookback bounds the versions of a show a bookings read reads back
// from minVersion to find the customer's last event of the show.
const maxLookback = 1000

// customerNeeds is the version of show that customerID's bookings of it
// must hold for a read with minVersion upTo, given that they hold version
// held: the customer's last event of the show up to upTo (held when the
// events after held are all other customers'). It reads the log back from
// upTo, consistently, at most maxLookback versions; further back than that
// is a 400 naming minVersion, since no read could ever tell, and so is an
// upTo the log has not reached (notMade).
func (a *API) customerNeeds(ctx context.Context, customerID, show string, held, upTo int64) (int64, *events.LambdaFunctionURLResponse, error) {
	from := max(held, upTo-maxLookback)
	evs, err := a.x.Store().Events(ctx, show, from, upTo)
	if err != nil {
		return 0, nil, err
	}
	a.metrics.Add("ViewReads", metrics.Count, 1)
	if len(evs) == 0 || evs[len(evs)-1].Version < upTo {
		// No command has made upTo: refused at once, not after the wait.
		// (nil: the log holds it now, or could not be read: behind.)
		return upTo, a.notMade(ctx, show, upTo), nil
	}
	pk := customerPrefix + customerID
	for i := len(evs) - 1; i >= 0; i-- {
		items, err := bookingsView{}.Entities(evs[i])
		if err != nil {
			continue // set aside by the projector: no booking waits for it
		}
		for _, it := range items {
			if s, ok := it[AttrPK].(*types.AttributeValueMemberS); ok && s.Value == pk {
				return evs[i].Version, nil, nil
			}
		}
	}
	if from > held {
		r := errorAnswer(http.StatusBadRequest, "minVersion", fmt.Sprintf(
			"minVersion: %s's bookings of show %s are at version %d, and versions %d to %d of the show are none of %s's: a read looks back at most %d versions; pass the version %s's own command answered",
			customerID, show, held, from+1, upTo, customerID, maxLookback, customerID))
		return 0, &r, nil
	}
	return held, nil, nil
}

// bookingsBehind is the 503 of a customer's bookings that did not reach
// their last event of the show up to minVersion in time.
func bookingsBehind(customerID, show string, version, need int64, f freshness, waited time.Duration) events.LambdaFunctionURLResponse {
	r := jsonAnswer(http.StatusServiceUnavailable, map[string]any{
		"error": fmt.Sprintf("the bookings view of show %s holds %s's bookings at version %d, behind version %d, %s's last event of the show up to the %d asked for (minVersion), after waiting %s; read again",
			show, customerID, version, need, customerID, f.min, waited.Round(time.Millisecond)),
		"view": ViewBookings, "showId": show, "version": version, "minVersion": f.min, "customerVersion": need})
	r.Headers["Retry-After"] = "1"
	r.Headers[HeaderWaited] = strconv.FormatInt(waited.Milliseconds(), 10)
	return r
}

// showBookingsVersion is the latest version of show among customerID's
// bookings of it: a consistent read of those bookings' versions alone.
func (a *API) showBookingsVersion(ctx context.Context, customerID, show string) (int64, error) {
	e, err := expression.NewBuilder().
		WithKeyCondition(expression.Key(AttrPK).Equal(expression.Value(customerPrefix + customerID)).And(expression.Key(AttrSK).BeginsWith(show + "#"))).
		WithProjection(expression.NamesList(expression.Name(projection.AttrVersion))).Build()
	if err != nil {
		return 0, err
	}
	in := &dynamodb.QueryInput{TableName: aws.String(a.table.Current(ctx)), KeyConditionExpression: e.KeyCondition(), ProjectionExpression: e.Projection(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true)}
	version := int64(0)
	for {
		out, err := a.db.Query(ctx, in)
		if err != nil {
			return 0, err
		}
		a.metrics.Add("ViewReads", metrics.Count, 1)
		for _, item := range out.Items {
			version = max(version, itemVersion(item))
		}
		if out.LastEvaluatedKey == nil {
			return version, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func (a *API) unavailable(ctx context.Context, err error) events.LambdaFunctionURLResponse {
	if r, ok := a.damaged(ctx, err); ok {
		return r
	}
	a.log.ErrorContext(ctx, "reading a view failed", "error", err)
	r := errorAnswer(http.StatusServiceUnavailable, "", "the view could not be read now: "+strictjson.Cut(err.Error(), 300))
	r.Headers["Retry-After"] = "1"
	return r
}

// damaged is the 500 of err when it is a show's damaged event log
// (*es.DamagedLogError): permanent, so not a 503 that would have the
// sender retry for ever. It is logged and counted (EventLogDamaged) for
// an alarm: only an operator can repair the log.
func (a *API) damaged(ctx context.Context, err error) (events.LambdaFunctionURLResponse, bool) {
	var d *es.DamagedLogError
	if !errors.As(err, &d) {
		return events.LambdaFunctionURLResponse{}, false
	}
	a.metrics.Add("EventLogDamaged", metrics.Count, 1)
	a.log.ErrorContext(ctx, "the show's event log is damaged; no retry succeeds until an operator repairs it", "show", d.AggregateID,
		"version", d.Version, "attribute", d.Field, "error", err)
	return errorAnswer(http.StatusInternalServerError, "", strictjson.Cut(err.Error(), 1000)), true
}

func notAllowed(allow string) events.LambdaFunctionURLResponse {
	r := errorAnswer(http.StatusMethodNotAllowed, "", "use "+allow)
	r.Headers["Allow"] = allow
	return r
}

func errorAnswer(status int, field, msg string) events.LambdaFunctionURLResponse {
	body := map[string]any{"error": msg}
	if field != "" {
		body["field"] = field
	}
	return jsonAnswer(status, body)
}

func jsonAnswer(status int, v any) events.LambdaFunctionURLResponse {
	b, err := strictjson.Marshal(v) // an error text's <showId> reads as written
	if err != nil {
		b = []byte(`{"error":"encoding the answer failed"}`)
		status = http.StatusInternalServerError
	}
	return events.LambdaFunctionURLResponse{StatusCode: status, Body: string(b), Headers: map[string]string{"Content-Type": "application/json"}}
}

// maxEchoBytes bounds what an answer repeats of a request's path or
// parameters.
const maxEchoBytes = 200
