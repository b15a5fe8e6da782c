package lua_test

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/coordkit/coordination/lua"
)

// Read a script's source, e.g. to pre-load it or to audit the commands it
// runs before writing an ACL.
func Example() {
	src, err := fs.ReadFile(lua.FS(), "lock_release.lua")
	if err != nil {
		fmt.Println(err)
		return
	}
	first, _, _ := strings.Cut(string(src), "\n")
	fmt.Println(first)
	fmt.Println(len(lua.Names()) > 10)
	// Output:
	// -- lock_release: delete an owner-token lock held by the caller and wake
	// true
}
