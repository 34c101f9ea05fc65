package bootstrap

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
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/marks"
)

// SharingKeyField is the data key of the sharing-key Secret.
const SharingKeyField = "key"

// minSharingSecret is the shortest secret the driver accepts, in bytes.
const minSharingSecret = 16

// The sharing secret comes from one of two places:
//   - --sharing-key-secret: a Secret the controllers read at start-up and,
//     with --sharing-key-create, create with a random key when it is missing.
//     The driver, not the chart, makes the key, so rendering the chart again
//     (helm template, a GitOps sync) never changes it, and uninstalling the
//     chart leaves it in place. While they run the controllers watch it
//     (keyWatch): deleted, it comes back with the key they hold; replaced,
//     they all follow the new key;
//   - --sharing-key-file: a file, for running the binaries by hand.

// sharingSecretRef splits --sharing-key-secret ("name" or "namespace/name");
// a bare name lives in defaultNS.
func sharingSecretRef(ref, defaultNS string) (client.ObjectKey, error) {
	ns, name, found := strings.Cut(ref, "/")
	if !found {
		ns, name = defaultNS, ref
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, fmt.Errorf("--sharing-key-secret=%q: want NAME or NAMESPACE/NAME", ref)
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}

// checkSharingSecret trims the secret and refuses a short one; source names
// where it came from in the error.
func checkSharingSecret(b []byte, source string) ([]byte, error) {
	b = bytes.TrimSpace(b)
	if len(b) < minSharingSecret {
		return nil, fmt.Errorf("the sharing key in %s holds %d bytes; it needs at least %d", source, len(b), minSharingSecret)
	}
	return b, nil
}

// newSharingSecret is a Secret holding a fresh random key.
func newSharingSecret(key client.ObjectKey) (*corev1.Secret, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	return sharingSecret(key, []byte(hex.EncodeToString(raw))), nil
}

// sharingSecret is the Secret key holding secret.
func sharingSecret(key client.ObjectKey, secret []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{"app.kubernetes.io/part-of": "metallb-iad"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SharingKeyField: secret},
	}
}

// EnsureSharingSecret reads the sharing secret from the Secret key and, when
// create is set and the Secret does not exist, creates it with a random key.
// Replicas starting together agree: one create wins, the others read it.
func EnsureSharingSecret(ctx context.Context, c client.Client, key client.ObjectKey, create bool) ([]byte, error) {
	source := fmt.Sprintf("Secret %s", key)
	for attempt := 0; ; attempt++ {
		s := &corev1.Secret{}
		err := c.Get(ctx, key, s)
		switch {
		case err == nil:
			return checkSharingSecret(s.Data[SharingKeyField], fmt.Sprintf("%s (field %q)", source, SharingKeyField))
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("cannot read the sharing key %s: %w", source, err)
		case !create:
			return nil, fmt.Errorf("the sharing key %s does not exist: create it with a field %q of at least %d bytes, or let the driver create it (--sharing-key-create)", source, SharingKeyField, minSharingSecret)
		case attempt > 0:
			return nil, fmt.Errorf("the sharing key %s was created but cannot be read", source)
		}
		fresh, err := newSharingSecret(key)
		if err != nil {
			return nil, err
		}
		err = c.Create(ctx, fresh)
		if err == nil {
			return fresh.Data[SharingKeyField], nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("cannot create the sharing key %s: %w", source, err)
		}
		// Another replica or controller created it first: read theirs.
	}
}

// loadSharingSecret loads the secret of the sharing keys (Deps.Keys) from
// --sharing-key-secret or --sharing-key-file; with neither the keys have
// no secret.
func (o *Options) loadSharingSecret(ctx context.Context, cfg *rest.Config) error {
	switch {
	case o.SharingKeySecret != "" && o.SharingKeyFile != "":
		return fmt.Errorf("--sharing-key-secret and --sharing-key-file are exclusive")
	case o.SharingKeySecret != "":
		key, err := sharingSecretRef(o.SharingKeySecret, o.LeaderElectionNS)
		if err != nil {
			return err
		}
		c, err := client.New(cfg, client.Options{})
		if err != nil {
			return err
		}
		b, err := EnsureSharingSecret(ctx, c, key, o.SharingKeyCreate)
		if err != nil {
			return err
		}
		o.secret, o.secretRef = b, key
		o.keys = newKeyring(marks.NewKeys(b))
	case o.SharingKeyFile != "":
		raw, err := os.ReadFile(o.SharingKeyFile)
		if err != nil {
			return fmt.Errorf("cannot read the sharing key file: %w", err)
		}
		b, err := checkSharingSecret(raw, "file "+o.SharingKeyFile)
		if err != nil {
			return err
		}
		o.keys = newKeyring(marks.NewKeys(b))
	}
	return nil
}

// keyWatch keeps a running controller on the sharing-key Secret, so that
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
type keyWatch struct {
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
func (w *keyWatch) NeedLeaderElection() bool { return false }

// Start runs a check at start, on every event of the Secret, and every
// minute (a failed create or read is tried again).
func (w *keyWatch) Start(ctx context.Context) error {
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

// check compares the Secret with the secret held and acts (keyWatch).
func (w *keyWatch) check(ctx context.Context) {
	s := &corev1.Secret{}
	err := w.cache.Get(ctx, w.ref, s)
	switch {
	case apierrors.IsNotFound(err) && !w.create:
		w.fail(fmt.Sprintf("the sharing key Secret %s does not exist; the controller goes on with the key it read and creates none (--sharing-key-create=false): create it again with that key", w.ref))
	case apierrors.IsNotFound(err):
		err := w.writer.Create(ctx, sharingSecret(w.ref, w.held))
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
		b, err := checkSharingSecret(s.Data[SharingKeyField], fmt.Sprintf("Secret %s (field %q)", w.ref, SharingKeyField))
		if err != nil {
			w.fail(err.Error() + "; the controller goes on with the key it holds")
			return
		}
		if !bytes.Equal(b, w.held) {
			w.held = b
			w.keys.Set(marks.NewKeys(b))
			w.log.Info("the sharing key rotated: holds alone on their address are re-stamped, and attachments share under the new key from now on", "secret", w.ref)
		}
		w.ok()
	}
}

func (w *keyWatch) fail(why string) {
	if old := w.problem.Swap(&why); old == nil || *old != why {
		w.log.Error(nil, why)
	}
}

func (w *keyWatch) ok() {
	if old := w.problem.Swap(nil); old != nil {
		w.log.Info("the sharing key Secret is back in order", "secret", w.ref)
	}
}

// ready is the /readyz check of the sharing key.
func (w *keyWatch) ready(*http.Request) error {
	if p := w.problem.Load(); p != nil {
		return errors.New(*p)
	}
	return nil
}
