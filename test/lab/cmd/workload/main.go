// Command workload is the lab's test workload and its client, one static
// binary so that pods need no shell, wget or curl (busybox's wget crashes in
// this lab's pods).
//
//	workload [serve] [-log-every D]  HTTP on TCP 80 and 8080, UDP echo on 5000
//	workload get [-timeout D] URL              HTTP GET, print the body
//	workload udp [-timeout D] HOST:PORT MSG    send MSG, print the echo
//	workload ping [-timeout D] IP              one ICMP echo request
//	workload soak [-timeout D] [-every D] URL  HTTP GETs, each on a new connection, until stdin ends
//	workload ovs-ports [DB_SOCKET]             list this node's OVS bridges and ports (JSON)
//
// The clients (get, udp, ping) end with one line `result=served|refused|timed-out
// proto=P dst=D time=T [error="..."]` and exit 0 (served), 2 (refused: a TCP
// RST or an ICMP destination unreachable), 3 (timed-out) or 1 (usage or an
// error that says nothing about the network). e2e tests use them as the
// oracle for a trace's verdict.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/test/lab/ovsjson"
)

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(args)
	case "get":
		os.Exit(get(args))
	case "udp":
		os.Exit(udp(args))
	case "ping":
		os.Exit(ping(args))
	case "soak":
		os.Exit(soak(args, os.Stdin))
	case "ovs-ports":
		err = ovsPorts(args)
	default:
		err = fmt.Errorf("unknown command %q (serve, get, udp, ping, soak, ovs-ports)", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		os.Exit(1)
	}
}

func identity() string {
	if p := os.Getenv("POD_NAME"); p != "" {
		return p
	}
	h, _ := os.Hostname()
	return h
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	every := fs.Duration("log-every", 0, "print a numbered line at this interval (for kubectl logs -f)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	errc := make(chan error, 3)
	for _, port := range []int{80, 8080} {
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Printf("http %d %s from %s\n", port, r.URL.Path, r.RemoteAddr)
			_, _ = fmt.Fprintf(w, "%s port %d\n", identity(), port)
		})
		srv := &http.Server{Addr: fmt.Sprintf(":%d", port), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- srv.ListenAndServe() }()
	}
	go func() { errc <- udpEcho(":5000") }()
	if *every > 0 {
		go func() {
			for i := 1; ; i++ {
				fmt.Printf("tick %d\n", i)
				time.Sleep(*every)
			}
		}()
	}
	fmt.Printf("%s serving http on 80, 8080 and udp echo on 5000\n", identity())
	return <-errc
}

func udpEcho(addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		_, _ = pc.WriteTo(buf[:n], from)
	}
}

// ovsPorts asks OVSDB (JSON-RPC over the unix socket) for the bridges and
// ports, so that a hostNetwork pod shows which node's OVS it reaches.
func ovsPorts(args []string) error {
	sock := "/var/run/openvswitch/db.sock"
	if len(args) > 0 {
		sock = args[0]
	}
	c, err := net.DialTimeout("unix", sock, 3*time.Second) //nolint:gosec // the OVSDB socket it is given
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	req := map[string]any{
		"id":     1,
		"method": "transact",
		"params": []any{"Open_vSwitch",
			map[string]any{"op": "select", "table": "Bridge", "where": []any{}, "columns": []string{"name"}},
			map[string]any{"op": "select", "table": "Port", "where": []any{}, "columns": []string{"name", "external_ids"}},
			map[string]any{"op": "select", "table": "Interface", "where": []any{}, "columns": []string{"name", "external_ids"}},
		},
	}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return err
	}
	var resp struct {
		Result []struct {
			Rows []struct {
				Name        string          `json:"name"`
				ExternalIDs json.RawMessage `json:"external_ids"`
			} `json:"rows"`
		} `json:"result"`
		Error any `json:"error"`
	}
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return err
	}
	if resp.Error != nil || len(resp.Result) != 3 {
		return fmt.Errorf("ovsdb error: %v", resp.Error)
	}
	type port struct {
		Name         string `json:"name"`
		PodName      string `json:"podName,omitempty"`
		PodNamespace string `json:"podNamespace,omitempty"`
	}
	out := struct {
		Bridges []string `json:"bridges"`
		Ports   []port   `json:"ports"`
	}{}
	for _, b := range resp.Result[0].Rows {
		out.Bridges = append(out.Bridges, b.Name)
	}
	// OVN-Kubernetes names a pod's port on its Interface: iface-id
	// NAMESPACE_POD (neither name may hold '_'); Antrea on the Port.
	ifaceID := map[string]string{}
	for _, i := range resp.Result[2].Rows {
		ifaceID[i.Name] = ovsjson.Map(i.ExternalIDs)["iface-id"]
	}
	for _, p := range resp.Result[1].Rows {
		ids := ovsjson.Map(p.ExternalIDs)
		pp := port{Name: p.Name, PodName: ids["pod-name"], PodNamespace: ids["pod-namespace"]}
		if ns, name, ok := strings.Cut(ifaceID[p.Name], "_"); ok && pp.PodName == "" {
			pp.PodNamespace, pp.PodName = ns, name
		}
		out.Ports = append(out.Ports, pp)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
