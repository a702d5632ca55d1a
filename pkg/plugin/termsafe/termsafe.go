// Package termsafe escapes strings from the cluster (object names, helper
// output, Antrea's failure reasons) before they reach a terminal, so that a
// crafted string cannot move the cursor, retitle the window or hide text.
//
// Every output path calls Escape; the Style says how the escaped string
// looks where it lands. The styles differ on purpose and each is pinned by
// golden files: an error message keeps its lines, a key=value pair must
// parse back as one token, a name reads as quoted when it had to be
// escaped, a box of text shows escapes without quotes around them.
package termsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Style is how Escape writes a string that needs escaping.
type Style int

const (
	// Message escapes, in place, control characters (C0 but newline and
	// tab, DEL, C1), bidirectional overrides and invalid UTF-8 as Go escapes
	// (\x1b, \u202e), leaving everything else, non-ASCII text included, as
	// it is: an error message keeps its lines and its words.
	Message Style = iota
	// Name writes a string holding anything strconv.QuoteToGraphic escapes
	// (a non-graphic rune, invalid UTF-8, a quote or a backslash) whole as
	// a Go string literal, quotes included, so that an escaped name reads
	// as one; graphic non-ASCII (nœud-1) stays as it is.
	Name
	// Word leaves one printable ASCII word without '"', '=' or '\' as it
	// is and writes anything else whole as a strconv.Quote literal, so that
	// a key=value pair in plain output parses back as one token and plain
	// output stays 7-bit.
	Word
	// Text writes a string holding a control character (C0, DEL, C1) with
	// strconv.Quote's escapes but without the quotes, for text inside a box
	// that is not a token of its own.
	Text
)

// Escape returns s as it may be written to a terminal in style st; a
// string that needs no escaping comes back unchanged in every style.
func Escape(s string, st Style) string {
	switch st {
	case Message:
		return inPlace(s)
	case Name:
		if q := strconv.QuoteToGraphic(s); q[1:len(q)-1] != s {
			return q
		}
	case Word:
		if strings.IndexFunc(s, notWordRune) >= 0 {
			return strconv.Quote(s)
		}
	case Text:
		if strings.IndexFunc(s, unicode.IsControl) >= 0 {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

// notWordRune is what makes a string more than one plain key=value token.
func notWordRune(r rune) bool {
	return r <= ' ' || r == '"' || r == '=' || r == '\\' || r > '~'
}

// inPlace escapes the runes and bytes Message names and nothing else.
func inPlace(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
