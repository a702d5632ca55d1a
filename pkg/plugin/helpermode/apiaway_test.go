package helpermode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestWhileAwayRetriesOnlyWhileTheServerIsAway(t *testing.T) {
	refused := fmt.Errorf("delete pods: %w", syscall.ECONNREFUSED)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("no"))
	for _, tc := range []struct {
		name  string
		errs  []error // what each call returns; the last repeats
		calls int
		want  error
	}{
		{"answered at once", []error{nil}, 1, nil},
		{"refused twice, then served", []error{refused, apierrors.NewServiceUnavailable("shutting down"), nil}, 3, nil},
		{"an answer is not retried", []error{forbidden}, 1, forbidden},
		{"a broken stream", []error{io.ErrUnexpectedEOF, nil}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := whileAway(context.Background(), func(context.Context) error {
				e := tc.errs[min(calls, len(tc.errs)-1)]
				calls++
				return e
			})
			if calls != tc.calls || !errors.Is(err, tc.want) {
				t.Errorf("%d calls, %v; want %d, %v", calls, err, tc.calls, tc.want)
			}
		})
	}
	// Away for good: it gives up when its budget ends, with the error.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := whileAway(ctx, func(context.Context) error { return refused }); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("away for good: %v", err)
	}
}
