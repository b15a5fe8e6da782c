package layout

import "strings"

// Layout describes one way a primitive stores a key, as the primitive
// documents it (its package's "Storage" or "Key layout" section and the
// headers of its scripts in package lua). Each primitive declares its
// Layouts in its internal/<primitive>core package; a table of them, in
// order, is what Decode reads a key with.
type Layout struct {
	// Kind is what a key of this layout is (the Report's Kind).
	Kind string
	// Type is the Redis type the layout is stored as: string, hash, zset
	// or set.
	Type string
	// Match reports whether a key of Type is of this layout; nil matches
	// every key of Type. Decode takes the first layout of the table that
	// matches.
	Match func(*Snapshot) bool
	// Decode adds what the key says to r (Kind is set) and records what
	// is corrupt with r.Bad. It must not panic on any snapshot that Match
	// accepted.
	Decode func(*Snapshot, *Report)
	// Mixes, when not "", is what the layout's members are called in a
	// key of Type that another layout with Mixes matches too (a sorted set
	// holding both semaphore and rwlease members): such a key is of no
	// layout, and the problem names every Mixes of Type in table order.
	Mixes string
}

// Decode says what s holds, read with the layouts of table (the first one
// whose Type and Match fit). A key that does not exist is KindMissing (not corrupt); a key of no layout is
// KindUnknown with a Problem. Decode never panics when the table's
// decoders do not.
func Decode(s *Snapshot, table []Layout) *Report {
	r := &Report{Key: s.Key, TTL: s.PTTL}
	switch s.Type {
	case "none", "":
		r.Kind = KindMissing // not corrupt: said in one line by inspect
		r.TTL = -2
		return r
	}
	var found *Layout
	for i := range table {
		l := &table[i]
		if l.Type != s.Type || (l.Match != nil && !l.Match(s)) {
			continue
		}
		if found == nil {
			found = l
			if l.Mixes == "" {
				break
			}
			continue
		}
		if l.Mixes != "" {
			r.Kind = KindUnknown
			r.Bad("a %s mixing %s members", typeName(s.Type), mixes(table, s.Type))
			return r
		}
	}
	switch {
	case found == nil:
		r.Kind = KindUnknown
		switch s.Type {
		case "string":
			r.Bad("a string of no library layout (%d bytes)", s.StrLen)
		case "zset":
			r.Bad("a sorted set of no library layout (%d members)", s.ZCard)
		default:
			r.Bad("a %s: no library layout is a %s", s.Type, s.Type)
		}
	default:
		r.Kind = found.Kind
		found.Decode(s, r)
	}
	return r
}

// typeName is how a problem names a Redis type.
func typeName(typ string) string {
	if typ == "zset" {
		return "sorted set"
	}
	return typ
}

// mixes lists the Mixes of the table's layouts of typ: "a, b and c".
func mixes(table []Layout, typ string) string {
	var names []string
	for _, l := range table {
		if l.Type == typ && l.Mixes != "" {
			names = append(names, l.Mixes)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
