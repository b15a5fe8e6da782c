package ratelimit

import (
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
)

// Call ids: every consumptive decision, settlement and refund carries 8
// random bytes, which the key remembers for its last few grants, so that a
// re-send of the same command (go-redis re-sends after a lost reply) is
// recognised and not applied twice. 64 random bits make a false match with
// one of the 6 remembered ids a 1 in 3·10^18 event per call.
//
// Ids are cut from chunks of random bytes, handed out as *string (go-redis
// writes a *string argument as its string, and boxing a pointer does not
// allocate): a call costs no allocation of its own.

const idLen = 8

const idsPerChunk = 128

type idChunk struct {
	next atomic.Int32
	ids  [idsPerChunk]string
}

var idChunks atomic.Pointer[idChunk]

func newIDChunk() *idChunk {
	var buf [idsPerChunk * idLen]byte
	for i := 0; i < len(buf); i += idLen {
		// math/rand/v2's global source is seeded from the OS and
		// safe for concurrent use; the ids need uniqueness, not secrecy.
		binary.LittleEndian.PutUint64(buf[i:], rand.Uint64())
	}
	s := string(buf[:])
	c := &idChunk{}
	for i := range c.ids {
		c.ids[i] = s[i*idLen : (i+1)*idLen]
	}
	return c
}

// newID returns a fresh call id.
func newID() *string {
	for {
		c := idChunks.Load()
		if c != nil {
			if i := c.next.Add(1) - 1; i < idsPerChunk {
				return &c.ids[i]
			}
		}
		idChunks.CompareAndSwap(c, newIDChunk())
	}
}
