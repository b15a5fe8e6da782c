package coordination

import "time"

// Millis converts a duration to the integer milliseconds the scripts take,
// rounding a sub-millisecond part up so that a lease or window is never
// shortened. It returns an error wrapping [ErrInvalidArgument] that names
// the argument when d is below one millisecond (zero and negative included).
func Millis(name string, d time.Duration) (int64, error) {
	if d < time.Millisecond {
		return 0, InvalidArgument(name, "must be at least 1ms, got %v", d)
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms, nil
}
