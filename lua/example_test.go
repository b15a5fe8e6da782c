package lua_test

import (
	"fmt"

	"github.com/coordkit/coordination/lua"
)

// Every script is embedded and named after its file; primitives run them
// through coordination.Coordinator.Eval.
func Example() {
	s := lua.LockRelease
	fmt.Println(s.Name(), len(s.Hash()))
	// Output: lock_release 40
}
