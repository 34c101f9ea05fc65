package bootstrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
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
//     chart leaves it in place;
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
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{"app.kubernetes.io/part-of": "metallb-iad"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SharingKeyField: []byte(hex.EncodeToString(raw))},
	}, nil
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

// LoadSharingSecret loads the secret of the sharing keys (Deps.Keys) from
// --sharing-key-secret or --sharing-key-file; with neither the keys have
// no secret.
func (o *Options) LoadSharingSecret(ctx context.Context, cfg *rest.Config) error {
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
		o.keys = marks.NewKeys(b)
	case o.SharingKeyFile != "":
		raw, err := os.ReadFile(o.SharingKeyFile)
		if err != nil {
			return fmt.Errorf("cannot read the sharing key file: %w", err)
		}
		b, err := checkSharingSecret(raw, "file "+o.SharingKeyFile)
		if err != nil {
			return err
		}
		o.keys = marks.NewKeys(b)
	}
	return nil
}
