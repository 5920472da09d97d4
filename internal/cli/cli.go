package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"

	"github.com/tributary-dev/tributary/internal/durationtext"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Exit statuses, the same for every operator command.
const (
	ExitOK = 0
	// ExitError: something failed while running (AWS answered with an
	// error, a record kept failing).
	ExitError = 1
	// ExitUsage: the command line (or the environment it reads) is wrong;
	// nothing was read or changed.
	ExitUsage = 2
	// ExitRefused: the command checked what it would change and refused
	// (a table that is not a version, a time outside the stream); nothing
	// was changed.
	ExitRefused = 3
	// ExitInterrupted: Ctrl-C or SIGTERM.
	ExitInterrupted = 130
)

// RegionHelp says where the commands take the region and endpoint from; each
// command's -h prints it.
const RegionHelp = `AWS settings: the region comes from AWS_REGION (or AWS_DEFAULT_REGION), or from the
profile AWS_PROFILE names in ~/.aws/config; with none of them set the command refuses to
run rather than guess one. Credentials come from the usual chain. AWS_ENDPOINT_URL, when
set, points every call at that endpoint (the local stand-in, with make local-up:
export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test
AWS_SECRET_ACCESS_KEY=test).`

// UsageError is a command line that cannot run. Flag names the wrong flag
// ("" when the problem is not one flag's).
type UsageError struct {
	Flag string
	Msg  string
}

func (e *UsageError) Error() string {
	if e.Flag == "" {
		return e.Msg
	}
	return "-" + e.Flag + " " + e.Msg
}

// ReadFile reads the file a flag names ("-": standard input), refusing one
// of more than max bytes without reading past max+1 (a -file /dev/zero, a
// log given by mistake): a *UsageError for flag either way. what says what
// the file should be, for the refusal ("a rule is a small JSON object").
func ReadFile(flag, name string, max int, what string) ([]byte, error) {
	r := io.Reader(os.Stdin)
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, Usagef(flag, "%v", err)
		}
		defer f.Close()
		r = f
	}
	b, over, err := limits.ReadAtMost(r, max)
	if err != nil {
		return nil, Usagef(flag, "%s: %v", name, err)
	}
	if over {
		return nil, Usagef(flag, "%s: more than %d bytes: %s", name, max, what)
	}
	return b, nil
}

// Usagef returns a *UsageError for flag.
func Usagef(flag, format string, args ...any) error {
	return &UsageError{Flag: flag, Msg: fmt.Sprintf(format, args...)}
}

// Parse parses args into fs without printing anything. On -h or -help it
// writes usage (a synopsis), the flags and footer to help and returns
// flag.ErrHelp; an unknown flag, a value that does not parse or a positional
// argument comes back as a one-line *UsageError naming it, saying what the
// flag takes (for a duration given as a bare number, that it needs a unit).
func Parse(fs *flag.FlagSet, args []string, help io.Writer, usage, footer string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(help, usage)
		fmt.Fprintln(help, "\nflags:")
		fs.SetOutput(help)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if footer != "" {
			fmt.Fprintln(help, "\n"+footer)
		}
		return flag.ErrHelp
	}
	if err != nil {
		if u := unitless(fs, err.Error()); u != nil {
			return u
		}
		return &UsageError{Msg: cutArgs(withWant(fs, err.Error()), args)}
	}
	if fs.NArg() > 0 {
		return &UsageError{Msg: fmt.Sprintf("unexpected argument %s (every value is given with a flag)", strictjson.QuoteCut(fs.Arg(0), MaxEcho))}
	}
	return nil
}

// badValue is the flag package's error for a value that does not parse.
var badValue = regexp.MustCompile(`for (?:flag )?-([A-Za-z0-9_.-]+): (parse error|value out of range)$`)

// withWant is msg, the flag package's error, saying what the flag takes
// where it says only "parse error" or "value out of range".
func withWant(fs *flag.FlagSet, msg string) string {
	m := badValue.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	f := fs.Lookup(m[1])
	if f == nil {
		return msg
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return msg
	}
	var want string
	switch g.Get().(type) {
	case time.Duration:
		want = "a duration such as 90s, 5m or 1h30m (at most 2562047h)"
	case int, int64:
		want = "a whole number"
	case uint, uint64:
		want = "a whole number, 0 or more"
	case float64:
		want = "a number"
	case bool:
		want = "true or false (or the flag alone)"
	default:
		return msg
	}
	return strings.TrimSuffix(msg, m[2]) + m[2] + ": want " + want
}

// notParsed is the flag package's error for a value it cannot parse:
// the value, quoted, and the flag's name.
var notParsed = regexp.MustCompile(`^invalid value ("(?:[^"\\]|\\.)*") for flag -([A-Za-z0-9_.-]+): parse error$`)

// bareNumber is a number written without a unit (21, 1.5, -5): what a
// user who means seconds types, and what time.ParseDuration refuses.
var bareNumber = regexp.MustCompile(`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)

// unitless is a *UsageError saying that a duration flag's value, msg
// being the flag package's error for it, is a number without a unit, and
// showing the number with one ("-wait 21: a duration needs a unit, such as
// 21s"): the general answer's examples (90s) may lie outside the flag's
// range and do not say what was missing. nil when msg is about something
// else.
func unitless(fs *flag.FlagSet, msg string) *UsageError {
	m := notParsed.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	f := fs.Lookup(m[2])
	if f == nil {
		return nil
	}
	if g, ok := f.Value.(flag.Getter); !ok {
		return nil
	} else if _, ok := g.Get().(time.Duration); !ok {
		return nil
	}
	v, err := strconv.Unquote(m[1])
	if err != nil || !bareNumber.MatchString(v) {
		return nil
	}
	if _, err := time.ParseDuration(v + "s"); err != nil || len(v) > MaxEcho {
		// Too many seconds for time.Duration: no unit makes it one a
		// flag takes, so none is suggested.
		return &UsageError{Flag: f.Name, Msg: strictjson.Cut(v, MaxEcho) + ": a duration needs a unit (h, m, s, ms, us or ns)"}
	}
	return &UsageError{Flag: f.Name, Msg: v + ": a duration needs a unit, such as " + v + "s"}
}

// MaxEcho bounds how much of a value a usage error repeats.
const MaxEcho = 256

// cutArgs is msg, the flag package's error, with every argument (and the
// value of a -flag=value) it repeats cut to MaxEcho bytes: the package
// quotes a value whole, however long.
func cutArgs(msg string, args []string) string {
	for _, a := range args {
		vs := []string{a}
		if _, v, ok := strings.Cut(a, "="); ok {
			vs = append(vs, v)
		}
		for _, v := range vs {
			if len(v) > MaxEcho {
				msg = strings.ReplaceAll(msg, strconv.Quote(v), strictjson.QuoteCut(v, MaxEcho))
				msg = strings.ReplaceAll(msg, v, strictjson.Cut(v, MaxEcho))
			}
		}
	}
	return msg
}

// Required is a *UsageError when v is empty.
func Required(flag, v, what string) error {
	if strings.TrimSpace(v) == "" {
		return Usagef(flag, "is required: %s", what)
	}
	return nil
}

// DurationIn is a *UsageError when d is outside [lo, hi].
func DurationIn(flag string, d, lo, hi time.Duration, why string) error {
	if d < lo || d > hi {
		msg := fmt.Sprintf("%s: must be from %s to %s", d, lo, hi)
		if why != "" {
			msg += " (" + why + ")"
		}
		return &UsageError{Flag: flag, Msg: msg}
	}
	return nil
}

// IsDuration reports whether s is written as a Go duration (90m, 1h30m),
// also one too large for time.Duration (99999999h), which
// time.ParseDuration refuses as invalid: a flag can then say it is too
// long rather than no duration.
func IsDuration(s string) bool { return durationtext.IsDuration(s) }

// IntIn is a *UsageError when n is outside [lo, hi].
func IntIn(flag string, n, lo, hi int, why string) error {
	if n < lo || n > hi {
		msg := fmt.Sprintf("%d: must be from %d to %d", n, lo, hi)
		if why != "" {
			msg += " (" + why + ")"
		}
		return &UsageError{Flag: flag, Msg: msg}
	}
	return nil
}

// NameRule is an AWS naming rule the commands check before calling AWS.
type NameRule struct {
	chars    *regexp.Regexp
	min, max int
	// Rule says the rule to a user.
	Rule string
}

// Check is a *UsageError naming flag when v breaks the rule.
func (n NameRule) Check(flag, v string) error {
	if len(v) < n.min || len(v) > n.max || !n.chars.MatchString(v) {
		return Usagef(flag, "%s: %s", strictjson.QuoteCut(v, MaxEcho), n.Rule)
	}
	return nil
}

// AWS naming rules.
var (
	TableName     = NameRule{limits.DynamoDBTableName, 3, 255, limits.DynamoDBTableNameRule}
	StreamName    = NameRule{regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`), 1, 128, "a Kinesis stream name is 1 to 128 letters, digits, '_', '-' or '.'"}
	ParameterName = NameRule{regexp.MustCompile(`^[a-zA-Z0-9_./-]+$`), 1, 2048, "an SSM parameter name is 1 to 2048 letters, digits, '_', '.', '-' or '/'"}
	// QueueName: SQS, 1 to 80 of [a-zA-Z0-9_-], a FIFO queue's ending in .fifo.
	QueueName     = NameRule{regexp.MustCompile(`^[a-zA-Z0-9_-]+(\.fifo)?$`), 1, 80, "an SQS queue name is 1 to 80 letters, digits, '_' or '-' (a FIFO queue's ends in .fifo)"}
	AttributeName = NameRule{regexp.MustCompile(`^.+$`), 1, 255, "a DynamoDB attribute name is 1 to 255 characters"}
	// RuleID: a CEP rule's id, as cep.ParseRule takes it.
	RuleID = NameRule{regexp.MustCompile(`^[A-Za-z0-9_-]+$`), 1, 64, "a rule id is 1 to 64 letters, digits, '-' or '_'"}
)

// ErrNoRegion is returned by LoadAWS when no region is configured.
var ErrNoRegion = errors.New("no AWS region is set: set AWS_REGION (or AWS_DEFAULT_REGION), or use a profile (AWS_PROFILE) whose ~/.aws/config entry has a region; the command does not guess one")

// LoadAWS loads the default AWS configuration and refuses one without a
// region (ErrNoRegion) instead of falling back to a default: an operator
// tool that picks us-east-1 on its own can act on the wrong deployment.
// The SDK's log goes to stderr as by default, less sdkNoise.
func LoadAWS(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(quietLogger{logging.NewStandardLogger(os.Stderr)}))
	if err != nil {
		return cfg, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return cfg, ErrNoRegion
	}
	return cfg, nil
}

// Fail prints err on stderr in one line that starts with the command's
// name and returns the command's exit status: a usage error (pointing at
// go run ./cmd/<name> -h, which works from the repository, where make's
// targets run them) and a missing region ExitUsage, Ctrl-C or SIGTERM ExitInterrupted
// (the line says interrupted, then afterInterrupt when set: what a rerun
// does), anything else ExitError.
func Fail(stderr io.Writer, name string, err error, afterInterrupt string) int {
	var usage *UsageError
	switch {
	case errors.As(err, &usage):
		// A message of several lines (a pipeline file's mistakes, one a
		// line) keeps them; the pointer to -h gets a line of its own.
		msg, help := usage.Error(), "see go run ./cmd/"+name+" -h"
		if vars := makeVars(os.Getenv(EnvMakeVars)); len(vars) > 0 {
			msg, help = respell(msg, vars), "see make help"
		}
		sep := "; "
		if strings.Contains(msg, "\n") {
			sep = "\n"
		}
		fmt.Fprintf(stderr, "%s: %s%s%s\n", name, msg, sep, help)
		return ExitUsage
	case errors.Is(err, ErrNoRegion):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	case errors.Is(err, context.Canceled):
		if afterInterrupt != "" {
			fmt.Fprintf(stderr, "%s: interrupted (%s)\n", name, afterInterrupt)
		} else {
			fmt.Fprintf(stderr, "%s: interrupted\n", name)
		}
		return ExitInterrupted
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitError
	}
}

// EnvMakeVars is set by the Makefile's targets that run a command, to the
// make variable that sets each flag ("key:KEY= follow:FOLLOW=1"), so that
// a usage error names what the user typed: "KEY= is required", not "-key
// is required".
const EnvMakeVars = "TRIBUTARY_MAKE_VARS"

// makeVars reads EnvMakeVars' value: flag name → make variable.
func makeVars(v string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(v) {
		if flag, variable, ok := strings.Cut(f, ":"); ok && flag != "" && variable != "" {
			out[flag] = variable
		}
	}
	return out
}

// flagMention is a flag named in a message: -name after the start, a
// space, a parenthesis, a slash or a quote.
var flagMention = regexp.MustCompile(`(^|[\s(/"'])-([a-z][a-z0-9-]*)`)

// respell names each flag of msg that a make variable sets by that
// variable.
func respell(msg string, vars map[string]string) string {
	return flagMention.ReplaceAllStringFunc(msg, func(m string) string {
		sub := flagMention.FindStringSubmatch(m)
		if v, ok := vars[sub[2]]; ok {
			return sub[1] + v
		}
		return m
	})
}

// Main runs an operator command's run with a context that Ctrl-C or
// SIGTERM cancels, and exits with the status run returns: every command's
// main is this one line.
func Main(run func(ctx context.Context) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

// sdkNoise starts the SDK's log lines that tell a command's user nothing.
// "failed to discard remaining HTTP response body" is the SDK draining an
// answer whose call had already ended: the command was interrupted (Ctrl-C,
// a tail's -n reached, a session's end) while the answer was arriving, so
// the connection was closed under it, or the answer came cut short, which
// the call itself reports as its error. Either way the connection it warns
// about is not reused, and a user read the line as something gone wrong.
var sdkNoise = []string{"failed to discard remaining HTTP response body"}

// quietLogger is the SDK's logger less the lines sdkNoise starts.
type quietLogger struct{ next logging.Logger }

func (l quietLogger) Logf(c logging.Classification, format string, v ...any) {
	for _, n := range sdkNoise {
		if strings.HasPrefix(format, n) {
			return
		}
	}
	l.next.Logf(c, format, v...)
}
