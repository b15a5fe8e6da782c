package coordination

import (
	"fmt"

	"github.com/google/uuid"
)

// NewOwnerToken returns a fresh random owner token: a version 4 UUID in its
// 36-character text form (122 random bits from crypto/rand). Every holder of
// a lease, permit or claim gets its own; renew, verify and release compare
// it, so an expired owner can never touch its successor's lease.
//
// It returns an error only when the system's random source fails.
func NewOwnerToken() (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("coordination: owner token: %w", err)
	}
	return u.String(), nil
}
