package state

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startCluster starts a Redis Cluster of n primaries (no replicas) on
// loopback and returns their addresses once every node reports the
// cluster ok. The nodes are joined from Go, as redis-cli --cluster create
// does: a distinct config epoch each, an equal share of the 16384 slots
// each, then CLUSTER MEET. It needs Redis 7 (cluster-port: a free port's
// default bus port, port+10000, may not exist).
func startCluster(t *testing.T, n int) []*redisNode {
	t.Helper()
	requireRedisMajor(t, 7)
	nodes := make([]*redisNode, n)
	for i := range nodes {
		nodes[i] = startNode(t, fmt.Sprintf("cluster node %d", i), func() string {
			return fmt.Sprintf("cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 2000\ncluster-port %d\n", freePort(t))
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, nd := range nodes {
		if err := nd.rdb.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			t.Fatalf("%s: CLUSTER SET-CONFIG-EPOCH: %v", nd.name, err)
		}
		lo, hi := i*16384/n, (i+1)*16384/n-1
		slots := make([]int, 0, hi-lo+1)
		for s := lo; s <= hi; s++ {
			slots = append(slots, s)
		}
		if err := nd.rdb.ClusterAddSlots(ctx, slots...).Err(); err != nil {
			t.Fatalf("%s: CLUSTER ADDSLOTS %d..%d: %v", nd.name, lo, hi, err)
		}
	}
	for _, nd := range nodes[1:] {
		bus, err := nd.rdb.ConfigGet(ctx, "cluster-port").Result()
		if err != nil {
			t.Fatalf("%s: CONFIG GET cluster-port: %v", nd.name, err)
		}
		if err := nodes[0].rdb.Do(ctx, "cluster", "meet", "127.0.0.1", nd.port(), bus["cluster-port"]).Err(); err != nil {
			t.Fatalf("%s: CLUSTER MEET %s: %v", nodes[0].name, nd.name, err)
		}
	}
	took := waitFor(t, 10*time.Second, func(ctx context.Context) string {
		for _, nd := range nodes {
			info, err := nd.rdb.ClusterInfo(ctx).Result()
			if err != nil {
				return fmt.Sprintf("%s: CLUSTER INFO: %v", nd.name, err)
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				return fmt.Sprintf("%s: CLUSTER INFO =\n%s\nwant cluster_state:ok and cluster_known_nodes:%d", nd.name, info, n)
			}
		}
		return ""
	})
	t.Logf("cluster of %d nodes ok after %v", n, took.Round(time.Millisecond))
	return nodes
}

// TestRedisCluster runs three replicas on a real three-node Redis Cluster
// and checks that they agree as on a single server, without an error, and
// that every key the pool wrote is in the slot of the pool's hash tag, on
// one node.
func TestRedisCluster(t *testing.T) {
	nodes := startCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, nd := range nodes {
		addrs[i] = nd.addr
	}
	rs := make([]*replica, 3)
	for i := range rs {
		rs[i] = newReplica(t, "", fmt.Sprintf("r%d", i), func(o *RedisOptions) { o.Addrs = addrs })
	}
	if _, ok := rs[0].store.rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("NewRedis(%d addrs) client is %T, want *redis.ClusterClient", len(addrs), rs[0].store.rdb)
	}
	checkAgreement(t, rs, 1)
	checkNoOutage(t, rs)

	t.Run("one slot", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		k := rs[0].store.keys
		slot, err := nodes[0].rdb.ClusterKeySlot(ctx, k.tag).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %s: %v", k.tag, err)
		}
		// Every key of every node: the pool is all the cluster holds.
		holders := map[string][]string{}
		for _, nd := range nodes {
			keys, err := nd.rdb.Keys(ctx, "*").Result()
			if err != nil {
				t.Fatalf("%s: KEYS *: %v", nd.name, err)
			}
			for _, key := range keys {
				got, err := nd.rdb.ClusterKeySlot(ctx, key).Result()
				if err != nil {
					t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
				}
				if got != slot {
					t.Errorf("key %q is in slot %d on %s, want %d (the slot of %s)", key, got, nd.name, slot, k.tag)
				}
				holders[nd.name] = append(holders[nd.name], key)
			}
		}
		if len(holders) != 1 {
			t.Errorf("keys on %d nodes, want 1: %v", len(holders), holders)
		}
		var all []string
		for _, keys := range holders {
			all = append(all, keys...)
		}
		want := []string{k.stream, k.replicas, k.leader, k.keyDepth, k.lease(testPool(8)[1].ID)}
		for _, r := range rs {
			want = append(want, k.load(r.name), k.state(r.name))
		}
		for _, key := range want {
			if !slices.Contains(all, key) {
				t.Errorf("key %q missing from the cluster; it holds %v", key, all)
			}
		}
		t.Logf("%d keys, all in slot %d on %v", len(all), slot, holders)
	})
}
