package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/muesli/termenv"
	"golang.org/x/term"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// sink receives the engines' updates, folds them into the one view model
// and drives the renderer the user chose. Engines call Emit from their own
// goroutine; the live view also redraws on a timer for its spinner.
type sink struct {
	mu     sync.Mutex
	model  outcome.Model
	plain  *view.Plain
	live   *view.Live
	screen *view.Screen
	now    func() time.Time
	step   int
	stop   chan struct{}
	done   sync.WaitGroup
	err    error
	// warnTo, for the structured formats (whose stdout is the record),
	// gets the warnings as "Warning: ..." lines, as kubectl writes them.
	warnTo io.Writer
	// explain: the output shows every table hop, and the summary line
	// counts them; otherwise it counts the hops shown (Antrea's summary).
	explain bool
}

// spinnerEvery is the live view's redraw period: often enough for a
// smooth spinner, rarely enough to cost nothing.
const spinnerEvery = 100 * time.Millisecond

func newSink(format string, explain, color bool, out io.Writer, now func() time.Time) *sink {
	s := &sink{now: now, stop: make(chan struct{}), explain: explain}
	switch format {
	case outputLive:
		profile := termenv.Ascii
		if color {
			profile = termenv.ANSI256
		}
		w, h := terminalSize(out)
		// Leave room below the frame for the summary line and a prompt.
		s.live = view.NewLive(w, max(h-3, 0), profile, explain)
		s.screen = &view.Screen{W: out}
		s.done.Add(1)
		go s.tick()
	case outputPlain:
		s.plain = &view.Plain{W: out, Explain: explain}
	}
	return s
}

// Emit applies u and renders it.
func (s *sink) Emit(u outcome.Update) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model.Apply(u)
	switch {
	case s.plain != nil:
		s.keep(s.plain.Write(&s.model, u))
	case s.live != nil:
		s.keep(s.screen.Draw(s.live.Frame(&s.model, s.now(), s.step)))
	case s.warnTo != nil:
		if w, ok := u.(outcome.Warning); ok {
			where := ""
			if w.Node != "" {
				where = " (node " + view.Safe(w.Node) + ")"
			}
			_, _ = fmt.Fprintf(s.warnTo, "Warning: %s%s\n", view.Safe(w.Message), where)
		}
		if r, ok := u.(outcome.Retried); ok {
			_, _ = fmt.Fprintf(s.warnTo, "Retry: %s\n", view.Safe(r.Why))
		}
	}
}

func (s *sink) keep(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *sink) tick() {
	defer s.done.Done()
	t := time.NewTicker(spinnerEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			if s.model.Finished == nil {
				s.step++
				s.keep(s.screen.Draw(s.live.Frame(&s.model, s.now(), s.step)))
			}
			s.mu.Unlock()
		}
	}
}

// Close stops the timer, draws the final frame and gives the terminal back.
// It returns the first error writing the output, if any.
func (s *sink) Close() error {
	close(s.stop)
	s.done.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live != nil {
		s.keep(s.screen.Draw(s.live.Frame(&s.model, s.now(), s.step)))
		s.keep(s.screen.Close())
	}
	return s.err
}

// terminalSize is the size of the terminal out writes to, else COLUMNS and
// LINES, else 80 columns and no height limit (0).
func terminalSize(out io.Writer) (width, height int) {
	if f, ok := out.(*os.File); ok {
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w, h
		}
	}
	width = 80
	if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c > 0 {
		width = c
	}
	if l, err := strconv.Atoi(os.Getenv("LINES")); err == nil && l > 0 {
		height = l
	}
	return width, height
}

// summary is the one line a CI log reader looks for.
func (s *sink) summary(expect outcome.Expect) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return view.Summary(&s.model, expect, s.explain)
}

// record is the structured output: the trace record as the model saw it.
func (s *sink) record(base *traceflow.Traceflow) *traceflow.Traceflow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return view.Record(&s.model, base)
}
