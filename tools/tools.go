//go:build tools

package tools

import (
	_ "antrea.io/libOpenflow/openflow15"
	_ "github.com/charmbracelet/lipgloss"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/gopacket/gopacket"
	_ "github.com/ovn-kubernetes/libovsdb/client"
	_ "github.com/spf13/cobra"
	_ "go.uber.org/goleak"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/cli-runtime/pkg/genericclioptions"
	_ "k8s.io/client-go/dynamic/fake"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "sigs.k8s.io/yaml"
)
