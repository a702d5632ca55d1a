// Command lab-image writes a one-layer OCI image-layout archive without
// Docker, for `ctr -n k8s.io image import` into each lab node's containerd.
//
//	lab-image -ref ghcr.io/x/y:tag -o y.tar -entrypoint /y SRC=/DST [SRC=/DST ...]
//
// The layer is an uncompressed tar (containerd accepts it; gzip would only
// cost time on every lab-up) with fixed timestamps, so the same inputs give
// the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    map[string]string `json:"platform,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lab-image:", err)
		os.Exit(1)
	}
}

func run() error {
	ref := flag.String("ref", "", "image references, comma-separated (one image, several tags), e.g. ghcr.io/kubectl-traceflow/lab-workload:v1")
	out := flag.String("o", "", "output archive")
	entry := flag.String("entrypoint", "", "entrypoint path inside the image")
	flag.Parse()
	if *ref == "" || *out == "" || flag.NArg() == 0 {
		return errors.New("usage: lab-image -ref REF -o OUT.tar [-entrypoint /PATH] SRC=/DST [SRC=/DST]")
	}
	layer, err := buildLayer(flag.Args())
	if err != nil {
		return err
	}
	blobs := map[string][]byte{}
	add := func(b []byte) string {
		d := digest(b)
		blobs[d] = b
		return d
	}
	layerDigest := add(layer)
	cfg := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": entryOf(*entry), "Env": []string{"PATH=/usr/local/bin:/usr/bin:/bin"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	}
	cfgJSON, _ := json.Marshal(cfg)
	cfgDigest := add(cfgJSON)
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: cfgDigest, Size: int64(len(cfgJSON))},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: layerDigest, Size: int64(len(layer))}},
	}
	manJSON, _ := json.Marshal(manifest)
	manDigest := add(manJSON)
	var manifests []descriptor
	for _, r := range strings.Split(*ref, ",") {
		manifests = append(manifests, descriptor{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: manDigest, Size: int64(len(manJSON)),
			Annotations: map[string]string{"io.containerd.image.name": r, "org.opencontainers.image.ref.name": r[strings.LastIndex(r, ":")+1:]},
			Platform:    map[string]string{"architecture": "amd64", "os": "linux"},
		})
	}
	index := map[string]any{"schemaVersion": 2, "manifests": manifests}
	indexJSON, _ := json.Marshal(index)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := map[string][]byte{"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`), "index.json": indexJSON}
	for d, b := range blobs {
		files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] = b
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := writeFile(tw, n, files[n], 0o644); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, *out)
}

func entryOf(e string) []string {
	if e == "" {
		return nil
	}
	return []string{e}
}

// buildLayer puts each SRC file at DST, with its parent directories, plus
// the empty directories a container runtime expects to mount over.
func buildLayer(specs []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	mkdir := func(d string) error {
		var chain []string
		for ; d != "/" && d != "." && !dirs[d]; d = path.Dir(d) {
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			dirs[chain[i]] = true
			if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(chain[i], "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range []string{"/proc", "/sys", "/dev", "/etc", "/tmp", "/var/run"} {
		if err := mkdir(d); err != nil {
			return nil, err
		}
	}
	for _, s := range specs {
		src, dst, ok := strings.Cut(s, "=")
		if !ok || !path.IsAbs(dst) {
			return nil, fmt.Errorf("bad file spec %q: want SRC=/DST", s)
		}
		b, err := os.ReadFile(src) //nolint:gosec // the files to put in the image are the point
		if err != nil {
			return nil, err
		}
		if err := mkdir(path.Dir(dst)); err != nil {
			return nil, err
		}
		if err := writeFile(tw, strings.TrimPrefix(dst, "/"), b, 0o755); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(tw *tar.Writer, name string, b []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := tw.Write(b)
	return err
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}
