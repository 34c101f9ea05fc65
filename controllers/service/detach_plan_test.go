package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlanRelease(t *testing.T) {
	active := releaseFacts{Active: true, Release: "::", Mode: ModeGap}
	with := func(f releaseFacts, edit func(*releaseFacts)) releaseFacts { edit(&f); return f }
	byGrant := func(f *releaseFacts) { f.All, f.ByGrant, f.Release = true, true, "" }
	tests := []struct {
		name string
		f    releaseFacts
		want releaseStep
	}{
		{"nothing pinned: clear", releaseFacts{}, releaseClear},
		{"being deleted: clear, its deletion frees the addresses", releaseFacts{Deleting: true, LettingGo: true}, releaseClear},
		{"let go in one write, MetalLB still shows it: wait", releaseFacts{LettingGo: true}, releaseWait},

		{"gap, release pin not written yet: write it", active, releaseWrite},
		{"shared, not started: hand back first", with(active, func(f *releaseFacts) { f.Mode = ModeShared }), releaseHandBack},
		{"started, the Service still holds: wait", with(active, func(f *releaseFacts) { f.Started, f.Holds = true, true }), releaseWait},
		{"started, MetalLB let go: clear", with(active, func(f *releaseFacts) { f.Started = true }), releaseClear},
		{"started, let go in one write still shown: wait", with(active, func(f *releaseFacts) { f.Started, f.LettingGo = true, true }), releaseWait},

		{"by grant, everything, gap: one write", with(active, byGrant), releaseLetGo},
		{"by grant, everything, shared beside a placeholder: one write", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.Mode, f.HeldBeside = ModeShared, true
		}), releaseLetGo},
		{"by grant, shared, no placeholder beside yet: hand back", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.Mode = ModeShared
		}), releaseHandBack},
		{"by grant but still asks for the claim: two writes", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.Asks = true
		}), releaseWrite},
		{"by grant, only the stale addresses: two writes", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.All = false
		}), releaseWrite},
		{"by grant, already started: wait while held", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.Started, f.Holds = true, true
		}), releaseWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, planRelease(tt.f))
		})
	}
}

func TestOneWriteCandidate(t *testing.T) {
	f := releaseFacts{All: true, ByGrant: true}
	assert.True(t, f.oneWriteCandidate())
	for name, edit := range map[string]func(*releaseFacts){
		"started":    func(f *releaseFacts) { f.Started = true },
		"not all":    func(f *releaseFacts) { f.All = false },
		"by pin":     func(f *releaseFacts) { f.ByGrant = false },
		"still asks": func(f *releaseFacts) { f.Asks = true },
	} {
		g := f
		edit(&g)
		assert.False(t, g.oneWriteCandidate(), name)
	}
}
