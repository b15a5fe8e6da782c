package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// modulePath is the module coordctl belongs to.
const modulePath = "github.com/coordkit/coordination"

// versionLine says which coordctl this is, from the build information the
// Go toolchain records (runtime/debug.ReadBuildInfo): the module version
// (v1.2.3 when installed with go install ...@v1.2.3; a pseudo-version
// with +dirty when built by go build in a clone with changes; "(devel)"
// when built without version information, as by go run and go test), the
// VCS revision when recorded, and the Go version and platform.
func versionLine() string {
	version, revision, modified := "(unknown)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == modulePath && bi.Main.Version != "" {
			version = bi.Main.Version
		} else {
			// coordctl built into another main module (a test binary of
			// another package, a vendored copy): the dependency's version.
			for _, d := range bi.Deps {
				if d.Path == modulePath {
					version = d.Version
				}
			}
			if bi.Main.Path == modulePath {
				version = "(devel)"
			}
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	line := fmt.Sprintf("coordctl %s (%s", version, modulePath)
	if revision != "" {
		line += ", revision " + revision[:min(12, len(revision))]
		if modified {
			line += " with local changes"
		}
	}
	return line + fmt.Sprintf(", %s %s/%s)", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// runVersion prints versionLine: coordctl version, coordctl --version.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "coordctl version: takes no arguments, got %s (see coordctl --help)\n", echoArgs(args))
		return exitUsage
	}
	fmt.Fprintln(stdout, versionLine())
	return exitOK
}
