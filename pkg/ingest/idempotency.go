package ingest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/idempotency"
)

// Idempotency-Key, as draft-ietf-httpapi-idempotency-key-header defines it.
const (
	// HeaderIdempotencyKey names the request header. Its value is a
	// structured-field string ("8e03978e-40d5-43e8-bc93-6894a57f9324", with
	// the quotes) or, as most servers also accept, the bare token.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on an answer that is the stored
	// answer to an earlier request with the same key.
	HeaderReplayed = "Idempotency-Replayed"
	// MaxIdempotencyKeyLength bounds a key (after unquoting).
	MaxIdempotencyKeyLength = 255
	// DefaultIdempotencyExpiry is how long a key is remembered after its
	// request's last answer. Producers retry within seconds or minutes (a
	// timeout, a 429's Retry-After, a device coming back online); a day
	// covers a device offline overnight and is what Stripe keeps. After it
	// the same key is a new request. Cost: one item per keyed request,
	// under 150 KB, for a day.
	DefaultIdempotencyExpiry = 24 * time.Hour
	// defaultLock is how long a request holds its key when its context has
	// no deadline (outside Lambda, whose invoke deadline is used instead).
	defaultLock = 30 * time.Second
)

// StatusPartial marks a record whose request left events off the stream
// (its answer was 429 or 503): the same request with the same key resends
// only those.
const StatusPartial = "PARTIAL"

// Attributes of a request record besides package idempotency's (id, status,
// expiration, in_progress_expiration, data = the answer's body, validation
// = the SHA-256 of the request body).
const (
	attrStatusCode = "statusCode" // N: the answer's HTTP status
	attrHeaders    = "headers"    // M of S: the answer's headers
	attrPending    = "pending"    // S: indexes not on the stream yet, comma-separated (PARTIAL only)
	attrLock       = "lock"       // S: the token of the request that holds or last held the key
	attrReceivedAt = "receivedAt" // N: Unix nanoseconds, the receivedAt the request's events are stamped with
)

// MaxItemBytes is DynamoDB's item size limit (400 KB: attribute names and
// values, as DynamoDB counts them).
const MaxItemBytes = 400 << 10

// ErrRecordTooLarge is an answer whose record would exceed MaxItemBytes. The
// bounds on answers make it impossible; the check is the last line.
var ErrRecordTooLarge = errors.New("ingest: the idempotency record would exceed DynamoDB's 400 KB item limit")

// ErrLockLost means a request's key was taken over by another request (its
// lock expired first), so its answer was not stored.
var ErrLockLost = errors.New("ingest: the request's idempotency lock was taken over before its answer was stored")

// parseIdempotencyKey reads the header's value: an RFC 8941 sf-string
// ("...", printable ASCII, \" and \\ escapes) or a bare token of letters,
// digits and -._~+/=: (what Stripe-style clients send). More than one value
// (the header sent twice arrives joined by a comma) is refused, as are
// parameters.
func parseIdempotencyKey(v string) (string, error) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return "", errors.New("is empty; send a unique value per request, such as a UUID")
	}
	var key string
	if v[0] == '"' {
		var b strings.Builder
		i := 1
		for ; i < len(v); i++ {
			c := v[i]
			if c == '\\' {
				i++
				if i == len(v) || (v[i] != '"' && v[i] != '\\') {
					return "", errors.New(`is not a structured-field string: a backslash escapes only " and \`)
				}
				b.WriteByte(v[i])
				continue
			}
			if c == '"' {
				break
			}
			if c < 0x20 || c > 0x7e {
				return "", fmt.Errorf("is not a structured-field string: byte 0x%02x is not printable ASCII", c)
			}
			b.WriteByte(c)
		}
		if i == len(v) {
			return "", errors.New("is not a structured-field string: the closing quote is missing")
		}
		if rest := strings.TrimLeft(v[i+1:], " \t"); rest != "" {
			if rest[0] == ',' {
				return "", errors.New("holds more than one value: send the header once per request")
			}
			return "", errors.New("has text after the string (parameters are not accepted)")
		}
		key = b.String()
	} else {
		for i := 0; i < len(v); i++ {
			c := v[i]
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("-._~+/=:", c) >= 0:
			case c == ',':
				return "", errors.New("holds more than one value: send the header once per request")
			default:
				return "", fmt.Errorf(`byte %d (%s) is not allowed: send a quoted string ("...") or a token of letters, digits and -._~+/=:`, i, describeByte(c))
			}
		}
		key = v
	}
	switch {
	case key == "":
		return "", errors.New("is empty; send a unique value per request, such as a UUID")
	case len(key) > MaxIdempotencyKeyLength:
		return "", fmt.Errorf("is %d characters long; at most %d are allowed", len(key), MaxIdempotencyKeyLength)
	}
	return key, nil
}

// recordID is the record's partition key: the key scoped by who sent it and
// to which route (the draft's composite key), hashed so that its size is
// fixed and the table does not hold the keys themselves.
func recordID(caller, path, key string) string {
	sum := sha256.Sum256([]byte(caller + "\x00" + path + "\x00" + key))
	return "ingest#" + hex.EncodeToString(sum[:])
}

// fingerprint is the draft's idempotency fingerprint: the SHA-256 of the
// whole request body, as received.
func fingerprint(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// requestTable is what a RequestStore needs of DynamoDB.
type requestTable interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

var _ requestTable = (*dynamodb.Client)(nil)

// RequestStore keeps one record per idempotent request in a DynamoDB table
// with package idempotency's schema (partition key id, TTL attribute
// expiration; idempotency.CreateTable makes one). A request costs two
// writes whatever its number of events: the conditional PutItem that claims
// its key, and the UpdateItem that stores its answer. A retry of a
// completed request costs one conditional write that fails and returns the
// record (no read).
//
// Why not idempotency.Store itself: a request's answer may be partial (some
// events throttled), and its retry must then write only the rest and answer
// for the whole request; the key comes from a header, not the payload; and
// the stored answer is an HTTP response with a size bound.
type RequestStore struct {
	db    requestTable
	table string
	now   func() time.Time
	token func() string
}

// NewRequestStore returns a store over table.
func NewRequestStore(db requestTable, table string) *RequestStore {
	return &RequestStore{db: db, table: table, now: time.Now, token: randomToken}
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// claimKind is what a request may do with its key.
type claimKind int

const (
	// claimNew: the key is the request's; write every event.
	claimNew claimKind = iota
	// claimResume: an earlier request with the key and body left events
	// off the stream; write those (claim.pending) and answer for all.
	claimResume
	// claimReplay: the key's request completed; answer claim.stored.
	claimReplay
	// claimInFlight: another request holds the key (409).
	claimInFlight
	// claimMismatch: the key belongs to a request with another body (422).
	claimMismatch
)

// storedResponse is an answer as a record keeps it.
type storedResponse struct {
	Status  int
	Headers map[string]string
	Body    string
}

// claim is the outcome of claiming a key.
type claim struct {
	kind  claimKind
	id    string
	token string
	// stored is the answer to replay (claimReplay) or the previous,
	// partial answer (claimResume).
	stored storedResponse
	// pending are the indexes to write (claimResume).
	pending []int
	// lockedUntil is when the holder's lock ends (claimInFlight; zero if
	// unknown).
	lockedUntil time.Time
	// receivedAt is what the request's events are stamped with (claimNew,
	// claimResume): the time the first try of the request was received,
	// which a retry keeps, since its body (sentAt included) is that try's.
	receivedAt time.Time
}

// Claim claims record id for a request whose body has fingerprint fp,
// locking it until lockUntil; the record then lives for expires. A record
// past its expiration is a new request. A record whose holder died (its lock
// has expired) is taken over by a request with the same body: as a new
// request if the holder was its first try, which left no account of what it
// wrote; as a resume of the events still pending if the holder was itself a
// resume, so that the takeover never writes again what an earlier answer
// says is on the stream.
//
// receivedAt is when this request was received. The record keeps the
// receivedAt of the request's first try, and a resume or a takeover is
// given it back (claim.receivedAt) to stamp the events with.
func (s *RequestStore) Claim(ctx context.Context, id, fp string, receivedAt, lockUntil time.Time, expires time.Duration) (claim, error) {
	now := s.now()
	token := s.token()
	put, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			attrReceivedAt:                       num(receivedAt.UnixNano()),
			idempotency.AttrID:                   str(id),
			idempotency.AttrStatus:               str(idempotency.StatusInProgress),
			idempotency.AttrExpiration:           num(now.Add(expires).Unix()),
			idempotency.AttrInProgressExpiration: num(lockUntil.UnixMilli()),
			idempotency.AttrValidation:           str(fp),
			attrLock:                             str(token),
		},
		// New key; or a record past its expiration (TTL deletion lags by
		// up to days); or a first try that died holding the key, retried
		// with the same body. A dead resume (pending indexes) is not
		// replaced: resume takes it over below, keeping what it knows.
		ConditionExpression: aws.String("attribute_not_exists(#id) OR #exp < :now OR " +
			"(#status = :inprogress AND #ipexp < :nowms AND #val = :val AND attribute_not_exists(#pending))"),
		ExpressionAttributeNames: map[string]string{
			"#id": idempotency.AttrID, "#exp": idempotency.AttrExpiration, "#status": idempotency.AttrStatus,
			"#ipexp": idempotency.AttrInProgressExpiration, "#val": idempotency.AttrValidation,
			"#pending": attrPending,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": num(now.Unix()), ":nowms": num(now.UnixMilli()),
			":inprogress": str(idempotency.StatusInProgress), ":val": str(fp),
		},
		// A takeover learns the receivedAt of the try it takes over from.
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		c := claim{kind: claimNew, id: id, token: token, receivedAt: receivedAt}
		if old := put.Attributes; getS(old, idempotency.AttrStatus) == idempotency.StatusInProgress &&
			getS(old, idempotency.AttrValidation) == fp && !expired(old, now) {
			// A first try that died holding the key: its events, written
			// or not, were received then.
			if t, ok := receivedOf(old); ok {
				c.receivedAt = t
			}
		}
		return c, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return claim{}, fmt.Errorf("ingest: claiming idempotency record %s: %w", id, err)
	}
	old := ccf.Item
	if old == nil { // an endpoint that does not return the item
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{idempotency.AttrID: str(id)},
		})
		if err != nil {
			return claim{}, fmt.Errorf("ingest: reading idempotency record %s: %w", id, err)
		}
		if old = out.Item; old == nil { // gone in between: someone else's turn
			return claim{kind: claimInFlight, id: id}, nil
		}
	}
	if getS(old, idempotency.AttrValidation) != fp {
		return claim{kind: claimMismatch, id: id}, nil
	}
	ms, _ := strconv.ParseInt(getN(old, idempotency.AttrInProgressExpiration), 10, 64)
	_, holdsPending := old[attrPending]
	switch getS(old, idempotency.AttrStatus) {
	case idempotency.StatusCompleted:
		return claim{kind: claimReplay, id: id, stored: storedOf(old)}, nil
	case StatusPartial:
		return s.resume(ctx, id, fp, getS(old, attrLock), token, receivedAt, lockUntil, expires)
	case idempotency.StatusInProgress:
		if holdsPending && ms > 0 && ms < now.UnixMilli() { // a resume died holding the key
			return s.resume(ctx, id, fp, getS(old, attrLock), token, receivedAt, lockUntil, expires)
		}
	}
	c := claim{kind: claimInFlight, id: id}
	if ms > 0 {
		c.lockedUntil = time.UnixMilli(ms)
	}
	return c, nil
}

// resume takes the key of a record that holds pending indexes for a retry
// of its request: a PARTIAL record, or one whose resuming request died
// holding it (its lock expired). One conditional write, on the token of the
// request that last held the key, so it fails if another retry took the key
// first; the pending indexes and the previous answer are read from the item
// as that write left it, so a holder that stored its answer in between is
// never resumed from what it had before.
func (s *RequestStore) resume(ctx context.Context, id, fp, oldToken, token string, receivedAt, lockUntil time.Time, expires time.Duration) (claim, error) {
	now := s.now()
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.table),
		Key:              map[string]types.AttributeValue{idempotency.AttrID: str(id)},
		UpdateExpression: aws.String("SET #status = :inprogress, #ipexp = :lock, #lock = :token, #exp = :exp"),
		// The pending indexes stay in the item while the key is held: if
		// this request dies too, the next takeover resumes from them.
		ConditionExpression: aws.String("#lock = :old AND #val = :val AND attribute_exists(#pending) AND " +
			"(#status = :partial OR (#status = :inprogress AND #ipexp < :nowms))"),
		ExpressionAttributeNames: map[string]string{
			"#status": idempotency.AttrStatus, "#ipexp": idempotency.AttrInProgressExpiration,
			"#lock": attrLock, "#val": idempotency.AttrValidation, "#pending": attrPending,
			"#exp": idempotency.AttrExpiration,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":inprogress": str(idempotency.StatusInProgress), ":partial": str(StatusPartial),
			":lock": num(lockUntil.UnixMilli()), ":token": str(token),
			":old": str(oldToken), ":val": str(fp), ":nowms": num(now.UnixMilli()),
			":exp": num(now.Add(expires).Unix()),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return claim{kind: claimInFlight, id: id}, nil
		}
		return claim{}, fmt.Errorf("ingest: resuming idempotency record %s: %w", id, err)
	}
	pending, err := parsePending(getS(out.Attributes, attrPending))
	if err != nil {
		return claim{}, fmt.Errorf("ingest: idempotency record %s: %w", id, err)
	}
	c := claim{kind: claimResume, id: id, token: token, stored: storedOf(out.Attributes), pending: pending, receivedAt: receivedAt}
	if t, ok := receivedOf(out.Attributes); ok {
		c.receivedAt = t
	}
	return c, nil
}

// expired reports whether a record's expiration has passed at now.
func expired(item map[string]types.AttributeValue, now time.Time) bool {
	exp, err := strconv.ParseInt(getN(item, idempotency.AttrExpiration), 10, 64)
	return err != nil || exp < now.Unix()
}

// receivedOf is the receivedAt a record keeps (none in a record written
// before it did).
func receivedOf(item map[string]types.AttributeValue) (time.Time, bool) {
	ns, err := strconv.ParseInt(getN(item, attrReceivedAt), 10, 64)
	if err != nil || ns <= 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns).UTC(), true
}

// Complete stores the answer of the request holding c: COMPLETED when every
// event is accounted for, PARTIAL with the indexes still to write otherwise.
// The record then lives for expires. It fails with ErrLockLost when another
// request took the key over, and with ErrRecordTooLarge (before writing)
// when the record would not fit in an item.
func (s *RequestStore) Complete(ctx context.Context, c claim, resp storedResponse, pending []int, expires time.Duration) error {
	status := idempotency.StatusCompleted
	if len(pending) > 0 {
		status = StatusPartial
	}
	headers := make(map[string]types.AttributeValue, len(resp.Headers))
	for k, v := range resp.Headers {
		headers[k] = str(v)
	}
	values := map[string]types.AttributeValue{
		":status":     str(status),
		":code":       num(int64(resp.Status)),
		":headers":    &types.AttributeValueMemberM{Value: headers},
		":data":       str(resp.Body),
		":exp":        num(s.now().Add(expires).Unix()),
		":token":      str(c.token),
		":inprogress": str(idempotency.StatusInProgress),
		":recv":       num(c.receivedAt.UnixNano()),
	}
	// receivedAt too: a takeover's record holds its own until now.
	update := "SET #status = :status, #code = :code, #headers = :headers, #data = :data, #exp = :exp, #recv = :recv"
	names := map[string]string{
		"#recv":   attrReceivedAt,
		"#status": idempotency.AttrStatus, "#code": attrStatusCode, "#headers": attrHeaders,
		"#data": idempotency.AttrData, "#exp": idempotency.AttrExpiration,
		"#ipexp": idempotency.AttrInProgressExpiration, "#lock": attrLock, "#pending": attrPending,
	}
	if len(pending) > 0 {
		values[":pending"] = str(formatPending(pending))
		update += ", #pending = :pending REMOVE #ipexp"
	} else {
		update += " REMOVE #ipexp, #pending"
	}
	if size := recordSize(c.id, status, resp, pending); size > MaxItemBytes {
		return fmt.Errorf("%w: %d bytes", ErrRecordTooLarge, size)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrID: str(c.id)},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#lock = :token AND #status = :inprogress"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return ErrLockLost
		}
		return fmt.Errorf("ingest: storing the answer in idempotency record %s: %w", c.id, err)
	}
	return nil
}

// recordSize is the size of a completed record as DynamoDB counts it: the
// UTF-8 length of each attribute name and string, numbers at most 21 bytes,
// a map 3 bytes plus 1 per element. It errs on the large side.
func recordSize(id, status string, resp storedResponse, pending []int) int {
	const number = 21
	n := len(idempotency.AttrID) + len(id) +
		len(idempotency.AttrStatus) + len(status) +
		len(idempotency.AttrExpiration) + number +
		len(idempotency.AttrValidation) + sha256.Size*2 +
		len(attrLock) + 32 +
		len(attrReceivedAt) + number +
		len(attrStatusCode) + number +
		len(idempotency.AttrData) + len(resp.Body) +
		len(attrHeaders) + 3
	for k, v := range resp.Headers {
		n += len(k) + len(v) + 1
	}
	if len(pending) > 0 {
		n += len(attrPending) + len(formatPending(pending))
	}
	return n
}

func storedOf(item map[string]types.AttributeValue) storedResponse {
	code, _ := strconv.Atoi(getN(item, attrStatusCode))
	r := storedResponse{Status: code, Body: getS(item, idempotency.AttrData), Headers: map[string]string{}}
	if m, ok := item[attrHeaders].(*types.AttributeValueMemberM); ok {
		for _, k := range slices.Sorted(maps.Keys(m.Value)) {
			if v, ok := m.Value[k].(*types.AttributeValueMemberS); ok {
				r.Headers[k] = v.Value
			}
		}
	}
	return r
}

func formatPending(idxs []int) string {
	var b strings.Builder
	for i, x := range idxs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}

func parsePending(s string) ([]int, error) {
	if s == "" {
		return nil, errors.New("a PARTIAL record without pending indexes")
	}
	parts := strings.Split(s, ",")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n >= MaxEvents {
			return nil, fmt.Errorf("pending index %q is not an event index", p)
		}
		out[i] = n
	}
	return out, nil
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func getS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

// describeByte names a byte of a header for an error message.
func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}
