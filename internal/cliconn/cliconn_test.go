package cliconn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Connect's and Options' errors carry no password by construction (not
// only through coordctl's output filter), name the flag, and have the
// right kind.
func TestErrorsCarryNoPassword(t *testing.T) {
	const pw = "pa55%40word"
	for _, c := range []struct {
		f     Flags
		usage bool
		want  string
	}{
		{Flags{URL: "redis://u:" + pw + "@h:nope/0"}, true, "--redis redis://u:xxxxx@h:nope/0: the port is not a number"},
		{Flags{URL: "http://u:" + pw + "@h/0"}, true, `--redis: scheme "http" is not supported`},
		{Flags{URL: "u:" + pw + "@h"}, true, "no scheme"},
		{Flags{URL: "redis://u:" + pw + "@h/x"}, true, "database"},
		{Flags{URL: "redis://u:" + pw + "@127.0.0.1:1/0"}, false, "cannot reach the server"},
		{Flags{Cluster: "rediss://u:" + pw + "@127.0.0.1:1"}, false, "cannot reach the server"},
		{Flags{Cluster: "ftp://u:" + pw + "@127.0.0.1:1"}, true, `--cluster: scheme "ftp"`},
		{Flags{Sentinel: "redis://u:" + pw + "@m@127.0.0.1:1"}, false, "cannot reach the server"},
		{Flags{}, true, "no server: give --redis URL"},
	} {
		_, err := c.f.Connect(context.Background())
		var ue *UsageError
		if err == nil || errors.As(err, &ue) != c.usage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want usage=%v and %q", c.f, err, c.usage, c.want)
			continue
		}
		if !c.usage && !IsConnError(err) {
			t.Errorf("%+v: %v is not a connection error", c.f, err)
		}
		if strings.Contains(err.Error(), "pa55") {
			t.Errorf("%+v: error carries the password: %v", c.f, err)
		}
	}
}

func TestSecretsIn(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:p%40ss@h:1/0":         "p%40ss,p@ss",
		"rediss://u:pw@m@h:1,h:2":        "pw",
		"redis://h:1/0":                  "",
		"redis://onlypass@h:1":           "onlypass",
		"not a url but user:pw@host:123": "pw",
		"redis://:a@h:1/0?password=b%2Bc&db=1&sentinel_password=d+e&client_name=n": "a,b%2Bc,b+c,d+e,d e",
	} {
		if got := strings.Join(SecretsIn(in), ","); got != want {
			t.Errorf("SecretsIn(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCredentialsReachTheOptions(t *testing.T) {
	f := Flags{Sentinel: "rediss://app:s%40cret@mymaster@10.0.0.1:26379,10.0.0.2:26379"}
	o, desc, err := f.Options()
	if err != nil || o.MasterName != "mymaster" || o.Username != "app" || o.Password != "s@cret" || len(o.Addrs) != 2 || o.TLSConfig == nil || !strings.Contains(desc, "mymaster") {
		t.Fatalf("sentinel options %+v %q %v", o, desc, err)
	}
	f = Flags{Cluster: "redis://app:pw@10.0.0.1:7000,10.0.0.2:7001"}
	o, _, err = f.Options()
	if err != nil || !o.IsClusterMode || o.Username != "app" || o.Password != "pw" || len(o.Addrs) != 2 || o.TLSConfig != nil {
		t.Fatalf("cluster options %+v %v", o, err)
	}
	f = Flags{URL: "rediss://app:pw@example.com:6380/2"}
	o, _, err = f.Options()
	if err != nil || o.Addrs[0] != "example.com:6380" || o.DB != 2 || o.TLSConfig == nil || o.TLSConfig.ServerName != "example.com" {
		t.Fatalf("URL options %+v %v", o, err)
	}
	t.Setenv(EnvURL, "redis://from-env:6379/0")
	f = Flags{}
	if err := f.Resolve(); err != nil || f.URL != "redis://from-env:6379/0" {
		t.Fatalf("Resolve did not read $%s: %+v %v", EnvURL, f, err)
	}
	f = Flags{Cluster: "a:1"}
	if err := f.Resolve(); err != nil || f.URL != "" {
		t.Fatalf("Resolve read $%s although --cluster was given: %+v %v", EnvURL, f, err)
	}
}

// coordctl and every example read one environment variable, through this
// package: no other *REDIS* variable is read anywhere.
func TestOneEnvironmentVariable(t *testing.T) {
	files, err := filepath.Glob("../../examples/*/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example sources: %v", err)
	}
	more, _ := filepath.Glob("../../cmd/coordctl/*.go")
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{`Getenv("REDIS`, `Getenv("COORD_CLUSTER`, `"REDIS_URL"`, `redis.ParseURL(`} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s reads its server with %s instead of cliconn (one variable: %s)", f, bad, EnvURL)
			}
		}
	}
}

func TestClusterAndSentinelSecrets(t *testing.T) {
	for _, c := range []struct {
		f    func(string) []string
		in   string
		want string
	}{
		{ClusterSecrets, "127.0.0.1:1,127.0.0.1:2", ""},
		{ClusterSecrets, "rediss://u:p1@h:1,h:2", "p1"},
		{ClusterSecrets, ":p2@h:1", "p2"},
		{ClusterSecrets, "h:1,x:p3@h:2", "p3"},
		{ClusterSecrets, "redis://u:p1@h:1,x:p3@h:2", "p1,p3"},
		{SentinelSecrets, "mymaster@h:1,h:2", ""},
		{SentinelSecrets, "redis://mymaster@h:1", ""},
		{SentinelSecrets, "rediss://u:p%40w@mymaster@h:1", "p%40w,p@w"},
		{SentinelSecrets, "u:pw@mymaster@h:1", "pw"},
		{SentinelSecrets, "mymaster@h:1,:p4@h:2", "p4"},
	} {
		if got := strings.Join(c.f(c.in), ","); got != c.want {
			t.Errorf("secrets of %q = %q, want %q", c.in, got, c.want)
		}
	}
	for in, want := range map[string]string{
		"redis://u:pw@h:1/0?password=x&db=2&dial_timeout=3s&weird=y": "redis://u:xxxxx@h:1/0?password=xxxxx&db=2&dial_timeout=3s&weird=xxxxx",
		"redis://h:1/0": "redis://h:1/0",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
