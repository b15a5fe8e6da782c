package rwlease

// The scripts, for the external tests of this package.
var (
	ScriptAcquire = scriptAcquire
	ScriptRefresh = scriptRefresh
	ScriptVerify  = scriptVerify
	ScriptRelease = scriptRelease
	ScriptAbandon = scriptAbandon
)
