package ratelimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/coordkit/coordination/ratelimit"
)

// Charging by outcome: three failed logins a minute per client, while
// successful logins cost nothing. The policy takes a permit before the
// handler runs (so a client out of attempts is refused at once), and
// Charge gives it back after a 2xx.
func ExamplePolicy_charge() {
	coord, done := exampleCoordinator()
	defer done()

	failures, err := ratelimit.New(coord, "limits:login:198.51.100.7", ratelimit.FixedWindow{Limit: 3, Window: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer failures.Close()
	mw, err := ratelimit.NewMiddleware([]ratelimit.Policy{{
		Name:    "failed-logins",
		Limiter: failures,
		Charge: func(r *http.Request, status, reported int) int {
			if status >= 200 && status < 300 {
				return 0 // a successful login is free
			}
			return 1
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	login := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("password") != "s3cret" {
			http.Error(w, "wrong password", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "welcome")
	}))

	for _, password := range []string{"s3cret", "guess1", "s3cret", "guess2", "guess3", "s3cret"} {
		w := httptest.NewRecorder()
		login.ServeHTTP(w, httptest.NewRequest("POST", "/login?password="+password, nil))
		fmt.Println(password, w.Code)
	}
	// Output:
	// s3cret 200
	// guess1 401
	// s3cret 200
	// guess2 401
	// guess3 401
	// s3cret 429
}
