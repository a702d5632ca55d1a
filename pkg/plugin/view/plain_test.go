package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/goldenfile"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

var escapeSeq = regexp.MustCompile("\x1b\\[")

func TestPlainGolden(t *testing.T) {
	for name, updates := range scenarios {
		for _, explain := range []bool{false, true} {
			suffix := ""
			if explain {
				suffix = "-wide"
			}
			t.Run(name+suffix, func(t *testing.T) {
				var buf bytes.Buffer
				p := Plain{W: &buf, Explain: explain}
				m := build(updates, func(m *outcome.Model, u outcome.Update) {
					if err := p.Write(m, u); err != nil {
						t.Fatal(err)
					}
				})
				buf.WriteString(Summary(m, outcome.ExpectDelivered, explain) + "\n")
				if escapeSeq.Match(buf.Bytes()) {
					t.Fatal("plain output contains an escape sequence")
				}
				golden(t, "plain-"+name+suffix+".txt", buf.Bytes())
			})
		}
	}
}

// The summary line counts the hops the output above it showed: Antrea's
// summary of a node's table hops by default, every table hop with -o wide;
// where the two differ, the default line also gives the table count. An
// inferred table hop that the summary leaves out is not counted inferred.
func TestSummaryCountsTheHopsShown(t *testing.T) {
	// A routing hop Antrea does not report, only predicted: summarised away.
	routed := append([]outcome.Update(nil), scenarios["intra-node-delivered"]...)
	for i, u := range routed {
		if o, ok := u.(outcome.Observed); ok && o.Hop.TableName == "L3Forwarding" {
			o.Hop.Observation = guessed(o.Hop.Observation)
			routed[i] = o
		}
	}
	cases := map[string][]outcome.Update{"inferred routing hop": routed}
	for name, updates := range scenarios {
		cases[name] = updates
	}
	count := regexp.MustCompile(`; (\d+) hops?( \(summarised from (\d+) table hops?\))?(, (\d+) inferred from OVS's trace)?; `)
	for name, updates := range cases {
		for _, explain := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s explain=%v", name, explain), func(t *testing.T) {
				var buf bytes.Buffer
				p := Plain{W: &buf, Explain: explain}
				m := build(updates, func(m *outcome.Model, u outcome.Update) {
					if err := p.Write(m, u); err != nil {
						t.Fatal(err)
					}
				})
				shown, inferred := 0, 0
				for _, l := range strings.Split(buf.String(), "\n") {
					if strings.Contains(l, " hop node=") {
						shown++
						if strings.Contains(l, " inferred=true ") {
							inferred++
						}
					}
				}
				line := Summary(m, outcome.ExpectDelivered, explain)
				got := count.FindStringSubmatch(line)
				if got == nil {
					t.Fatalf("no hop count in %q", line)
				}
				tables, _ := m.Counts()
				want := []string{strconv.Itoa(shown), "", strconv.Itoa(inferred)}
				if shown != tables {
					want[1] = strconv.Itoa(tables)
				}
				if inferred == 0 {
					want[2] = ""
				}
				if d := cmp.Diff(want, []string{got[1], got[3], got[5]}); d != "" {
					t.Errorf("%q counts [shown tables inferred] wrong (-want +got):\n%s\noutput:\n%s", line, d, buf.String())
				}
			})
		}
	}
}

func TestPlainEscapesClusterStrings(t *testing.T) {
	var buf bytes.Buffer
	p := Plain{W: &buf}
	m := &outcome.Model{}
	u := outcome.HelperWaiting{At: at(1), Node: "evil\x1b[2Jnode", Reason: "a b"}
	m.Apply(u)
	if err := p.Write(m, u); err != nil {
		t.Fatal(err)
	}
	if escapeSeq.Match(buf.Bytes()) {
		t.Fatalf("escape sequence from a node name reached the output: %q", buf.String())
	}
}

func TestStructuredGolden(t *testing.T) {
	base := &traceflow.Traceflow{
		ObjectMeta: metav1.ObjectMeta{Name: "tf-pod-a-x7k2p", Labels: map[string]string{labels.ManagedBy: labels.Manager}},
		Spec: traceflow.Spec{Source: traceflow.Source{Namespace: "default", Pod: "pod-a"},
			Destination: traceflow.Destination{Namespace: "default", Pod: "pod-b"}, Timeout: 20},
	}
	for name, updates := range scenarios {
		t.Run(name, func(t *testing.T) {
			m := build(updates, nil)
			got, err := json.MarshalIndent(Record(m, base), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			var back traceflow.Traceflow
			if err := json.Unmarshal(got, &back); err != nil || back.Annotations[labels.VerdictAnnotation] != string(m.Finished.Verdict) {
				t.Fatalf("the JSON does not carry the verdict %s: %v", m.Finished.Verdict, err)
			}
			golden(t, "json-"+name+".json", append(got, '\n'))
		})
	}
}

// A trace run again with another engine says so, and why, in one line.
func TestPlainRetryLine(t *testing.T) {
	var buf bytes.Buffer
	p := Plain{W: &buf}
	m := &outcome.Model{}
	for _, u := range []outcome.Update{
		outcome.TraceStarted{At: outcome.At{Time: t0}, Name: "t", Engine: "agent"},
		outcome.Retried{At: outcome.At{Time: t0.Add(20 * time.Second)}, Why: "Antrea's agents did not say where the packet ended: tracing again with helper pods"},
	} {
		m.Apply(u)
		if err := p.Write(m, u); err != nil {
			t.Fatal(err)
		}
	}
	want := `+20.00s   retry why="Antrea's agents did not say where the packet ended: tracing again with helper pods"`
	if got := strings.Split(strings.TrimSpace(buf.String()), "\n"); len(got) != 2 || got[1] != want {
		t.Errorf("got %q\nwant second line %q", got, want)
	}
}

func TestSafe(t *testing.T) {
	tests := map[string]string{
		"node-1":           "node-1",
		"nœud-1":           "nœud-1",
		"evil\x1b[31mnode": `"evil\x1b[31mnode"`,
		"two\nlines":       `"two\nlines"`,
	}
	for in, want := range tests {
		if got := Safe(in); got != want {
			t.Errorf("Safe(%q) = %q, want %q", in, got, want)
		}
	}
}
