package matrix

import (
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func TestParsePort(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Port
		wantErr  string
	}{
		{name: "tcp", in: "tcp/80", want: Port{traceflow.TCP, 80}},
		{name: "udp", in: "udp/53", want: Port{traceflow.UDP, 53}},
		{name: "icmp", in: "icmp", want: Port{Protocol: traceflow.ICMP}},
		{name: "upper-case icmp", in: "ICMP", want: Port{Protocol: traceflow.ICMP}},
		{name: "number alone is tcp", in: "80", want: Port{traceflow.TCP, 80}},
		{name: "upper-case protocol", in: "TCP/80", want: Port{traceflow.TCP, 80}},
		{name: "highest port", in: "udp/65535", want: Port{traceflow.UDP, 65535}},
		{name: "lowest port", in: "1", want: Port{traceflow.TCP, 1}},
		{name: "empty", in: "", wantErr: "an empty port: " + portForms},
		{name: "port zero", in: "tcp/0", wantErr: `"tcp/0" is not a port: 0 is out of range; ` + portForms},
		{name: "number alone zero", in: "0", wantErr: `"0" is not a port: 0 is out of range; ` + portForms},
		{name: "above 65535", in: "tcp/65536", wantErr: `"tcp/65536" is not a port: 65536 is out of range; ` + portForms},
		{name: "far above", in: "99999999999999999999999", wantErr: `"99999999999999999999999" is not a port: 99999999999999999999999 is out of range; ` + portForms},
		{name: "icmp with a number", in: "icmp/3", wantErr: `"icmp/3" is not a port: icmp takes no port number; ` + portForms},
		{name: "unknown protocol", in: "sctp/1", wantErr: `"sctp/1" is not a port: "sctp" is not a protocol here; ` + portForms},
		{name: "protocol without number", in: "tcp/", wantErr: `"tcp/" is not a port: ` + portForms},
		{name: "word", in: "abc", wantErr: `"abc" is not a port: ` + portForms},
		{name: "sign", in: "+80", wantErr: `"+80" is not a port: ` + portForms},
		{name: "negative", in: "tcp/-1", wantErr: `"tcp/-1" is not a port: ` + portForms},
		{name: "two slashes", in: "tcp/80/1", wantErr: `"tcp/80/1" is not a port: ` + portForms},
		{name: "leading space", in: " tcp/80", wantErr: `" tcp/80" is not a port: " tcp" is not a protocol here; ` + portForms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePort(tc.in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParsePort(%q) = %v, %v; want error %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParsePort(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			back, err := ParsePort(got.String())
			if err != nil || back != got {
				t.Errorf("%v does not read back: %v, %v", got, back, err)
			}
		})
	}
}

func TestPortAndCellString(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"tcp port", Port{traceflow.TCP, 80}.String(), "tcp/80"},
		{"udp port", Port{traceflow.UDP, 53}.String(), "udp/53"},
		{"icmp port", Port{Protocol: traceflow.ICMP}.String(), "icmp"},
		{"cell", Cell{"client-a", "web-1", Port{traceflow.TCP, 80}}.String(), "client-a → web-1 tcp/80"},
		{"escaped names", Cell{"a\x1b[2J", "b\u202e", Port{Protocol: traceflow.ICMP}}.String(), `"a\x1b[2J" → "b\u202e" icmp`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestStateWordsAndSymbols(t *testing.T) {
	for _, tc := range []struct {
		state        State
		word, symbol string
	}{
		{Pending, "pending", "·"}, {Running, "running", "…"}, {Delivered, "delivered", "✓"},
		{Dropped, "dropped", "✗"}, {Refused, "refused", "↩"}, {Incomplete, "incomplete", "?"},
		{State(42), "State(42)", "?"}, {State(-1), "State(-1)", "?"},
	} {
		t.Run(tc.word, func(t *testing.T) {
			if got := tc.state.String(); got != tc.word {
				t.Errorf("String() = %q, want %q", got, tc.word)
			}
			if got := tc.state.Symbol(); got != tc.symbol {
				t.Errorf("Symbol() = %q, want %q", got, tc.symbol)
			}
			if n := width(tc.state.Symbol()); n != 1 {
				t.Errorf("Symbol() is %d columns, want 1", n)
			}
		})
	}
}

func TestStateOf(t *testing.T) {
	reply := func(f outcome.ReplyFate) *outcome.ReplyEnd { return &outcome.ReplyEnd{Fate: f} }
	for _, tc := range []struct {
		name    string
		verdict outcome.Verdict
		reply   *outcome.ReplyEnd
		want    State
	}{
		{"delivered one way", outcome.Delivered, nil, Delivered},
		{"delivered and answered", outcome.Delivered, reply(outcome.Answered), Delivered},
		{"delivered and refused", outcome.Delivered, reply(outcome.Refused), Refused},
		{"delivered, answer lost", outcome.Delivered, reply(outcome.Lost), Dropped},
		{"delivered, unanswered", outcome.Delivered, reply(outcome.Unanswered), Dropped},
		{"delivered, answer not followed", outcome.Delivered, &outcome.ReplyEnd{Reason: "no helper on node-2"}, Incomplete},
		{"dropped", outcome.Dropped, nil, Dropped},
		{"dropped with a reply", outcome.Dropped, reply(outcome.Answered), Dropped},
		{"rejected is refused", outcome.Rejected, nil, Refused},
		{"incomplete", outcome.Incomplete, nil, Incomplete},
		{"failed", outcome.Failed, nil, Incomplete},
		{"no verdict", "", nil, Incomplete},
		{"left the pod network", outcome.ForwardedOutOfNetwork, nil, Incomplete},
		{"unknown verdict", "Teleported", nil, Incomplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StateOf(tc.verdict, tc.reply); got != tc.want {
				t.Errorf("StateOf(%q, %v) = %v, want %v", tc.verdict, tc.reply, got, tc.want)
			}
		})
	}
}

func TestCells(t *testing.T) {
	tcp80, udp53 := Port{traceflow.TCP, 80}, Port{traceflow.UDP, 53}
	for _, tc := range []struct {
		name string
		grid Grid
		want []string
	}{
		{"empty", Grid{}, nil},
		{"no ports", Grid{Sources: []string{"a"}, Destinations: []string{"b"}}, nil},
		{"only itself", Grid{Sources: []string{"a"}, Destinations: []string{"a"}, Ports: []Port{tcp80}}, nil},
		{
			"row-major, self skipped",
			Grid{Sources: []string{"a", "b"}, Destinations: []string{"a", "b", "c"}, Ports: []Port{tcp80, udp53}},
			[]string{
				"a → b tcp/80", "a → b udp/53", "a → c tcp/80", "a → c udp/53",
				"b → a tcp/80", "b → a udp/53", "b → c tcp/80", "b → c udp/53",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range tc.grid.Cells() {
				got = append(got, c.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("Cells():\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
