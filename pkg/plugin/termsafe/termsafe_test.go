package termsafe

import "testing"

func TestEscape(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[Style]string
	}{
		{"plain word", "node-1", map[Style]string{Message: "node-1", Name: "node-1", Word: "node-1", Text: "node-1"}},
		{"non-ASCII word", "nœud-1", map[Style]string{Message: "nœud-1", Name: "nœud-1", Word: `"nœud-1"`, Text: "nœud-1"}},
		{"escape sequence", "evil\x1b[31mnode", map[Style]string{
			Message: `evil\x1b[31mnode`, Name: `"evil\x1b[31mnode"`, Word: `"evil\x1b[31mnode"`, Text: `evil\x1b[31mnode`}},
		{"newline", "two\nlines", map[Style]string{
			Message: "two\nlines", Name: `"two\nlines"`, Word: `"two\nlines"`, Text: `two\nlines`}},
		{"spaces", "a b", map[Style]string{Message: "a b", Name: "a b", Word: `"a b"`, Text: "a b"}},
		{"key=value inside", "a=b", map[Style]string{Message: "a=b", Name: "a=b", Word: `"a=b"`, Text: "a=b"}},
		{"bidi override", "abc\u202edef", map[Style]string{
			Message: `abc\u202edef`, Name: `"abc\u202edef"`, Word: `"abc\u202edef"`, Text: "abc\u202edef"}},
		{"invalid UTF-8", "a\xffb", map[Style]string{Message: `a\xffb`, Name: `"a\xffb"`, Word: `"a\xffb"`, Text: "a\xffb"}},
		{"C1 control", "a\u0085b", map[Style]string{Message: `a\u0085b`, Name: `"a\u0085b"`, Word: `"a\u0085b"`, Text: `a\u0085b`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for st, want := range tt.want {
				if got := Escape(tt.in, st); got != want {
					t.Errorf("Escape(%q, %d) = %q, want %q", tt.in, st, got, want)
				}
			}
		})
	}
}

// FuzzEscape holds every style to its promise: what comes out holds no
// control character a terminal would act on.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "node-1", "\x1b[2J", "nœud", "\xff", "\u202e", "a\tb\nc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, st := range []Style{Message, Name, Word, Text} {
			for _, r := range Escape(s, st) {
				if r == 0x1b || r == 0x9b || r == 0x07 || r == '\r' {
					t.Fatalf("Escape(%q, %d) holds %U", s, st, r)
				}
			}
		}
	})
}
