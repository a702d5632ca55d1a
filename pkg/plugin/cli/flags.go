package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// The flag values below check what the user typed as pflag parses it, so a
// bad value fails before anything else runs, with a message that says what
// would have been right. pflag prefixes it with `invalid argument "X" for
// "--flag" flag: `.

// portValue is a TCP or UDP port, 1-65535; zero means unset.
type portValue struct {
	port    *int32
	example string
}

func (p *portValue) String() string {
	if *p.port == 0 {
		return ""
	}
	return strconv.Itoa(int(*p.port))
}

func (p *portValue) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("a port is a number from 1 to 65535, e.g. %s", p.example)
	}
	*p.port = int32(n)
	return nil
}

func (p *portValue) Type() string { return "PORT" }

// enumValue is one of a fixed list of words.
type enumValue struct {
	value   *string
	allowed []string
}

func (e *enumValue) String() string { return *e.value }

func (e *enumValue) Set(s string) error {
	for _, a := range e.allowed {
		if s == a {
			*e.value = s
			return nil
		}
	}
	return fmt.Errorf("use one of %s", strings.Join(e.allowed, ", "))
}

func (e *enumValue) Type() string { return strings.Join(e.allowed, "|") }

// timeoutValue is a duration from 1s to 300s in whole seconds (Antrea's
// spec.timeout is an integer number of seconds); a bare number is seconds.
type timeoutValue struct {
	d *time.Duration
}

func (t *timeoutValue) String() string { return t.d.String() }

func (t *timeoutValue) Set(s string) error {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if n, nerr := strconv.Atoi(s); nerr == nil {
		d, err = time.Duration(n)*time.Second, nil
	}
	lo, hi := traceflow.MinTimeoutSeconds*time.Second, traceflow.MaxTimeoutSeconds*time.Second
	switch {
	case err != nil:
		return fmt.Errorf("not a duration: write e.g. --timeout 30s (from %ds to %ds)", traceflow.MinTimeoutSeconds, traceflow.MaxTimeoutSeconds)
	case d < lo || d > hi:
		return fmt.Errorf("outside %ds to %ds: write e.g. --timeout 30s", traceflow.MinTimeoutSeconds, traceflow.MaxTimeoutSeconds)
	case d%time.Second != 0:
		return fmt.Errorf("not whole seconds: write e.g. --timeout %s", d.Round(time.Second).String())
	}
	*t.d = d
	return nil
}

func (t *timeoutValue) Type() string { return "DURATION" }

// ttlValue is an IPv4 TTL or IPv6 hop limit, 1-255.
type ttlValue struct {
	ttl *int32
}

func (t *ttlValue) String() string { return strconv.Itoa(int(*t.ttl)) }

func (t *ttlValue) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil || n < 1 || n > 255 {
		return fmt.Errorf("a TTL is a number from 1 to 255, e.g. --ttl 64")
	}
	*t.ttl = int32(n)
	return nil
}

func (t *ttlValue) Type() string { return "N" }

// tcpFlagsValue holds TCP flags as names (SYN,ACK) or a number.
type tcpFlagsValue struct {
	flags *int32
}

func (f *tcpFlagsValue) String() string { return traceflow.FormatTCPFlags(*f.flags) }

func (f *tcpFlagsValue) Set(s string) error {
	flags, ok := traceflow.ParseTCPFlags(s)
	if !ok {
		return fmt.Errorf("TCP flags are names from SYN, ACK, FIN, RST, PSH, URG, ECE, CWR joined by commas, none, or a number 0-255: e.g. --tcp-flags SYN,ACK")
	}
	*f.flags = flags
	return nil
}

func (f *tcpFlagsValue) Type() string { return "FLAGS" }

// dryRunValue is a boolean that also takes kubectl's --dry-run=client (the
// same thing here) and refuses --dry-run=server, which has no meaning for
// a trace.
type dryRunValue struct {
	on *bool
}

func (d *dryRunValue) String() string { return strconv.FormatBool(*d.on) }

func (d *dryRunValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "true", "client":
		*d.on = true
	case "false", "none":
		*d.on = false
	case "server":
		return fmt.Errorf("a trace has no server-side dry run: use --dry-run to print the Traceflow and create nothing")
	default:
		return fmt.Errorf("use --dry-run (or --dry-run=client) to print the Traceflow and create nothing")
	}
	return nil
}

func (d *dryRunValue) Type() string { return "bool" }

// IsBoolFlag lets pflag accept --dry-run without a value.
func (d *dryRunValue) IsBoolFlag() bool { return true }
