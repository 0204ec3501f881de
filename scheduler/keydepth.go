package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// The adaptive hash-key length of DualMap (paper §3.1, "prefix hotness
// tree"). A request's key is the chained hash of its first d blocks. Every
// prefix starts with d = MinDepth; a prefix whose share of the traffic in a
// sliding window exceeds SplitFactor/n (the paper: 2/n for n instances) is split:
// requests under it get a key one block longer, so a hot prefix spreads over
// several candidate pairs. A split prefix whose share falls below MergeShare
// MergeFactor/n (the paper: 1/n) and that has been split for at least one whole window is
// merged back: its requests return to the shorter key.
//
// A request counts toward every prefix of its key, plus one block beyond it
// (a look-ahead that lets a hot child split in the same round as its
// parent), or, once its key is split, every prefix of its prompt (up to
// MaxDepth). So a parent's share is all the traffic under it and a split hot
// prefix never looks cold one level up, which would make it flap.
//
// Decisions are taken only when a window bucket closes, in a fixed order, so
// two tables that see the same observations hold the same splits.

// KeyDepthConfig configures the key-depth table. Zero values mean defaults.
type KeyDepthConfig struct {
	// BlockTokens is the size of a key block in tokens (default 512, the
	// paper's block): keys grow in steps of whole key blocks, each the
	// run of Config.BlockSize blocks ending at that many tokens, so a pool
	// hashing 16-token blocks does not key every request by its first 32
	// tokens (a shared system prompt's). Depths below count key blocks.
	BlockTokens int
	// MinDepth is the shortest key in key blocks (default 2; the whole
	// prompt when it is shorter). The Mooncake traces start every request
	// with the same block, so a 1-block key sends everything to one pair.
	MinDepth int
	// MaxDepth bounds how far a key can grow (default 32 blocks).
	MaxDepth int
	// Fixed, when > 0, disables adaptation: every key is Fixed blocks long.
	Fixed int
	// Window is the sliding window in observed requests (default 2000).
	Window int
	// WindowDuration, when > 0, makes the window time-based instead.
	WindowDuration time.Duration
	// Buckets is how many parts the window is cut into; decisions are taken
	// each time one closes (default 10).
	Buckets int
	// SplitFactor and MergeFactor set the thresholds as multiples of 1/n:
	// a prefix splits above SplitFactor/n of the traffic and merges below
	// MergeFactor/n (defaults 1 and SplitFactor/2, chosen by measurement;
	// the paper's rule is 2 and 1).
	SplitFactor, MergeFactor float64
	// MaxSplits bounds the number of split prefixes (default 4096).
	MaxSplits int
	// MaxReplicas bounds the candidate sets a hot key that cannot be split
	// deeper is spread over (default 64, and never more than the pool;
	// negative: off). See hotprefix.go.
	MaxReplicas int
}

func (c KeyDepthConfig) withDefaults() KeyDepthConfig {
	if c.BlockTokens == 0 {
		c.BlockTokens = 512
	}
	if c.MinDepth == 0 {
		c.MinDepth = 2
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = 32
	}
	if c.Window == 0 {
		c.Window = 2000
	}
	if c.Buckets == 0 {
		c.Buckets = 10
	}
	if c.MaxSplits == 0 {
		c.MaxSplits = 4096
	}
	if c.MaxReplicas == 0 {
		c.MaxReplicas = 64
	}
	if c.SplitFactor == 0 {
		c.SplitFactor = 1
	}
	if c.MergeFactor == 0 {
		c.MergeFactor = c.SplitFactor / 2
	}
	return c
}

func (c KeyDepthConfig) validate() error {
	switch {
	case c.BlockTokens < 1:
		return fmt.Errorf("keydepth.block_tokens must be >= 1, got %d", c.BlockTokens)
	case c.MinDepth < 1:
		return fmt.Errorf("keydepth.min_depth must be >= 1, got %d", c.MinDepth)
	case c.MaxDepth < c.MinDepth:
		return fmt.Errorf("keydepth.max_depth (%d) must be >= min_depth (%d)", c.MaxDepth, c.MinDepth)
	case c.Fixed < 0:
		return fmt.Errorf("keydepth.fixed must be >= 0, got %d", c.Fixed)
	case c.Buckets < 1 || c.Window < c.Buckets:
		return fmt.Errorf("keydepth: window (%d) must be >= buckets (%d) >= 1", c.Window, c.Buckets)
	case c.WindowDuration < 0:
		return fmt.Errorf("keydepth.window_duration must be >= 0, got %v", c.WindowDuration)
	case c.SplitFactor <= 0 || c.MergeFactor <= 0:
		return fmt.Errorf("keydepth: split_factor and merge_factor must be > 0")
	case c.MergeFactor >= c.SplitFactor:
		return fmt.Errorf("keydepth: merge_factor (%g) must be below split_factor (%g)", c.MergeFactor, c.SplitFactor)
	case c.MaxSplits < 0:
		return fmt.Errorf("keydepth.max_splits must be >= 0, got %d", c.MaxSplits)
	}
	return nil
}

// keyDepth is the hotness table. Not safe for concurrent use: the Scheduler
// guards it.
type keyDepth struct {
	cfg    KeyDepthConfig
	n      int // instances the shares are relative to
	stride int // scheduler blocks per key block

	// split maps a split prefix (its chained hash) to the rotation at which
	// it was split.
	split map[uint64]uint64

	counts      map[uint64]uint32   // window totals per prefix
	buckets     []map[uint64]uint32 // per-bucket counts; cur is being filled
	bucketTotal []int
	total       int // requests in the window
	routers     int // replicas sharing the traffic (setReplicas; 0 or 1: this one alone)
	cur         int
	rotations   uint64
	bucketStart time.Duration // time-based windows only
	scratch     []uint64      // reused at rotation

	// ends are the keys seen that could not be lengthened, replicas the
	// variant counts of the hot ones (see hotprefix.go).
	ends     map[uint64]struct{}
	replicas map[uint64]uint32
}

// newKeyDepth returns a table over prompts hashed in blocks of blockSize
// tokens (0: key blocks are the prompt's blocks).
func newKeyDepth(cfg KeyDepthConfig, n, blockSize int) *keyDepth {
	stride := 1
	if blockSize > 0 {
		stride = max(1, cfg.BlockTokens/blockSize)
	}
	k := &keyDepth{
		cfg:         cfg,
		stride:      stride,
		n:           n,
		split:       make(map[uint64]uint64),
		counts:      make(map[uint64]uint32),
		buckets:     make([]map[uint64]uint32, cfg.Buckets),
		bucketTotal: make([]int, cfg.Buckets),
		ends:        make(map[uint64]struct{}),
		replicas:    make(map[uint64]uint32),
	}
	for i := range k.buckets {
		k.buckets[i] = make(map[uint64]uint32)
	}
	return k
}

// keyBlocks is the prompt's length in key blocks.
func (k *keyDepth) keyBlocks(blocks []uint64) int { return (len(blocks) + k.stride - 1) / k.stride }

// at returns the chained hash at the end of key block d (1-based): it
// stands for the prompt's whole prefix up to there.
func (k *keyDepth) at(blocks []uint64, d int) uint64 {
	return blocks[min(d*k.stride, len(blocks))-1]
}

// depth returns the key length in key blocks for a prompt's chained
// hashes. It does not allocate.
func (k *keyDepth) depth(blocks []uint64) int { return k.depthWith(k.split, blocks) }

// depthWith is depth under the split set split (a snapshot's copy: it
// reads only k's configuration, which never changes).
func (k *keyDepth) depthWith(split map[uint64]uint64, blocks []uint64) int {
	L := k.keyBlocks(blocks)
	if k.cfg.Fixed > 0 {
		return min(k.cfg.Fixed, L)
	}
	d := k.baseDepth(blocks)
	for d < L && d < k.cfg.MaxDepth {
		if _, ok := split[k.at(blocks, d)]; !ok {
			break
		}
		d++
	}
	return d
}

// baseDepth is the key length before any split: MinDepth key blocks, or
// the whole prompt when shorter. A prompt between one and MinDepth key
// blocks is keyed by its whole key blocks, not its changing tail, so the
// next turn of a conversation keeps the key.
func (k *keyDepth) baseDepth(blocks []uint64) int {
	d := min(k.cfg.MinDepth, k.keyBlocks(blocks))
	if full := len(blocks) / k.stride; full >= 1 && full < d {
		d = full
	}
	return d
}

// key returns the ring key of a prompt whose key is d key blocks long.
func (k *keyDepth) key(blocks []uint64, d int) uint64 {
	if d == 0 {
		return 0
	}
	return k.at(blocks, d)
}

// observe records one request whose key is d blocks long, at time now,
// and reports whether the split set changed.
func (k *keyDepth) observe(blocks []uint64, d int, now time.Duration) (changed bool) {
	if k.cfg.Fixed > 0 || len(blocks) == 0 {
		return false
	}
	if k.cfg.WindowDuration > 0 {
		step := k.cfg.WindowDuration / time.Duration(k.cfg.Buckets)
		if step <= 0 {
			step = 1
		}
		for now-k.bucketStart >= step {
			if now-k.bucketStart >= k.cfg.WindowDuration+step {
				// Idle for more than a window: close the current bucket,
				// then everything counted is stale; the merge clock moves
				// on by the window that passed.
				changed = k.rotate() || changed
				k.forget()
				k.rotations += uint64(k.cfg.Buckets - 1)
				k.bucketStart = now - now%step
				break
			}
			changed = k.rotate() || changed
			k.bucketStart += step
		}
	}
	L := k.keyBlocks(blocks)
	if d >= L || d >= k.cfg.MaxDepth {
		k.markEnd(k.key(blocks, d))
	}
	last := min(d+1, L, k.cfg.MaxDepth)
	if d > k.baseDepth(blocks) {
		// A prefix already split is hot: count its whole chain, so the
		// key grows to where its traffic diverges in one more rotation
		// instead of one block per rotation (an identical prompt reaches
		// its full length, where it can be replicated, in three).
		last = min(L, k.cfg.MaxDepth)
	}
	b := k.buckets[k.cur]
	// From the prompt's unsplit key (below MinDepth for short prompts, so
	// their keys are counted and can split too) to one past its key.
	for j := max(1, k.baseDepth(blocks)); j <= last; j++ {
		h := k.at(blocks, j)
		b[h]++
		k.counts[h]++
	}
	if last < L && k.cfg.MaxReplicas >= 0 {
		// The whole prompt too: identical prompts are found hot, and
		// replicated (hotprefix.go), in the first rotation, before their
		// key has grown to their full length.
		h := k.at(blocks, L)
		b[h]++
		k.counts[h]++
		k.markEnd(h)
	}
	k.bucketTotal[k.cur]++
	k.total++
	if k.cfg.WindowDuration == 0 && k.bucketTotal[k.cur] >= k.bucketRequests() {
		changed = k.rotate() || changed
	}
	return changed
}

// bucketRequests is how many observed requests close a bucket of a
// request-counted window: Window/Buckets of the pool's traffic. A replica
// sees only its share of it (setReplicas), so it closes a bucket after
// that share, and its decisions come as soon, in time, as one router's:
// counted per replica, a 600-request run at 100 requests/s gave three
// replicas their first split decision at the run's end instead of after
// 2 s, and their engines got 30-142 requests each against one router's
// 69-86 (docs/evaluation.md, "Three replicas").
func (k *keyDepth) bucketRequests() int {
	per := k.cfg.Window / k.cfg.Buckets
	if k.routers > 1 {
		per /= k.routers
	}
	return max(per, 1)
}

// setReplicas records that n replicas share the pool's traffic, this one
// included (fewer than 2: this one sees all of it).
func (k *keyDepth) setReplicas(n int) { k.routers = n }

func (k *keyDepth) thresholds() (split, merge float64) {
	n := float64(max(k.n, 1))
	return k.cfg.SplitFactor / n, k.cfg.MergeFactor / n
}

// rotate closes the current bucket: it takes split and merge decisions on
// the whole window, then drops the oldest bucket and starts a new one. It
// reports whether the split set changed.
func (k *keyDepth) rotate() (changed bool) {
	k.rotations++
	if k.total > 0 {
		splitAt, mergeAt := k.thresholds()
		total := float64(k.total)
		// Merges first, so a cooled prefix frees its slot for a hot one.
		k.scratch = k.scratch[:0]
		for h, since := range k.split {
			if float64(k.counts[h])/total < mergeAt && k.rotations-since >= uint64(k.cfg.Buckets) {
				k.scratch = append(k.scratch, h)
			}
		}
		for _, h := range k.scratch {
			delete(k.split, h)
		}
		changed = len(k.scratch) > 0
		k.scratch = k.scratch[:0]
		for h, c := range k.counts {
			if _, ok := k.split[h]; !ok && float64(c)/total > splitAt {
				k.scratch = append(k.scratch, h)
			}
		}
		if len(k.split)+len(k.scratch) > k.cfg.MaxSplits {
			// Keep the hottest; ties by hash, so the outcome is deterministic.
			slices.SortFunc(k.scratch, func(a, b uint64) int {
				if ca, cb := k.counts[a], k.counts[b]; ca != cb {
					if ca > cb {
						return -1
					}
					return 1
				}
				if a < b {
					return -1
				}
				return 1
			})
			k.scratch = k.scratch[:max(0, k.cfg.MaxSplits-len(k.split))]
		}
		for _, h := range k.scratch {
			k.split[h] = k.rotations
		}
		changed = changed || len(k.scratch) > 0
		changed = k.replicate() || changed
	}
	k.cur = (k.cur + 1) % len(k.buckets)
	old := k.buckets[k.cur]
	for h, c := range old {
		if v := k.counts[h] - c; v == 0 {
			delete(k.counts, h)
		} else {
			k.counts[h] = v
		}
	}
	clear(old)
	k.total -= k.bucketTotal[k.cur]
	k.bucketTotal[k.cur] = 0
	return changed
}

// forget drops every count of the window (not the splits).
func (k *keyDepth) forget() {
	clear(k.counts)
	for i := range k.buckets {
		clear(k.buckets[i])
		k.bucketTotal[i] = 0
	}
	k.total = 0
}

// setInstances changes n, the pool size the shares are relative to.
func (k *keyDepth) setInstances(n int) { k.n = n }

// KeyDepthState is the exportable state of the key-depth table: the set of
// split prefixes. Replicas that hold the same state compute the same key,
// hence the same candidate pair, for every prompt.
type KeyDepthState struct {
	// Splits are the chained hashes of split prefixes, ascending.
	Splits []uint64
}

func (k *keyDepth) export() KeyDepthState {
	s := KeyDepthState{Splits: make([]uint64, 0, len(k.split))}
	for h := range k.split {
		s.Splits = append(s.Splits, h)
	}
	slices.Sort(s.Splits)
	return s
}

// importState replaces the split set. Splits this table already had keep
// their age; new ones count as split now, so they are held at least one
// window before they can merge here. It reports whether the split set
// changed.
func (k *keyDepth) importState(s KeyDepthState) (changed bool) {
	old := k.split
	k.split = make(map[uint64]uint64, len(s.Splits))
	for _, h := range s.Splits {
		since, ok := old[h]
		if !ok {
			since = k.rotations
			changed = true
		}
		k.split[h] = since
	}
	return changed || len(k.split) != len(old)
}

// splits returns a copy of the split set, for a snapshot.
func (k *keyDepth) splits() map[uint64]uint64 { return maps.Clone(k.split) }

// memory returns the number of prefixes the table tracks (for tests and
// metrics): window counts plus splits.
func (k *keyDepth) memory() int { return len(k.counts) + len(k.split) + len(k.ends) }
