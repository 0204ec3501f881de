"""Publishes a fixed scenario of KV-cache events with SGLang's own ZMQ
publisher (sglang/srt/disaggregation/kv_events.py from the SGLang wheel,
run over pyzmq, i.e. libzmq), for e2e/kvevents_sglang_test.go.

usage: python sglang_kv_publisher.py KV_EVENTS_PY ENDPOINT REPLAY_ENDPOINT

The module is loaded on its own: the two SGLang imports it makes that are
not needed by the publisher are given stand-ins. It publishes, in order:
  0. BlockStored of 2 blocks (tokens 1000..1031), no parent, signed hashes
  1. BlockStored of 1 block (tokens 1032..1047), parent the second block
  2. BlockRemoved of that block
  3. BlockStored of 1 block with a cache_salt (tokens 2000..2015)
then an empty batch every 50 ms until stdin closes.
"""
import importlib.util
import sys
import threading
import time
import types


def stand_ins():
    rc = types.ModuleType("sglang.srt.runtime_context")
    rc.get_parallel = lambda: types.SimpleNamespace(attn_dp_rank=0, dp_size=1)
    net = types.ModuleType("sglang.srt.utils.network")

    class NetworkAddress:  # only parse/to_tcp of host:port are used
        def __init__(self, host, port):
            self.host, self.port, self.is_ipv6 = host, port, ":" in host

        @classmethod
        def parse(cls, s):
            host, _, port = s.rpartition(":")
            return cls(host.strip("[]"), int(port))

        def to_tcp(self):
            return f"tcp://{self.host}:{self.port}"

    net.NetworkAddress = NetworkAddress
    for name in ("sglang", "sglang.srt", "sglang.srt.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["sglang.srt.runtime_context"] = rc
    sys.modules["sglang.srt.utils.network"] = net


def main():
    path, endpoint, replay = sys.argv[1:4]
    stand_ins()
    spec = importlib.util.spec_from_file_location("sglang_kv_events", path)
    kv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kv)
    pub = kv.ZmqEventPublisher(attn_dp_rank=0, endpoint=endpoint, replay_endpoint=replay, bind=True)
    toks = list(range(1000, 1048))
    h1, h2, h3, h4 = -(2**62) - 5, 7, 2**62 + 9, -11
    batches = [
        [kv.BlockStored(block_hashes=[h1, h2], parent_block_hash=None, token_ids=toks[:32], block_size=16, lora_id=None, medium="GPU")],
        [kv.BlockStored(block_hashes=[h3], parent_block_hash=h2, token_ids=toks[32:48], block_size=16, lora_id=None, medium="GPU")],
        [kv.BlockRemoved(block_hashes=[h3], medium="GPU")],
        [kv.BlockStored(block_hashes=[h4], parent_block_hash=None, token_ids=list(range(2000, 2016)), block_size=16, lora_id=None, cache_salt="s")],
    ]
    for evs in batches:
        pub.publish(kv.KVEventBatch(ts=time.time(), events=evs))
    print("published", flush=True)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    while not done.wait(0.05):
        pub.publish(kv.KVEventBatch(ts=time.time(), events=[]))
    pub.shutdown()


if __name__ == "__main__":
    main()
