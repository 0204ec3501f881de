package sim

// engineHeap is an indexed min-heap of engines by the time their current
// step ends, so the next engine event is found in O(1) and re-keyed in
// O(log n).
type engineHeap struct {
	when []float64 // by engine
	heap []int     // engine indices
	pos  []int     // engine -> index in heap
}

func (h *engineHeap) add(t float64) {
	e := len(h.when)
	h.when = append(h.when, t)
	h.pos = append(h.pos, len(h.heap))
	h.heap = append(h.heap, e)
	h.up(len(h.heap) - 1)
}

// min returns the engine with the earliest time and that time.
func (h *engineHeap) min() (int, float64) {
	e := h.heap[0]
	return e, h.when[e]
}

func (h *engineHeap) update(e int, t float64) {
	old := h.when[e]
	h.when[e] = t
	if t < old {
		h.up(h.pos[e])
	} else {
		h.down(h.pos[e])
	}
}

func (h *engineHeap) less(i, j int) bool { return h.when[h.heap[i]] < h.when[h.heap[j]] }

func (h *engineHeap) swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.pos[h.heap[i]] = i
	h.pos[h.heap[j]] = j
}

func (h *engineHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *engineHeap) down(i int) {
	n := len(h.heap)
	for {
		l, m := 2*i+1, i
		if l < n && h.less(l, m) {
			m = l
		}
		if r := l + 1; r < n && h.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		h.swap(i, m)
		i = m
	}
}
