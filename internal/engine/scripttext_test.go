package engine_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"io/fs"
	"testing"

	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lua"
)

// The SHA1 a script runs under (EVALSHA) is that of the text package lua
// serves, the assembled one with its fragments in, and the server agrees:
// loading the served text gives the same SHA1.
func TestScriptHashIsTheServedText(t *testing.T) {
	names := lua.Names()
	if len(names) < 10 {
		t.Fatalf("only %d scripts", len(names))
	}
	hashes := map[string]string{}
	for _, n := range names {
		src, err := fs.ReadFile(lua.FS(), n+".lua")
		if err != nil {
			t.Fatal(err)
		}
		sum := sha1.Sum(src)
		want := hex.EncodeToString(sum[:])
		s := engine.NewScript(n, func(any) (any, bool) { return nil, true })
		if s.Hash() != want {
			t.Errorf("%s: engine runs %s, the served text is %s", n, s.Hash(), want)
		}
		hashes[n] = want
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		// An operator pre-loads the scripts (SCRIPT LOAD, which the
		// least-privilege user does not need).
		c := b.Admin(t)
		ctx := context.Background()
		for _, n := range names {
			src, _ := fs.ReadFile(lua.FS(), n+".lua")
			got, err := c.ScriptLoad(ctx, string(src)).Result()
			if err != nil {
				t.Fatalf("%s: SCRIPT LOAD: %v", n, err)
			}
			if got != hashes[n] {
				t.Errorf("%s: the server hashes the served text as %s, the engine uses %s", n, got, hashes[n])
			}
		}
	})
}
