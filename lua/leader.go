package lua

// Scripts of leader election (package leader). Campaigning, renewal and
// release use the fencing lock's scripts.
var (
	LeaderRead = mustLoad("leader_read")
)
