package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// soak sends HTTP GETs to URL one after the other, each on a connection of
// its own (a new source port, a new conntrack entry), until stdin ends: a
// loop of real connections beside something under test (traces). Its
// result line counts them and says how many failed and how long the
// slowest took (a SYN the kernel had to send again takes a second more);
// it is served (exit 0) only if none failed. Each failure (the first
// maxFailureLines) has a line of its own before it, saying when its request
// started.
func soak(args []string, stdin io.Reader) int {
	fs, timeout := clientFlags("soak")
	every := fs.Duration("every", 20*time.Millisecond, "start a request at most this often (a steady load, not a flood)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: workload soak [-timeout D] [-every D] URL   (until standard input ends)")
		return 1
	}
	pace := time.NewTicker(*every)
	defer pace.Stop()
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(stop)
	}()
	start := time.Now()
	c := &http.Client{Timeout: *timeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	count, failures := 0, 0
	var slowest time.Duration
	var firstErr error
	for {
		select {
		case <-pace.C:
		case <-stop:
			line := fmt.Sprintf("result=%s proto=tcp dst=%s time=%s count=%d failures=%d slowest=%s",
				soakOutcome(failures, firstErr), fs.Arg(0), time.Since(start).Round(time.Millisecond), count, failures, slowest.Round(time.Millisecond))
			if firstErr != nil {
				line += " error=" + strconv.Quote(firstErr.Error())
			}
			fmt.Println(line)
			return soakOutcome(failures, firstErr).exitCode()
		}
		t := time.Now()
		resp, err := c.Get(fs.Arg(0))
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		slowest = max(slowest, time.Since(t))
		count++
		if count == 1 {
			// Whoever runs something beside the loop starts on this line.
			fmt.Println("soak started")
		}
		if err != nil {
			failures++
			if firstErr == nil {
				firstErr = err
			}
			if failures <= maxFailureLines {
				// When it went, to be set beside what ran meanwhile.
				fmt.Printf("failure at=%s took=%s error=%q\n", t.Format(stampFormat), time.Since(t).Round(time.Millisecond), err.Error())
			}
		}
	}
}

// maxFailureLines bounds the failure lines a soak prints.
const maxFailureLines = 20

// stampFormat is the wall-clock time a soak's failure line gives (the e2e
// tests log their traces' times so: soakStamp).
const stampFormat = "15:04:05.000"

// soakOutcome is served if nothing failed, else what the first failure met.
func soakOutcome(failures int, first error) Outcome {
	if failures == 0 {
		return Served
	}
	if o, ok := classify(first); ok && o != Served {
		return o
	}
	return TimedOut
}
