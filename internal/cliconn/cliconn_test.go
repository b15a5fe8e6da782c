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

// coordctl reads one environment variable, through this package: no
// other *REDIS* variable is read anywhere. (The examples, which no longer
// use this package, read the same variable with public go-redis setup;
// examples/examples_test.go checks them.)
func TestOneEnvironmentVariable(t *testing.T) {
	files, err := filepath.Glob("../../cmd/coordctl/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no coordctl sources: %v", err)
	}
	for _, f := range files {
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

// Passwords are masked by structure: the credential part of a URL or an
// item, and the query items that are not go-redis settings; nothing else
// of the value is altered, whatever the password. (This test once also
// checked SecretsIn, ClusterSecrets and SentinelSecrets: they fed
// coordctl's output filter, which searched all output for the password's
// text and is gone, issue 22.)
func TestRedactURLAndArg(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:pw@h:1/0?password=x&db=2&dial_timeout=3s&weird=y": "redis://u:xxxxx@h:1/0?password=xxxxx&db=2&dial_timeout=3s&xxxxx",
		"redis://:hun?ter2@h:1/0":                                    "redis://:xxxxx@h:1/0",
		"unix://:hun?ter2@/tmp/x.sock":                               "unix://:xxxxx@/tmp/x.sock",
		"redis://hun?ter2@h:1/0":                                     "redis://xxxxx@h:1/0",
		"redis://h:1/0?hunter2":                                      "redis://h:1/0?xxxxx",
		"redis://h:1/0?a=1&hunter2&client_name=x y":                  "redis://h:1/0?xxxxx&xxxxx&client_name=xxxxx",
		"hunter2":       "xxxxx",
		"redis://h:1/0": "redis://h:1/0",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"redis://e:e@h:1/0":  "redis://e:xxxxx@h:1/0", // a one-letter password: only the credential part
		"bob:e@host:6379":    "bob:xxxxx@host:6379",
		"nightly-report":     "nightly-report",
		"e":                  "e",
		"tenant@example.com": "xxxxx@example.com",
	} {
		if got := RedactArg(in); got != want {
			t.Errorf("RedactArg(%q) = %q, want %q", in, got, want)
		}
	}
}

// The issue-15d inputs: a --sentinel without a master name, a password
// with an unencoded '?', bare query items, a password given as the URL,
// and bad addresses are all usage errors that echo no part of a secret.
func TestMalformedInputsAreUsageErrorsWithoutSecrets(t *testing.T) {
	for _, c := range []struct {
		f    Flags
		want string
	}{
		{Flags{Sentinel: "redis://u:hunter2@127.0.0.1:6379"}, "no MASTER@ follows it"},
		{Flags{Sentinel: "u:hunter2@127.0.0.1:6379"}, "looks like user:PASSWORD@ without a master"},
		{Flags{Sentinel: "redis://hunter2@127.0.0.1:6379"}, "no MASTER@ follows it"},
		{Flags{Sentinel: "rediss://hunter2@127.0.0.1:6379"}, "rediss://@MASTER@host:port without credentials"},
		{Flags{Sentinel: "redis://u:hunter2@a:b@127.0.0.1:6379"}, "the master name (not shown)"},
		{Flags{Sentinel: "redis://u:hun@ter2@m@127.0.0.1:6379"}, "percent-encode an '@'"},
		{Flags{Sentinel: "redis://u:hunter2@m@127.0.0.1:notaport"}, `"127.0.0.1:notaport": the port must be`},
		{Flags{Sentinel: "redis://u:hunter2@m@127.0.0.1:99999"}, "the port must be a number from 1 to 65535"},
		{Flags{Sentinel: "redis://u:hunter2@m@127.0.0.1:1?password=hunter2"}, "options after '?' (not shown)"},
		{Flags{URL: "redis://:hun?ter2@127.0.0.1:99999/0"}, "--redis redis://:xxxxx@127.0.0.1:99999/0: the port must be a number from 1 to 65535"},
		{Flags{URL: "redis://:pw-hunter2@127.0.0.1:0/0"}, "the port must be"},
		{Flags{URL: "redis://:hun?ter2@127.0.0.1:nope/0"}, "--redis redis://:xxxxx@127.0.0.1:nope/0: the port is not a number"},
		{Flags{URL: "unix://:hun?ter2@/tmp/x.sock?hunter2"}, "unexpected option: 1 item that is not a go-redis option (not shown)"},
		{Flags{URL: "redis://127.0.0.1:1/0?hunter2"}, "?xxxxx: unexpected option: 1 item"},
		{Flags{URL: "redis://127.0.0.1:1/0?a=1&hunter2"}, "unexpected option: 2 items that are not go-redis options (not shown)"},
		{Flags{URL: "redis://127.0.0.1:1/0?password=hunter2&db=1"}, "?password=xxxxx&db=1: unexpected option: password;"},
		{Flags{URL: "redis://127.0.0.1:1/0?dial_timeout=hunter2"}, "the value of ?dial_timeout is not a duration"},
		{Flags{URL: "redis://127.0.0.1:1/0?skip_verify=true"}, "unexpected option: 1 item"},
		{Flags{URL: "hunter2"}, "--redis: no scheme (the value is not shown"},
		{Flags{URL: "ftp://u:hunter2@x"}, "--redis: scheme \"ftp\""},
		{Flags{URL: "u:hunter2@x://h"}, "the scheme (not shown)"},
		{Flags{Cluster: "redis://u:hunter2@127.0.0.1:notaport"}, `"127.0.0.1:notaport": the port must be`},
		{Flags{Cluster: "redis://u:hunter2@127.0.0.1:1?password=hunter2"}, "options after '?' (not shown)"},
		{Flags{Cluster: "redis://u:hunter2@127.0.0.1:65536"}, "the port must be a number from 1 to 65535"},
	} {
		_, _, err := c.f.Options()
		var ue *UsageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want a usage error with %q", c.f, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter") || strings.Contains(err.Error(), "ter2") {
			t.Errorf("%+v: error carries the password: %v", c.f, err)
		}
	}
	// What is accepted: a '?' in a password (the userinfo runs to the
	// last '@'), a master after an empty userinfo, a master without a
	// scheme.
	o, _, err := (&Flags{URL: "redis://u:hun?ter2@127.0.0.1:7/3?db=4"}).Options()
	if err != nil || o.Password != "hun?ter2" || o.Username != "u" || o.Addrs[0] != "127.0.0.1:7" || o.DB != 4 {
		t.Errorf("password with '?': %+v %v", o, err)
	}
	o, _, err = (&Flags{URL: "unix://:hun?ter2@/tmp/x.sock"}).Options()
	if err != nil || o.Password != "hun?ter2" || o.Addrs[0] != "/tmp/x.sock" {
		t.Errorf("unix password with '?': %+v %v", o, err)
	}
	o, _, err = (&Flags{Sentinel: "rediss://@mym@127.0.0.1:26379"}).Options()
	if err != nil || o.MasterName != "mym" || o.Password != "" || o.TLSConfig == nil {
		t.Errorf("rediss://@mym@...: %+v %v", o, err)
	}
	o, _, err = (&Flags{Sentinel: "redis://u:p%3Fw@mym@127.0.0.1:26379"}).Options()
	if err != nil || o.MasterName != "mym" || o.Password != "p?w" {
		t.Errorf("encoded password: %+v %v", o, err)
	}
	o, _, err = (&Flags{Cluster: "redis://u:p?w@127.0.0.1:7000"}).Options()
	if err != nil || o.Password != "p?w" || o.Addrs[0] != "127.0.0.1:7000" {
		t.Errorf("cluster password with '?': %+v %v", o, err)
	}
}
