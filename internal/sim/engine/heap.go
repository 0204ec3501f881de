package engine

// decodeHeap is a min-heap of decoding requests keyed by the step at which
// they finish, ties broken by admission order.
type decodeHeap = minHeap[decoding]

type decoding struct {
	finish int64 // index of the step whose end completes the request
	seq    int64 // admission order
	r      *Request
	stint  int32 // realistic model: the request's run (stale when preempted since)
}

//lint:ignore U1000 called by minHeap[decoding] (the generic constraint), which staticcheck does not follow
func (a decoding) less(b decoding) bool {
	return a.finish < b.finish || a.finish == b.finish && a.seq < b.seq
}

// minHeap is a binary min-heap of T by T's less.
type minHeap[T interface{ less(T) bool }] []T

func (h *minHeap[T]) push(x T) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// pop removes and returns the minimum; the heap must not be empty.
func (h *minHeap[T]) pop() T {
	s := *h
	top := s[0]
	n := len(s) - 1
	var zero T
	s[0] = s[n]
	s[n] = zero
	s = s[:n]
	for i := 0; ; {
		m, l, r := i, 2*i+1, 2*i+2
		if l < n && s[l].less(s[m]) {
			m = l
		}
		if r < n && s[r].less(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
