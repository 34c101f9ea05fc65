package bootstrap

import (
	"bytes"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// valueCounter counts the values it was given, beside a real zap sink.
type valueCounter struct {
	logr.LogSink
	given *int
}

func (c valueCounter) WithValues(kv ...any) logr.LogSink {
	*c.given += len(kv)
	return valueCounter{LogSink: c.LogSink.WithValues(kv...), given: c.given}
}

func (c valueCounter) WithName(name string) logr.LogSink {
	return valueCounter{LogSink: c.LogSink.WithName(name), given: c.given}
}

func newZap(buf *bytes.Buffer) logr.Logger {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg", NameKey: "logger", LevelKey: "level", EncodeLevel: zapcore.LowercaseLevelEncoder})
	return zapr.NewLogger(zap.New(zapcore.NewCore(enc, zapcore.AddSync(buf), zapcore.InfoLevel)))
}

func TestDeferredValues(t *testing.T) {
	var plain, deferred bytes.Buffer
	given := 0
	z := newZap(&deferred)
	l := deferValues(logr.New(valueCounter{LogSink: z.GetSink(), given: &given}))

	write := func(l logr.Logger) {
		pass := l.WithName("claim").WithValues("controller", "claim", "IPAddressClaim", "t/web")
		pass.V(1).Info("not written")
		assert.Zero(t, given, "no value is given to zap before a line")
		pass.Info("created allocation placeholder", "placeholder", "p-1")
		pass.WithValues("phase", "draw").Error(errors.New("boom"), "failed", "attempt", 2)
	}
	write(newZap(&plain))
	write(l)
	assert.Equal(t, plain.String(), deferred.String(), "the same lines as without it")
	assert.Equal(t, 4+6, given, "values given only for the two lines written")

	base := l.WithValues("a", 1)
	one, two := base.WithValues("b", 2), base.WithValues("c", 3)
	deferred.Reset()
	one.Info("x")
	two.Info("y")
	assert.Equal(t, `{"level":"info","msg":"x","a":1,"b":2}`+"\n"+`{"level":"info","msg":"y","a":1,"c":3}`+"\n", deferred.String(),
		"loggers made from one logger keep their own values")
}
