package coordination_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func TestNewValidatesAndNeverTouchesRedis(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	c := b.Client(t)
	k := testharness.CountCommands(c)
	for name, opt := range map[string]coordination.Option{
		"nil hook":           coordination.WithHooks(nil),
		"nil meter provider": coordination.WithMeterProvider(nil),
		"nil logger":         coordination.WithLogger(nil),
	} {
		if _, err := coordination.New(c, opt); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := coordination.New(nil); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
	var nilClient *redis.Client
	if _, err := coordination.New(nilClient); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("New((*redis.Client)(nil)): %v", err)
	}
	coord, err := coordination.New(c, coordination.WithKeyPrefix("p:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if coord.Client() != c {
		t.Fatal("accessors")
	}
	if k.Count() != 0 {
		t.Fatalf("New sent %v", k.Names())
	}
}

func TestStrings(t *testing.T) {
	for v, want := range map[coordination.ReleaseOutcome]string{
		coordination.Released: "released", coordination.AlreadyReleased: "already released",
		coordination.NotOwned: "not owned", 9: "ReleaseOutcome(9)",
	} {
		if v.String() != want {
			t.Errorf("%d: %q, want %q", int(v), v.String(), want)
		}
	}
}
