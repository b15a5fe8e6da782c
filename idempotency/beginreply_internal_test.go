package idempotency

import (
	"testing"
	"time"
)

// decodeBegin reads the claims idempotency_begin answers with as stored
// (the started and completed replies), field by field.
func TestDecodeBeginClaims(t *testing.T) {
	for _, c := range []struct {
		reply any
		want  beginReply
		ok    bool
	}{
		{"P60000:1733400000123456:tok:-:", beginReply{State: Started, Fence: 1733400000123456, Owner: "tok"}, true},
		{"P5:3:tok:4:a:b:", beginReply{State: Started, Fence: 3, Owner: "tok"}, true},
		{"Cid:-:", beginReply{State: Completed}, true},
		{"Cid:-:the result", beginReply{State: Completed, Result: "the result"}, true},
		{"Cid:0::result", beginReply{State: Completed, Result: ":result"}, true},
		{"Cid:4:a:b:P1:2:x:", beginReply{State: Completed, Result: "P1:2:x:"}, true},
		{int64(-2), beginReply{State: FingerprintMismatch}, true},
		{int64(1200), beginReply{State: InProgress, Remaining: 1200 * time.Millisecond}, true},
		// Not claims this package writes, or not its answers.
		{"P60000:2:tok:-:", beginReply{}, false},        // fence below 3
		{"P60000:012:tok:-:", beginReply{}, false},      // leading zero
		{"P60000:123::-:", beginReply{}, false},         // no owner
		{"P60000:123:tok", beginReply{}, false},         // no fingerprint part
		{"P:123:tok:-:", beginReply{}, false},           // no ttl
		{"A12:x", beginReply{}, false},                  // abandoned
		{"result", beginReply{}, false},                 // a bare result
		{"C:-:r", beginReply{}, false},                  // no completion id
		{"Cid:9:short", beginReply{}, false},            // fingerprint beyond the claim
		{"Cid:x:r", beginReply{}, false},                // bad fingerprint length
		{int64(-1733400000123456), beginReply{}, false}, // the earlier script's started reply
	} {
		got, ok := decodeBegin(c.reply)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("decodeBegin(%#v) = %+v, %v; want %+v, %v", c.reply, got, ok, c.want, c.ok)
		}
	}
}
