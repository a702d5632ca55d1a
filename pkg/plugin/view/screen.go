package view

import (
	"fmt"
	"io"
	"strings"
)

// Screen redraws frames in place on a terminal: each Draw moves the cursor
// back over the previous frame and overwrites it line by line in a single
// write, so the terminal never shows a cleared screen between frames.
// Frames must not wrap (Live truncates every line to the width).
type Screen struct {
	W      io.Writer
	lines  int
	hidden bool
}

// Draw replaces the previous frame with frame.
func (s *Screen) Draw(frame string) error {
	var b strings.Builder
	if !s.hidden {
		b.WriteString("\x1b[?25l") // hide the cursor while drawing
		s.hidden = true
	}
	if s.lines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", s.lines)
	}
	b.WriteString("\r")
	body := strings.TrimSuffix(frame, "\n")
	rows := strings.Split(body, "\n")
	for _, r := range rows {
		b.WriteString("\x1b[2K")
		b.WriteString(r)
		b.WriteString("\n")
	}
	b.WriteString("\x1b[J") // clear what is left of a longer previous frame
	s.lines = len(rows)
	_, err := io.WriteString(s.W, b.String())
	return err
}

// Close gives the cursor back. Call it on every exit path, Ctrl-C included,
// so the terminal is left as it was found.
func (s *Screen) Close() error {
	if !s.hidden {
		return nil
	}
	s.hidden = false
	_, err := io.WriteString(s.W, "\x1b[?25h")
	return err
}
