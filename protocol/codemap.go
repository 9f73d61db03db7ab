package protocol

// The event codemap (spec/v2/event-codemap.json, RFC 0176 §A.1): one row per event type
// of the closed v2 enum, naming its v1 spelling. 36 rows rename the type; the others
// keep it. A run's log is stored once, in the vocabulary of its era (EraV1: v1 names,
// EraV2: v2 names), and each reader is served its own major's names through these rows
// (api, "events per reader"). The rows are in codemap_table.go, generated from the
// vendored JSON and checked against it by TestTablesMatchTheSpec.

// eventCodemap is the loaded codemap.
type eventCodemap struct {
	toV2 map[string]string // every v1 name -> its v2 name
	toV1 map[string]string // every v2 name -> its v1 name
	// folded are v2 names two v1 rows map to: their v1 view is refused.
	folded map[string]bool
}

var codemap = mustLoadCodemap(codemapRows[:])

func mustLoadCodemap(rows [][2]string) *eventCodemap {
	cm, problem := loadCodemap(rows)
	if problem != "" {
		panic("protocol: the event codemap: " + problem)
	}
	return cm
}

// loadCodemap builds the maps and checks what the readers rely on: each v1 name has one
// row, and no renamed v1 name is also the v2 name of a row, so a stored type names one
// row whichever vocabulary stored it. A v2 name two rows map to is recorded as folded
// and its v1 view refused (persistence.md: verify the bijection at load). problem is
// "" when the rows are sound.
func loadCodemap(rows [][2]string) (cm *eventCodemap, problem string) {
	if len(rows) == 0 {
		return nil, "no rows"
	}
	cm = &eventCodemap{toV2: map[string]string{}, toV1: map[string]string{}, folded: map[string]bool{}}
	for _, r := range rows {
		v1, v2 := r[0], r[1]
		if v1 == "" || v2 == "" {
			return nil, "a row without both names"
		}
		if _, dup := cm.toV2[v1]; dup {
			return nil, "v1 type " + v1 + " has two rows"
		}
		cm.toV2[v1] = v2
		if _, dup := cm.toV1[v2]; dup || cm.folded[v2] {
			cm.folded[v2] = true
			delete(cm.toV1, v2)
			continue
		}
		cm.toV1[v2] = v1
	}
	for v1, v2 := range cm.toV2 {
		if v1 == v2 {
			continue
		}
		if _, clash := cm.toV1[v1]; clash || cm.folded[v1] {
			return nil, "v1 type " + v1 + " is renamed to " + v2 + " and is also the v2 name of a row"
		}
	}
	return cm, ""
}

// EventTypeV2 is the v2 name of a stored event type, stored in either vocabulary; ok is
// false for a type no codemap row names (a vendor type, or one the host cannot map).
func EventTypeV2(t string) (string, bool) {
	if v2, ok := codemap.toV2[t]; ok {
		return v2, true
	}
	if _, ok := codemap.toV1[t]; ok || codemap.folded[t] {
		return t, true
	}
	return "", false
}

// EventTypeV1 is the v1 name of a stored event type, stored in either vocabulary; ok is
// false for a type no row names, or a v2 name whose rows fold (its v1 view is refused).
func EventTypeV1(t string) (string, bool) {
	if codemap.folded[t] {
		return "", false
	}
	if v1, ok := codemap.toV1[t]; ok {
		return v1, true
	}
	if _, ok := codemap.toV2[t]; ok {
		return t, true
	}
	return "", false
}

// RenamedAtV2 reports whether the v1 type t has another name at v2, and which: the
// name an EraV2 run stores it under.
func RenamedAtV2(t string) (string, bool) {
	v2, ok := codemap.toV2[t]
	return v2, ok && v2 != t
}

// EventTypeCount is the number of rows (the size of the closed v2 enum).
func EventTypeCount() int { return len(codemap.toV2) }

// IsVendorEventType reports whether t is a vendor event type of this host's org:
// "wop.<name>[.<name>]", each name ^[a-z][a-z0-9]*(-[a-z0-9]+)*$ (the run-event
// schema's vendor branch). Only these vendor types are served to a v2 reader.
func IsVendorEventType(t string) bool {
	if len(t) <= len(Org)+1 || t[:len(Org)+1] != Org+"." {
		return false
	}
	rest, parts := t[len(Org)+1:], 0
	for len(rest) > 0 {
		seg := rest
		if i := indexByte(rest, '.'); i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
			if rest == "" {
				return false
			}
		} else {
			rest = ""
		}
		if !kebabName(seg) {
			return false
		}
		parts++
	}
	return parts >= 1 && parts <= 2
}

// kebabName reports whether s matches ^[a-z][a-z0-9]*(-[a-z0-9]+)*$.
func kebabName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && s[i-1] != '-':
		default:
			return false
		}
	}
	return true
}
