package phase

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestRun(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "s", errors.New("changed"))
	step := func(r Result, err error) Phase[*[]string] {
		return Phase[*[]string]{Name: fmt.Sprint(r.State), Run: func(_ context.Context, ran *[]string) (Result, error) {
			*ran = append(*ran, r.State.String())
			return r, err
		}}
	}
	for _, tc := range []struct {
		name    string
		phases  []Phase[*[]string]
		want    ctrl.Result
		wantErr bool
		ran     int
	}{
		{"nothing left", []Phase[*[]string]{step(Next(), nil), step(Next(), nil)}, ctrl.Result{}, false, 2},
		{"the earliest requeue wins", []Phase[*[]string]{
			step(RetryAfter(3*time.Second, ""), nil), step(WaitFor("", time.Second), nil), step(WaitFor("", 0), nil),
		}, ctrl.Result{RequeueAfter: time.Second}, false, 3},
		{"a stop ends the pass", []Phase[*[]string]{
			step(RetryAfter(3*time.Second, ""), nil), step(Halt("", 5*time.Second), nil), step(RetryAfter(time.Second, ""), nil),
		}, ctrl.Result{RequeueAfter: 3 * time.Second}, false, 2},
		{"a conflict is requeued quietly", []Phase[*[]string]{step(Next(), conflict), step(Next(), nil)},
			ctrl.Result{RequeueAfter: ConflictRetry}, false, 1},
		{"another error goes to the backoff", []Phase[*[]string]{step(Next(), errors.New("boom")), step(Next(), nil)},
			ctrl.Result{}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			got, err := Run(context.Background(), &ran, tc.phases...)
			if (err != nil) != tc.wantErr || got != tc.want || len(ran) != tc.ran {
				t.Errorf("Run = %v, %v after %v; want %v, error %v after %d phases", got, err, ran, tc.want, tc.wantErr, tc.ran)
			}
		})
	}
}

func TestFold(t *testing.T) {
	step := func(r Result, err error) Phase[*[]string] {
		return Phase[*[]string]{Name: "step", Run: func(_ context.Context, ran *[]string) (Result, error) {
			*ran = append(*ran, r.State.String())
			return r, err
		}}
	}
	wait := WaitFor("the placeholder", time.Second)
	for _, tc := range []struct {
		name    string
		phases  []Phase[*[]string]
		want    Result
		wantErr bool
		ran     int
	}{
		{"nothing left", []Phase[*[]string]{step(Next(), nil), step(Next(), nil)}, Next(), false, 2},
		{"the first wait is reported, and the rest run", []Phase[*[]string]{step(Next(), nil), step(wait, nil), step(RetryAfter(time.Minute, ""), nil)}, wait, false, 3},
		{"a stop ends the fold", []Phase[*[]string]{step(Halt("x", 0), nil), step(Next(), nil)}, Halt("x", 0), false, 1},
		{"an error ends it, named", []Phase[*[]string]{step(Next(), errors.New("boom")), step(Next(), nil)}, Next(), true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			got, err := Fold(context.Background(), &ran, tc.phases...)
			if (err != nil) != tc.wantErr || got != tc.want || len(ran) != tc.ran {
				t.Errorf("Fold = %v, %v after %v; want %v, error %v after %d phases", got, err, ran, tc.want, tc.wantErr, tc.ran)
			}
			if err != nil && err.Error() != "step: boom" {
				t.Errorf("error %q does not name the phase", err)
			}
		})
	}
}

type named struct{}

func (named) admit(context.Context, *[]string) (Result, error) { return Next(), nil }

func TestOf(t *testing.T) {
	if got := Of((named{}).admit).Name; got != "admit" {
		t.Errorf("Of(admit).Name = %q", got)
	}
	p := &named{}
	if got := Of(p.admit).Name; got != "admit" {
		t.Errorf("Of(pointer admit).Name = %q", got)
	}
}

// pass is a controller's scope that embeds a room's own.
type pass struct {
	part []string
}

func (named) hold(_ context.Context, part *[]string) (Result, error) {
	*part = append(*part, "held")
	return WaitFor("MetalLB", 0), nil
}

func TestPart(t *testing.T) {
	p := Part(func(s *pass) *[]string { return &s.part }, (named{}).hold)
	if p.Name != "hold" {
		t.Errorf("Part(hold).Name = %q", p.Name)
	}
	s := &pass{}
	got, err := p.Run(context.Background(), s)
	if err != nil || got != WaitFor("MetalLB", 0) || len(s.part) != 1 || s.part[0] != "held" {
		t.Errorf("Part(hold).Run = %v, %v; part %v: the room's phase runs on the part, and its result is the pass's", got, err, s.part)
	}
}

func TestHaltFor(t *testing.T) {
	r := HaltFor("the cache", time.Second)
	if r.State != Stop || !r.waits || r.After != time.Second {
		t.Errorf("HaltFor = %+v", r)
	}
	if Halt("x", 0).waits {
		t.Error("Halt is not a wait")
	}
}

func TestFirst(t *testing.T) {
	wait, retry := WaitFor("MetalLB", 0), RetryAfter(time.Second, "a pause")
	for _, tc := range []struct {
		name    string
		results []Result
		want    Result
	}{
		{"none", nil, Next()},
		{"all done", []Result{Next(), Next()}, Next()},
		{"the first wait", []Result{Next(), wait, retry}, wait},
		{"a timed look counts", []Result{retry, wait}, retry},
	} {
		if got := First(tc.results...); got != tc.want {
			t.Errorf("%s: First = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if !wait.waits || retry.waits {
		t.Error("WaitFor is logged as a wait, RetryAfter is not")
	}
	if retry.State != Waiting {
		t.Error("a timed look lets the next phase run, as a wait does")
	}
}
