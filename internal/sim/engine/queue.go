package engine

// fifo is a growable ring buffer queue. It allocates only to grow.
type fifo[T any] struct {
	buf        []T
	head, size int
}

func (q *fifo[T]) len() int { return q.size }

// at returns the i-th element from the front (0 is the front).
func (q *fifo[T]) at(i int) *T { return &q.buf[(q.head+i)%len(q.buf)] }

func (q *fifo[T]) push(v T) {
	if q.size == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.size)%len(q.buf)] = v
	q.size++
}

func (q *fifo[T]) grow() {
	buf := make([]T, max(16, 2*len(q.buf)))
	for i := range q.size {
		buf[i] = *q.at(i)
	}
	q.buf, q.head = buf, 0
}

// pop removes and returns the front element; the queue must not be empty.
func (q *fifo[T]) pop() T {
	var zero T
	v := q.buf[q.head]
	q.buf[q.head] = zero // drop references for the garbage collector
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return v
}

// pushFront puts v at the front.
func (q *fifo[T]) pushFront(v T) {
	if q.size == len(q.buf) {
		q.grow()
	}
	q.head = (q.head - 1 + len(q.buf)) % len(q.buf)
	q.buf[q.head] = v
	q.size++
}

// popBack removes and returns the back element; the queue must not be
// empty.
func (q *fifo[T]) popBack() T {
	var zero T
	i := (q.head + q.size - 1) % len(q.buf)
	v := q.buf[i]
	q.buf[i] = zero
	q.size--
	return v
}
