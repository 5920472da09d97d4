package redrive

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestDryRunQuotesWhatDoesNotPrint: a message body and a reason are a
// producer's text; an escape sequence in either (a title change, a screen
// clear, a carriage return over the line) is shown quoted, not sent to the
// operator's terminal, and the reason is cut (at ReasonLimit, the most a
// consumer writes) as the body is.
func TestDryRunQuotesWhatDoesNotPrint(t *testing.T) {
	r := New(nil)
	var b bytes.Buffer
	body := "\x1b]0;pwned\x07\x1b[2J{\"task\":1}\rline2"
	reason := "decode: \x1b[31mfake OK\x1b[0m" + strings.Repeat("r", 5000)
	r.printMessage(&b, types.Message{MessageId: aws.String("m1"), Body: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{AttrReason: {DataType: aws.String("String"), StringValue: aws.String(reason)}}})
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("the dry run wrote control characters to the terminal: %q", out)
	}
	if !strings.Contains(out, `\x1b]0;pwned`) || !strings.Contains(out, `\x1b[31mfake OK`) {
		t.Errorf("the body or the reason is not shown quoted: %q", out)
	}
	if len(out) > r.BodyLimit+ReasonLimit+500 {
		t.Errorf("%d bytes printed: the reason was not cut at %d", len(out), ReasonLimit)
	}
	// Printable text is shown as it is.
	b.Reset()
	r.printMessage(&b, types.Message{MessageId: aws.String("m2"), Body: aws.String(`{"task":"café"}`)})
	if !strings.Contains(b.String(), `body (16 bytes): {"task":"café"}`) {
		t.Errorf("printable body changed: %q", b.String())
	}
}

// TestDryRunCutsAttributes: a producer's message attributes are cut as its
// body is, whatever their size, and a name or type with an escape sequence
// is shown quoted.
func TestDryRunCutsAttributes(t *testing.T) {
	r := New(nil)
	var b bytes.Buffer
	r.printMessage(&b, types.Message{MessageId: aws.String("m1"), Body: aws.String("{}"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"note":                   {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("A", 200_000))},
			"n\x1b[2Jame":            {DataType: aws.String("String.\x1b[31m"), StringValue: aws.String("v")},
			strings.Repeat("k", 256): {DataType: aws.String("String"), StringValue: aws.String("v")},
		}})
	out := b.String()
	if len(out) > 4*r.BodyLimit+1000 {
		t.Errorf("%d bytes printed for one message: its attributes were not cut at %d", len(out), r.BodyLimit)
	}
	if !strings.Contains(out, "more bytes)") {
		t.Errorf("the cut attribute does not say how much is not shown: %q", out)
	}
	if strings.ContainsAny(out, "\x1b") {
		t.Errorf("an attribute's name or type reached the terminal unquoted: %q", out)
	}
}
