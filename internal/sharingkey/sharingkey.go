// Package sharingkey is the MetalLB sharing keys the driver gives an
// address's holders: how they derive (Keys), and the secret they derive
// from, for a controller's whole life: where it is read at start (Load),
// the Keyring the controllers derive with, and the watch that keeps the
// Secret and the Keyring in step while they run (Watch).
package sharingkey

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Field is the data key of the sharing-key Secret.
const Field = "key"

// minSecret is the shortest secret the driver accepts, in bytes.
const minSecret = 16

// The sharing secret comes from one of two places:
//   - --sharing-key-secret: a Secret the controllers read at start-up and,
//     with --sharing-key-create, create with a random key when it is missing.
//     The driver, not the chart, makes the key, so rendering the chart again
//     (helm template, a GitOps sync) never changes it, and uninstalling the
//     chart leaves it in place. While they run the controllers watch it
//     (Watch): deleted, it comes back with the key they hold; replaced,
//     they all follow the new key;
//   - --sharing-key-file: a file, for running the binaries by hand.

// sharingSecretRef splits --sharing-key-secret ("name" or "namespace/name");
// a bare name lives in defaultNS.
func secretRef(ref, defaultNS string) (client.ObjectKey, error) {
	ns, name, found := strings.Cut(ref, "/")
	if !found {
		ns, name = defaultNS, ref
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, fmt.Errorf("--sharing-key-secret=%q: want NAME or NAMESPACE/NAME", ref)
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}

// checkSecret trims the secret and refuses a short one; source names
// where it came from in the error.
func checkSecret(b []byte, source string) ([]byte, error) {
	b = bytes.TrimSpace(b)
	if len(b) < minSecret {
		return nil, fmt.Errorf("the sharing key in %s holds %d bytes; it needs at least %d", source, len(b), minSecret)
	}
	return b, nil
}

// newSecret is a Secret holding a fresh random key.
func newSecret(key client.ObjectKey) (*corev1.Secret, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	return secretOf(key, []byte(hex.EncodeToString(raw))), nil
}

// secretOf is the Secret key holding secret.
func secretOf(key client.ObjectKey, secret []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{"app.kubernetes.io/part-of": "metallb-iad"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{Field: secret},
	}
}

// Ensure reads the sharing secret from the Secret key and, when
// create is set and the Secret does not exist, creates it with a random key.
// Replicas starting together agree: one create wins, the others read it.
func Ensure(ctx context.Context, c client.Client, key client.ObjectKey, create bool) ([]byte, error) {
	source := fmt.Sprintf("Secret %s", key)
	for attempt := 0; ; attempt++ {
		s := &corev1.Secret{}
		err := c.Get(ctx, key, s)
		switch {
		case err == nil:
			return checkSecret(s.Data[Field], fmt.Sprintf("%s (field %q)", source, Field))
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("cannot read the sharing key %s: %w", source, err)
		case !create:
			return nil, fmt.Errorf("the sharing key %s does not exist: create it with a field %q of at least %d bytes, or let the driver create it (--sharing-key-create)", source, Field, minSecret)
		case attempt > 0:
			return nil, fmt.Errorf("the sharing key %s was created but cannot be read", source)
		}
		fresh, err := newSecret(key)
		if err != nil {
			return nil, err
		}
		err = c.Create(ctx, fresh)
		if err == nil {
			return fresh.Data[Field], nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("cannot create the sharing key %s: %w", source, err)
		}
		// Another replica or controller created it first: read theirs.
	}
}

// Loaded is the secret a controller read at start: its Keyring, the bytes
// and, when it came from a Secret, the Secret (which Watch follows).
type Loaded struct {
	Keys   *Keyring
	Secret []byte
	Ref    client.ObjectKey
}

// Load reads the secret of the sharing keys from the Secret secretRef
// (--sharing-key-secret: NAME in defaultNS, or NAMESPACE/NAME; created with
// a random key when missing and create is set) or from file
// (--sharing-key-file); with neither the keys have no secret.
func Load(ctx context.Context, cfg *rest.Config, secretRefFlag, file, defaultNS string, create bool) (Loaded, error) {
	switch {
	case secretRefFlag != "" && file != "":
		return Loaded{}, fmt.Errorf("--sharing-key-secret and --sharing-key-file are exclusive")
	case secretRefFlag != "":
		key, err := secretRef(secretRefFlag, defaultNS)
		if err != nil {
			return Loaded{}, err
		}
		c, err := client.New(cfg, client.Options{})
		if err != nil {
			return Loaded{}, err
		}
		b, err := Ensure(ctx, c, key, create)
		if err != nil {
			return Loaded{}, err
		}
		return Loaded{Keys: New(NewKeys(b)), Secret: b, Ref: key}, nil
	case file != "":
		raw, err := os.ReadFile(file)
		if err != nil {
			return Loaded{}, fmt.Errorf("cannot read the sharing key file: %w", err)
		}
		b, err := checkSecret(raw, "file "+file)
		if err != nil {
			return Loaded{}, err
		}
		return Loaded{Keys: New(NewKeys(b)), Secret: b}, nil
	}
	return Loaded{}, nil
}

// CacheOptions narrow a manager's cache of Secrets to the one Secret the
// watch follows; ok is false when the secret came from no Secret.
func (l Loaded) CacheOptions() (opts crcache.ByObject, ok bool) {
	if l.Ref.Name == "" {
		return crcache.ByObject{}, false
	}
	return crcache.ByObject{
		Namespaces: map[string]crcache.Config{l.Ref.Namespace: {}},
		Field:      fields.OneTermEqualSelector("metadata.name", l.Ref.Name),
	}, true
}

// Watch returns the watch of the Secret l came from (nil: none), reading
// it through cache and writing it with writer.
func (l Loaded) Watch(create bool, cache crcache.Cache, writer client.Client, log logr.Logger) *Watch {
	if l.Ref.Name == "" {
		return nil
	}
	return &Watch{ref: l.Ref, create: create, keys: l.Keys, held: l.Secret, cache: cache, writer: writer, log: log}
}

// Watch keeps a running controller on the sharing-key Secret, so that
// the controllers never derive with two secrets for longer than it takes a
// watch event to arrive:
//   - the Secret deleted (by hand, or with its namespace) is created again
//     with the secret the controller holds, so nothing is re-keyed and a
//     controller starting next reads the same one (with --sharing-key-create;
//     without it the controller keeps its secret and is not ready);
//   - the Secret's key replaced (a rotation) is followed: the Keyring takes
//     it, and the controllers look again at what carries a key
//     (Keyring.Rotations; marks.PairKey says what is re-stamped when);
//   - a Secret that cannot be read or holds a bad key leaves the secret as it
//     was and makes the controller not ready (/readyz): it never invents one.
type Watch struct {
	ref    client.ObjectKey
	create bool
	keys   *Keyring
	// held is the secret keys hold.
	held []byte
	// cache holds the one Secret (NewManager narrows it by name); writer
	// writes to the API server.
	cache  crcache.Cache
	writer client.Client
	log    logr.Logger
	// problem says why the controller is not ready; nil when it is.
	problem atomic.Pointer[string]
}

// NeedLeaderElection is false: a standby keeps its secret current too, so
// it derives the same keys the moment it takes over.
func (w *Watch) NeedLeaderElection() bool { return false }

// Start runs a check at start, on every event of the Secret, and every
// minute (a failed create or read is tried again).
func (w *Watch) Start(ctx context.Context) error {
	inf, err := w.cache.GetInformer(ctx, &corev1.Secret{})
	if ctx.Err() != nil {
		return nil // the manager is stopping
	}
	if err != nil {
		return fmt.Errorf("cannot watch the sharing key Secret %s: %w", w.ref, err)
	}
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		w.check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-tick.C:
		}
	}
}

// check compares the Secret with the secret held and acts (Watch).
func (w *Watch) check(ctx context.Context) {
	s := &corev1.Secret{}
	err := w.cache.Get(ctx, w.ref, s)
	switch {
	case apierrors.IsNotFound(err) && !w.create:
		w.fail(fmt.Sprintf("the sharing key Secret %s does not exist; the controller goes on with the key it read and creates none (--sharing-key-create=false): create it again with that key", w.ref))
	case apierrors.IsNotFound(err):
		err := w.writer.Create(ctx, secretOf(w.ref, w.held))
		switch {
		case err == nil:
			w.log.Info("the sharing key Secret was deleted: created it again with the key the controllers hold", "secret", w.ref)
			w.ok()
		case apierrors.IsAlreadyExists(err):
			// Another controller was first: its event brings the Secret.
		default:
			w.fail(fmt.Sprintf("the sharing key Secret %s was deleted and cannot be created again: %v; the controller goes on with the key it holds", w.ref, err))
		}
	case err != nil:
		w.fail(fmt.Sprintf("cannot read the sharing key Secret %s: %v", w.ref, err))
	default:
		b, err := checkSecret(s.Data[Field], fmt.Sprintf("Secret %s (field %q)", w.ref, Field))
		if err != nil {
			w.fail(err.Error() + "; the controller goes on with the key it holds")
			return
		}
		if !bytes.Equal(b, w.held) {
			w.held = b
			w.keys.Set(NewKeys(b))
			w.log.Info("the sharing key rotated: holds alone on their address are re-stamped, and attachments share under the new key from now on", "secret", w.ref)
		}
		w.ok()
	}
}

func (w *Watch) fail(why string) {
	if old := w.problem.Swap(&why); old == nil || *old != why {
		w.log.Error(nil, why)
	}
}

func (w *Watch) ok() {
	if old := w.problem.Swap(nil); old != nil {
		w.log.Info("the sharing key Secret is back in order", "secret", w.ref)
	}
}

// Ready is the /readyz check of the sharing key.
func (w *Watch) Ready(*http.Request) error {
	if p := w.problem.Load(); p != nil {
		return errors.New(*p)
	}
	return nil
}
