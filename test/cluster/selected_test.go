package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitLevels(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"", []string{""}},
		{"TestA", []string{"TestA"}},
		{"TestA/sub", []string{"TestA", "sub"}},
		{"TestA|TestB/x/y", []string{"TestA|TestB", "x", "y"}},
		{"Test[/]A/b", []string{"Test[/]A", "b"}},
		{"(a/b)/c", []string{"(a/b)", "c"}},
		{`a\/b/c`, []string{`a\/b`, "c"}},
	} {
		assert.Equal(t, tc.want, splitLevels(tc.pattern), tc.pattern)
	}
}

func TestAnySelected(t *testing.T) {
	names := []string{"TestAttach", "TestDetach"}
	for _, tc := range []struct {
		name, run, skip string
		want            bool
	}{
		{"no pattern runs everything", "", "", true},
		{"a pure test alone", "TestDecide", "", false},
		{"nothing", "^$", "", false},
		{"one integration test", "TestDetach", "", true},
		{"a subtest of one", "TestAttach/pinned", "", true},
		{"an alternation", "TestDecide|TestAttach", "", true},
		{"skipped at the top level", "", "TestAttach|TestDetach", false},
		{"a subtest skip keeps the test", "", "TestAttach/x", true},
		{"partly skipped", "Test", "TestAttach", true},
	} {
		got, err := anySelected(names, tc.run, tc.skip)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
	_, err := anySelected(names, "(", "")
	assert.Error(t, err, "a pattern that does not compile")
}

func TestSkipPattern(t *testing.T) {
	names := []string{"TestA", "TestB.x"}
	assert.Equal(t, `^(TestA|TestB\.x)$`, skipPattern("", names))
	assert.Equal(t, `TestC|^(TestA|TestB\.x)$`, skipPattern("TestC", names))
	assert.Equal(t, `^(TestA|TestB\.x)$`, skipPattern("TestC/sub", names))
	got, err := anySelected(names, "", skipPattern("TestC", names))
	require.NoError(t, err)
	assert.False(t, got, "the skip pattern leaves none of them")
}

func TestIntegrationTestsOfThisPackage(t *testing.T) {
	got, err := integrationTests(".")
	require.NoError(t, err)
	assert.Contains(t, got, "TestFailedStartStopsWhatItStarted")
	assert.Contains(t, got, "TestGarbageCollection")
	assert.NotContains(t, got, "TestMain")
	assert.NotContains(t, got, "TestSplitLevels")
}
