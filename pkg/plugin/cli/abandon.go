package cli

import (
	"slices"
	"sync"
)

// abandoner keeps the cleanup that a second Ctrl-C starts (Deps.Abandon)
// up to date with what is running: one trace, or a check run's traces and
// its shared helpers, each named as `cleanup --trace` knows them.
type abandoner struct {
	mu  sync.Mutex
	set func([]string)
	// tail follows the --trace flags: namespace, timeout, kubeconfig.
	tail  []string
	names map[string]int
}

func newAbandoner(set func([]string), tail []string) *abandoner {
	return &abandoner{set: set, tail: tail, names: map[string]int{}}
}

// Add counts name as running until the returned func is called.
func (a *abandoner) Add(name string) (done func()) {
	a.mu.Lock()
	a.names[name]++
	a.update()
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.names[name]--; a.names[name] <= 0 {
				delete(a.names, name)
			}
			a.update()
		})
	}
}

// update hands Abandon the cleanup of everything running, or nil when
// nothing is; a.mu is held.
func (a *abandoner) update() {
	if len(a.names) == 0 {
		a.set(nil)
		return
	}
	args := []string{"cleanup", "--force"}
	names := make([]string, 0, len(a.names))
	for n := range a.names {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		args = append(args, "--trace", n)
	}
	a.set(append(args, a.tail...))
}
