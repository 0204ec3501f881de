package state

// keys is the Redis key layout of one pool (see the package doc). Every key
// carries the hash tag {prefix:pool}.
type keys struct {
	tag      string
	stream   string
	replicas string
	leader   string
	keyDepth string
}

func newKeys(prefix, pool string) keys {
	tag := "{" + prefix + ":" + pool + "}"
	return keys{
		tag:      tag,
		stream:   tag + ":kv",
		replicas: tag + ":replicas",
		leader:   tag + ":kd:leader",
		keyDepth: tag + ":kd",
	}
}

// load is the legacy load hash of a replica (positional values).
func (k keys) load(replica string) string { return k.tag + ":load:" + replica }

// state is a replica's state (a ReplicaState message).
func (k keys) state(replica string) string { return k.tag + ":state:" + replica }

// lease is the migration lease of a source instance.
func (k keys) lease(instance string) string { return k.tag + ":mig:" + instance }
