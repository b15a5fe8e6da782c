package lock

// The field-lease scripts, for the external tests of this package.
var (
	FieldAcquire = fieldAcquire
	FieldRefresh = fieldRefresh
	FieldVerify  = fieldVerify
	FieldRelease = fieldRelease
	FieldAbandon = fieldAbandon
)
