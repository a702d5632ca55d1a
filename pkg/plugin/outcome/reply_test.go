package outcome

import (
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

func TestRoundTripExitCode(t *testing.T) {
	answered := &ReplyEnd{Fate: Answered}
	refused := &ReplyEnd{Fate: Refused, Reason: "RST"}
	lost := &ReplyEnd{Fate: Lost, Reason: "dropped on n2"}
	cases := []struct {
		name  string
		v     Verdict
		reply *ReplyEnd
		want  Expect
		code  exitcode.Code
	}{
		{"one way delivered", Delivered, nil, ExpectDelivered, exitcode.OK},
		{"answered", Delivered, answered, ExpectDelivered, exitcode.OK},
		{"answered, default expectation", Delivered, answered, "", exitcode.OK},
		{"refused is no delivery", Delivered, refused, ExpectDelivered, exitcode.Verdict},
		{"lost is no delivery", Delivered, lost, "", exitcode.Verdict},
		{"refused as expected", Delivered, refused, ExpectRefused, exitcode.OK},
		{"answered but refused expected", Delivered, answered, ExpectRefused, exitcode.Verdict},
		{"dropped but refused expected", Dropped, nil, ExpectRefused, exitcode.Verdict},
		{"incomplete stays incomplete", Incomplete, nil, ExpectRefused, exitcode.Timeout},
		{"dropped as expected", Dropped, nil, ExpectDropped, exitcode.OK},
		{"any", Delivered, lost, ExpectAny, exitcode.OK},
	}
	for _, c := range cases {
		code, err := RoundTripExitCode(c.v, c.reply, c.want, DestinationPod)
		if code != c.code || (code == exitcode.OK) != (err == nil) {
			t.Errorf("%s: got %d, %v; want %d", c.name, code, err, c.code)
		}
	}
}
