//go:build tools

// Package k8sbuild pins the Kubernetes components the lab runs. It is a
// scratch module of its own so that the project's go.mod does not inherit
// kubernetes' dependency graph; `go build` of the packages below produces the
// lab's binaries.
package k8sbuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
