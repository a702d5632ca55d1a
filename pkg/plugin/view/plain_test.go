package view

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
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
				buf.WriteString(Summary(m, outcome.ExpectDelivered) + "\n")
				if escapeSeq.Match(buf.Bytes()) {
					t.Fatal("plain output contains an escape sequence")
				}
				golden(t, "plain-"+name+suffix+".txt", buf.Bytes())
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
		ObjectMeta: metav1.ObjectMeta{Name: "tf-pod-a-x7k2p", Labels: map[string]string{"app.kubernetes.io/managed-by": "kubectl-traceflow"}},
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
			if err := json.Unmarshal(got, &back); err != nil || back.Annotations[VerdictAnnotation] != string(m.Finished.Verdict) {
				t.Fatalf("the JSON does not carry the verdict %s: %v", m.Finished.Verdict, err)
			}
			golden(t, "json-"+name+".json", append(got, '\n'))
		})
	}
}
