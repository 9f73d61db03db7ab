package workflows

// idWindow is a set of ids that remembers only the newest ones: at most cap of them,
// the oldest dropped first. It is how the run's state keeps sets that would otherwise
// grow with every turn (the request ids it applied, the interrupts it resolved) bounded
// across continue-as-new. Its order is insertion order, so it is the same on every
// replay; it is carried as a JSON array, oldest first.
type idWindow struct {
	cap int
	ids []string
	set map[string]bool
}

func newIDWindow(capacity int) *idWindow {
	return &idWindow{cap: capacity, set: map[string]bool{}}
}

// add remembers id as the newest (an id already present keeps its place).
func (w *idWindow) add(id string) {
	if w.set[id] {
		return
	}
	w.ids = append(w.ids, id)
	w.set[id] = true
	if over := len(w.ids) - w.cap; over > 0 {
		for _, old := range w.ids[:over] {
			delete(w.set, old)
		}
		w.ids = append([]string(nil), w.ids[over:]...)
	}
}

// has reports whether id is among the remembered ones.
func (w *idWindow) has(id string) bool { return w.set[id] }

// list returns the remembered ids, oldest first.
func (w *idWindow) list() []string { return append([]string(nil), w.ids...) }

// addAll adds ids in order.
func (w *idWindow) addAll(ids []string) {
	for _, id := range ids {
		w.add(id)
	}
}
