package bootstrap

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

func TestWarmStandby(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--warm-standby"}, true},
	} {
		o := &Options{}
		fs := flag.NewFlagSet("controller", flag.ContinueOnError)
		o.bindFlags(fs)
		require.NoError(t, fs.Parse(append(tc.args, "--metrics-bind-address=0", "--health-probe-bind-address=0")))
		mgr, err := NewManager(&rest.Config{Host: "http://127.0.0.1:1"}, o, nil)
		require.NoError(t, err)
		warmup := mgr.GetControllerOptions().EnableWarmup
		assert.Equal(t, tc.want, warmup != nil && *warmup, "%v: a standby starts its watches", tc.args)
	}
}
