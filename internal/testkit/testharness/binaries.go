package testharness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Flavors are the real server builds the harness knows, in the order tests
// run them. Each is provided by scripts/get-servers.sh.
var Flavors = []string{"redis7", "redis8", "valkey8", "valkey9"}

// binaries finds the server and CLI of a flavor ("redis7", ...): first the
// environment (REDIS7_SERVER / REDIS7_CLI, as scripts/get-servers.sh writes
// them to its env.sh), then PATH (redis7-server / redis7-cli, the names of
// its bin/ symlinks), then the default cache folder of get-servers.sh.
func binaries(flavor string) (server, cli string, ok bool) {
	env := strings.ToUpper(flavor)
	server, cli = os.Getenv(env+"_SERVER"), os.Getenv(env+"_CLI")
	if server == "" {
		if p, err := exec.LookPath(flavor + "-server"); err == nil {
			server = p
		}
	}
	if cli == "" {
		if p, err := exec.LookPath(flavor + "-cli"); err == nil {
			cli = p
		}
	}
	if server == "" || cli == "" {
		dir := cacheDir()
		if server == "" && exists(filepath.Join(dir, "bin", flavor+"-server")) {
			server = filepath.Join(dir, "bin", flavor+"-server")
		}
		if cli == "" && exists(filepath.Join(dir, "bin", flavor+"-cli")) {
			cli = filepath.Join(dir, "bin", flavor+"-cli")
		}
	}
	return server, cli, server != "" && cli != ""
}

func cacheDir() string {
	if d := os.Getenv("REDIS_SERVERS_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "redis-servers")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "redis-servers")
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// howToGet is the message shown when a flavor is missing.
func howToGet(flavor string) string {
	return flavor + " is not available: run `sh scripts/get-servers.sh " + flavor + "` (or `make test`), or set " +
		strings.ToUpper(flavor) + "_SERVER and " + strings.ToUpper(flavor) + "_CLI"
}

// InCI reports whether the tests run in CI (CI=true), where a missing server
// fails the test instead of skipping it.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}
