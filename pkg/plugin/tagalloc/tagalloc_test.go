package tagalloc

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func newAlloc(cs *fake.Clientset, now time.Time) *Allocator {
	return &Allocator{Leases: cs.CoordinationV1().Leases("kube-system"), Now: func() time.Time { return now }}
}

func TestPoolIsAntreasExperimentalRange(t *testing.T) {
	p := Pool()
	if len(p) != 14 || p[0] != 7 || p[len(p)-1] != 59 {
		t.Fatalf("pool %v", p)
	}
	for _, tag := range p {
		if tag&0b11 != 0b11 || tag > 63 {
			t.Errorf("tag %d is not a local-use DSCP (xxxx11)", tag)
		}
	}
}

func TestAcquireDistinctUntilExhausted(t *testing.T) {
	a := newAlloc(fake.NewClientset(), t0)
	seen := map[uint8]bool{}
	for range Pool() {
		c, err := a.Acquire(context.Background(), "tf", 30*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.Tag] {
			t.Fatalf("tag %d handed out twice", c.Tag)
		}
		seen[c.Tag] = true
	}
	if _, err := a.Acquire(context.Background(), "tf", 30*time.Second, nil); !errors.Is(err, ErrExhausted) {
		t.Fatalf("want ErrExhausted, got %v", err)
	}
}

func TestAcquireSkipsTagsInUseElsewhere(t *testing.T) {
	a := newAlloc(fake.NewClientset(), t0)
	c, err := a.Acquire(context.Background(), "tf", time.Minute, map[uint8]bool{7: true, 11: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Tag != 15 {
		t.Fatalf("got tag %d, want 15 (7 and 11 are Antrea's)", c.Tag)
	}
}

func TestExpiredClaimIsTakenOverLiveOneIsNot(t *testing.T) {
	cs := fake.NewClientset()
	old := newAlloc(cs, t0)
	if _, err := old.Acquire(context.Background(), "killed-plugin", 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	// 5 s later the claim still holds: the next trace gets another tag.
	c, err := newAlloc(cs, t0.Add(5*time.Second)).Acquire(context.Background(), "tf2", 10*time.Second, nil)
	if err != nil || c.Tag == 7 {
		t.Fatalf("live claim taken over: tag %v err %v", c, err)
	}
	// 11 s later it has expired: tag 7 is free again.
	c, err = newAlloc(cs, t0.Add(11*time.Second)).Acquire(context.Background(), "tf3", 10*time.Second, nil)
	if err != nil || c.Tag != 7 {
		t.Fatalf("expired claim not taken over: %v %v", c, err)
	}
	l, err := cs.CoordinationV1().Leases("kube-system").Get(context.Background(), LeaseName(7), metav1.GetOptions{})
	if err != nil || *l.Spec.HolderIdentity != "tf3" {
		t.Fatalf("lease holder after takeover: %v %v", l, err)
	}
}

func TestTakeoverConflictMovesOn(t *testing.T) {
	cs := fake.NewClientset()
	if _, err := newAlloc(cs, t0).Acquire(context.Background(), "old", time.Second, nil); err != nil {
		t.Fatal(err)
	}
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, LeaseName(7), errors.New("raced"))
	})
	c, err := newAlloc(cs, t0.Add(time.Minute)).Acquire(context.Background(), "new", time.Minute, nil)
	if err != nil || c.Tag != 11 {
		t.Fatalf("after losing the race for 7 want 11, got %v %v", c, err)
	}
}

func TestReleaseFreesTheTag(t *testing.T) {
	cs := fake.NewClientset()
	a := newAlloc(cs, t0)
	c, err := a.Acquire(context.Background(), "tf", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	c2, err := a.Acquire(context.Background(), "tf2", time.Minute, nil)
	if err != nil || c2.Tag != c.Tag {
		t.Fatalf("released tag %d not reused: %v %v", c.Tag, c2, err)
	}
	// Releasing twice is harmless.
	if err := c.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentAcquireGivesDistinctTags(t *testing.T) {
	a := newAlloc(fake.NewClientset(), t0)
	var mu sync.Mutex
	got := map[uint8]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c, err := a.Acquire(context.Background(), "tf", time.Minute, nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got[c.Tag]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != 8 {
		t.Fatalf("8 concurrent traces got tags %v", got)
	}
}

func TestAPIErrorIsReturned(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New("no"))
	})
	_, err := newAlloc(cs, t0).Acquire(context.Background(), "tf", time.Minute, nil)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want the Forbidden error wrapped, got %v", err)
	}
}
