package engine

// Local returns the value this engine keeps under key for a primitive: the
// first call with key stores and returns make's result (make may run more
// than once when calls race; one result is kept), later calls return the
// same value. key is a value of an unexported type of the primitive's
// package, so that no other package shares its slot. A primitive keeps
// per-coordinator state this way (the fencing lock's highest tokens seen)
// without the engine knowing it. It is safe for concurrent use; the value
// lives as long as the engine.
func (e *Engine) Local(key any, make func() any) any {
	if v, ok := e.local.Load(key); ok {
		return v
	}
	v, _ := e.local.LoadOrStore(key, make())
	return v
}
