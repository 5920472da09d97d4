package ingest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// Signed requests: the option for producers without AWS credentials (a
// device, a webhook). The function URL's auth type is then NONE and the
// handler itself checks every request's HMAC-SHA256 signature, made with a
// secret shared with the producer and kept in AWS Secrets Manager.
//
// The string to sign is five parts joined by "\n" (a line feed, byte 0x0a):
//
//	v1
//	<timestamp: the X-Tributary-Timestamp header, Unix seconds>
//	<path: the URL path, "/" for the root>
//	<the Idempotency-Key header exactly as sent, or nothing>
//	<the body's bytes exactly as sent>
//
// and the X-Tributary-Signature header is "v1=" followed by the lowercase
// hex HMAC-SHA256 of it under the secret (the secret string's UTF-8 bytes
// are the key). A request whose timestamp is more than MaxClockSkew from
// the server's clock is refused, so a captured request cannot be replayed
// later; within that window a replay gets the first answer back and writes
// nothing, because a signed request without an Idempotency-Key is made
// idempotent by its signature (and the key, when sent, is signed).
const (
	HeaderTimestamp  = "X-Tributary-Timestamp"
	HeaderSignature  = "X-Tributary-Signature"
	SignatureVersion = "v1"
	// MaxClockSkew is how far a request's timestamp may be from the
	// server's clock, either way: enough for a device clock kept by NTP and
	// a slow network, short enough that a captured request is soon useless.
	MaxClockSkew = 5 * time.Minute
)

// StringToSign is what a signature covers (see the package's signed-request
// description).
func StringToSign(timestamp, path, idempotencyKey string, body []byte) []byte {
	b := make([]byte, 0, len(SignatureVersion)+len(timestamp)+len(path)+len(idempotencyKey)+len(body)+4)
	b = append(b, SignatureVersion...)
	b = append(b, '\n')
	b = append(b, timestamp...)
	b = append(b, '\n')
	b = append(b, path...)
	b = append(b, '\n')
	b = append(b, idempotencyKey...)
	b = append(b, '\n')
	return append(b, body...)
}

// Sign returns the X-Tributary-Timestamp and X-Tributary-Signature header
// values for a request sent at t: what a Go producer calls before posting.
func Sign(secret []byte, t time.Time, path, idempotencyKey string, body []byte) (timestamp, signature string) {
	timestamp = strconv.FormatInt(t.Unix(), 10)
	return timestamp, SignatureVersion + "=" + hex.EncodeToString(mac(secret, StringToSign(timestamp, path, idempotencyKey, body)))
}

func mac(secret, msg []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return m.Sum(nil)
}

// signatureCheck verifies signed requests.
type signatureCheck struct {
	secrets SecretSource
	now     func() time.Time
}

// authError is a refused signature: the header at fault and why.
type authError struct {
	header, reason string
}

func (e *authError) Error() string { return e.header + ": " + e.reason }

// verify checks a request's timestamp and signature and returns the
// signature (its hex digest) for use as an implicit idempotency key.
func (c *signatureCheck) verify(ctx context.Context, headers map[string]string, path, idemKey string, body []byte) (string, error) {
	ts, ok := header(headers, HeaderTimestamp)
	if !ok {
		return "", &authError{HeaderTimestamp, "is missing; a signed request carries the Unix time in seconds it was signed at"}
	}
	ts = strings.TrimSpace(ts)
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err == nil && len(ts) >= 13 && ts[0] != '+' && ts[0] != '-' {
		return "", &authError{HeaderTimestamp, fmt.Sprintf("%q looks like milliseconds; send the Unix time in whole seconds", cutText(ts, 32))}
	}
	if err != nil || secs < 0 || ts[0] == '+' {
		return "", &authError{HeaderTimestamp, fmt.Sprintf("%q is not a Unix time in whole seconds", cutText(ts, 32))}
	}
	if skew := c.now().Sub(time.Unix(secs, 0)); skew > MaxClockSkew || skew < -MaxClockSkew {
		return "", &authError{HeaderTimestamp, fmt.Sprintf("%d is %s from the server's clock; requests are accepted within %s of it (sign just before sending, with a clock kept by NTP)",
			secs, skew.Abs().Round(time.Second), MaxClockSkew)}
	}
	sig, ok := header(headers, HeaderSignature)
	if !ok {
		return "", &authError{HeaderSignature, "is missing; send v1=<hex HMAC-SHA256 of the string to sign> (see docs/events.md, signed requests)"}
	}
	sig = strings.TrimSpace(sig)
	digest, ok := strings.CutPrefix(sig, SignatureVersion+"=")
	got, err := hex.DecodeString(digest)
	if !ok || err != nil || len(got) != sha256.Size {
		return "", &authError{HeaderSignature, fmt.Sprintf("%q is not v1= and 64 hex digits", cutText(sig, 80))}
	}
	msg := StringToSign(ts, path, idemKey, body)
	secrets, err := c.secrets.Secrets(ctx)
	if err != nil {
		return "", err
	}
	if matches(secrets, msg, got) {
		return hex.EncodeToString(got), nil
	}
	// The secret may have been rotated since it was read.
	if secrets, refreshed, err := c.secrets.Refresh(ctx); err != nil {
		return "", err
	} else if refreshed && matches(secrets, msg, got) {
		return hex.EncodeToString(got), nil
	}
	return "", &authError{HeaderSignature, "does not match the request: sign v1, the timestamp, the path, the Idempotency-Key and the body, joined by line feeds, with the current secret"}
}

func matches(secrets [][]byte, msg, got []byte) bool {
	for _, s := range secrets {
		if hmac.Equal(mac(s, msg), got) {
			return true
		}
	}
	return false
}

// header finds a header by name, whatever its case (Function URLs send
// lowercase names; tests and other front ends may not).
func header(headers map[string]string, name string) (string, bool) {
	if v, ok := headers[strings.ToLower(name)]; ok {
		return v, true
	}
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// secretReader is what SecretsManagerSecret needs of Secrets Manager.
type secretReader interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var (
	_ secretReader = (*secretsmanager.Client)(nil)
	_ SecretSource = (*SecretsManagerSecret)(nil)
)

// Secret cache timing.
const (
	// SecretCacheTTL is how long a read secret is used before it is read
	// again.
	SecretCacheTTL = 5 * time.Minute
	// secretMinRefresh bounds how often a signature that matches no known
	// secret makes the function re-read it (after a rotation), so that
	// forged requests cannot turn into a flood of Secrets Manager calls.
	secretMinRefresh = 30 * time.Second
)

// SecretsManagerSecret is the signing secret kept in Secrets Manager: its
// AWSCURRENT version and, while a rotation is under way, its AWSPREVIOUS
// one, so that producers still signing with the old secret keep working
// until they have the new one. It is read at init (Load) and again every
// SecretCacheTTL, or sooner when a signature matches neither.
type SecretsManagerSecret struct {
	client secretReader
	id     string
	now    func() time.Time

	mu      sync.Mutex
	secrets [][]byte
	read    time.Time // last successful read
	tried   time.Time // last read, successful or not
}

// NewSecretsManagerSecret returns the secret whose ARN or name is id.
func NewSecretsManagerSecret(client secretReader, id string) *SecretsManagerSecret {
	return &SecretsManagerSecret{client: client, id: id, now: time.Now}
}

// Load reads the secret; main calls it at init so that a missing secret or
// permission fails the function's start, naming the secret.
func (s *SecretsManagerSecret) Load(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load(ctx)
}

func (s *SecretsManagerSecret) load(ctx context.Context) error {
	s.tried = s.now()
	cur, err := s.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.id)})
	if err != nil {
		return fmt.Errorf("ingest: reading the signing secret %s: %w", s.id, err)
	}
	v := aws.ToString(cur.SecretString)
	if v == "" {
		return fmt.Errorf("ingest: the signing secret %s has no string value", s.id)
	}
	secrets := [][]byte{[]byte(v)}
	prev, err := s.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.id), VersionStage: aws.String("AWSPREVIOUS")})
	var nf *smtypes.ResourceNotFoundException
	switch {
	case err == nil && aws.ToString(prev.SecretString) != "" && aws.ToString(prev.SecretString) != v:
		secrets = append(secrets, []byte(aws.ToString(prev.SecretString)))
	case err != nil && !errors.As(err, &nf):
		return fmt.Errorf("ingest: reading the previous version of the signing secret %s: %w", s.id, err)
	}
	s.secrets, s.read = secrets, s.tried
	return nil
}

// Secrets returns the current secret (and the previous one), reading them
// again when the copy is older than SecretCacheTTL. If that read fails the
// copy is kept (and the read tried again 30 seconds later): a Secrets
// Manager outage does not stop ingest.
func (s *SecretsManagerSecret) Secrets(ctx context.Context) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.secrets == nil || (now.Sub(s.read) >= SecretCacheTTL && now.Sub(s.tried) >= secretMinRefresh) {
		if err := s.load(ctx); err != nil && s.secrets == nil {
			return nil, err
		}
	}
	return s.secrets, nil
}

// Refresh re-reads the secret unless it was read (or tried) less than 30
// seconds ago.
func (s *SecretsManagerSecret) Refresh(ctx context.Context) ([][]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.secrets != nil && s.now().Sub(s.tried) < secretMinRefresh {
		return s.secrets, false, nil
	}
	if err := s.load(ctx); err != nil {
		if s.secrets != nil {
			return s.secrets, false, nil
		}
		return nil, false, err
	}
	return s.secrets, true, nil
}
