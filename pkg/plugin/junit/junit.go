// Package junit writes test reports in the JUnit XML dialect that Jenkins,
// GitLab, GitHub Actions reporters and most CI systems read: one
// <testsuite> per suite file, one <testcase> per trace, a <failure> for a
// verdict that missed its expectation and an <error> for a trace that
// could not complete. testdata/jenkins-junit-10.xsd is the schema it is
// checked against.
package junit

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// Report is every suite of one run.
type Report struct {
	Name   string
	Suites []Suite
}

// Suite is one suite file's cases.
type Suite struct {
	Name      string
	Timestamp time.Time
	Time      time.Duration
	Cases     []Case
}

// Case is one trace.
type Case struct {
	Name      string
	Classname string
	Time      time.Duration
	// Failure is set when the trace completed but missed its expectation;
	// Error when it could not complete. At most one is set.
	Failure, Error *Problem
	// Output is the trace's path, for the reader of a report.
	Output string
}

// Problem is a failure or an error: its type (the verdict), a one-line
// message and the details.
type Problem struct {
	Type, Message, Text string
}

type xmlSuites struct {
	XMLName  xml.Name   `xml:"testsuites"`
	Name     string     `xml:"name,attr,omitempty"`
	Tests    int        `xml:"tests,attr"`
	Failures int        `xml:"failures,attr"`
	Errors   int        `xml:"errors,attr"`
	Time     string     `xml:"time,attr"`
	Suites   []xmlSuite `xml:"testsuite"`
}

type xmlSuite struct {
	Name      string    `xml:"name,attr"`
	Tests     int       `xml:"tests,attr"`
	Failures  int       `xml:"failures,attr"`
	Errors    int       `xml:"errors,attr"`
	Skipped   int       `xml:"skipped,attr"`
	Time      string    `xml:"time,attr"`
	Timestamp string    `xml:"timestamp,attr,omitempty"`
	Cases     []xmlCase `xml:"testcase"`
}

type xmlCase struct {
	Name      string      `xml:"name,attr"`
	Classname string      `xml:"classname,attr"`
	Time      string      `xml:"time,attr"`
	Failure   *xmlProblem `xml:"failure,omitempty"`
	Error     *xmlProblem `xml:"error,omitempty"`
	SystemOut *cdata      `xml:"system-out,omitempty"`
}

// cdata keeps multi-line text readable in the file: as CDATA, not with
// every newline escaped.
type cdata struct {
	Text string `xml:",cdata"`
}

type xmlProblem struct {
	Type    string `xml:"type,attr"`
	Message string `xml:"message,attr"`
	Text    string `xml:",cdata"`
}

// seconds is a duration as the schema's time wants it: digits, a point,
// digits (no exponent, no unit).
func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func problem(p *Problem) *xmlProblem {
	if p == nil {
		return nil
	}
	return &xmlProblem{Type: p.Type, Message: p.Message, Text: xmlText(p.Text)}
}

// xmlText replaces what XML 1.0 cannot hold (most control characters), and
// the end of a CDATA section, in text from the cluster; attributes are
// escaped by encoding/xml itself.
func xmlText(s string) string {
	s = strings.ReplaceAll(s, "]]>", "]] >")
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r != 0xFFFE && r != 0xFFFF) {
			return r
		}
		return '\uFFFD'
	}, s)
}

// Write writes r as JUnit XML.
func Write(w io.Writer, r Report) error {
	out := xmlSuites{Name: r.Name}
	var total time.Duration
	for _, s := range r.Suites {
		xs := xmlSuite{Name: s.Name, Time: seconds(s.Time), Tests: len(s.Cases)}
		if !s.Timestamp.IsZero() {
			xs.Timestamp = s.Timestamp.UTC().Format("2006-01-02T15:04:05")
		}
		for _, c := range s.Cases {
			if c.Failure != nil {
				xs.Failures++
			}
			if c.Error != nil {
				xs.Errors++
			}
			xs.Cases = append(xs.Cases, xmlCase{Name: c.Name, Classname: c.Classname, Time: seconds(c.Time),
				Failure: problem(c.Failure), Error: problem(c.Error)})
			if c.Output != "" {
				xs.Cases[len(xs.Cases)-1].SystemOut = &cdata{xmlText(c.Output)}
			}
		}
		out.Tests += xs.Tests
		out.Failures += xs.Failures
		out.Errors += xs.Errors
		total = max(total, s.Time)
		out.Suites = append(out.Suites, xs)
	}
	out.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write JUnit XML: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}
