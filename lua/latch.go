package lua

// Scripts of the countdown latch (package latch). The key layout is
// described in latch_create.lua.
var (
	LatchCreate    = mustLoad("latch_create")
	LatchJoin      = mustLoad("latch_join")
	LatchCountDown = mustLoad("latch_count_down")
	LatchRead      = mustLoad("latch_read")
)
