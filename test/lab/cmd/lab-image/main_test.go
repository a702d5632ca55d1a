package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestBuildLayer(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(src, []byte("#!binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	layer, err := buildLayer([]string{src + "=/usr/local/bin/tool"})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := buildLayer([]string{src + "=/usr/local/bin/tool"})
	if digest(layer) != digest(again) {
		t.Error("same inputs gave different layers: the image digest would change on every lab-up")
	}
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
	}
	for _, want := range []string{"usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/tool", "proc/", "tmp/"} {
		if entries[want] == nil {
			t.Errorf("layer lacks %s (has %v)", want, entries)
		}
	}
	if h := entries["usr/local/bin/tool"]; h != nil && (h.Mode != 0o755 || h.Size != 8) {
		t.Errorf("tool: mode %o size %d", h.Mode, h.Size)
	}
	if _, err := buildLayer([]string{"relative=usr/x"}); err == nil {
		t.Error("a relative destination should be refused")
	}
}
