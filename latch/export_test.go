package latch

// DropNotifications makes l's writes announce on a channel no waiter
// listens to, as if every Pub/Sub message they send were lost.
func DropNotifications(l *Latch) { l.channel += ":dropped" }
