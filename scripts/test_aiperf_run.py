"""Tests of aiperf_run.py (make scripts-test, part of make test): standard
library only, no AIPerf venv.

testdata/aiperf-0.13.0-errors.json is AIPerf 0.13.0's own
profile_export_aiperf.json, captured from
`scripts/aiperf-run.sh http://127.0.0.1:22002 t30.jsonl 10 OUT` against one
`dualmap engine --time-scale 20 --error-rate 0.2` (30 requests of the converted
conversation trace, 6 answered 500), unedited.
"""

import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

import aiperf_run

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "testdata", "aiperf-0.13.0-errors.json")


def write_lines(dirname, name, lines):
    path = os.path.join(dirname, name)
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return path


class SummaryTest(unittest.TestCase):
    def test_captured_sample(self):
        with tempfile.TemporaryDirectory() as d:
            with open(SAMPLE, encoding="utf-8") as src, open(os.path.join(d, "profile_export_aiperf.json"), "w") as dst:
                dst.write(src.read())
            got = aiperf_run.summary(d)
        # The figures AIPerf printed for that run: TTFT p50/p90/p99 210.7 /
        # 525.0 / 534.1 ms, request latency p50 455.5 ms, 396.0 output
        # tokens/s, 24 answered + 6 errors, nothing cached (all prompts differ).
        want = {"ttft_p50_ms": 210.736, "ttft_p90_ms": 524.954, "ttft_p99_ms": 534.054,
                "e2e_p50_ms": 455.456, "output_tokens_per_s": 396.02,
                "requests": 30, "failed": 6, "cached_pct": 0.0}
        self.assertEqual(got, want)

    def test_no_answered_request(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "profile_export_aiperf.json"), "w") as f:
                json.dump({"error_request_count": {"unit": "requests", "avg": 5.0}}, f)
            got = aiperf_run.summary(d)
        self.assertEqual(got["requests"], 5)
        self.assertEqual(got["failed"], 5)
        self.assertIsNone(got["ttft_p50_ms"])

    def test_missing_metric_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "profile_export_aiperf.json"), "w") as f:
                json.dump({"request_count": {"avg": 3.0}}, f)
            with self.assertRaisesRegex(aiperf_run.WorkloadError, "time_to_first_token.p50"):
                aiperf_run.summary(d)

    def test_missing_file(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(aiperf_run.WorkloadError, "not found"):
                aiperf_run.summary(d)

    def test_main_prints_one_json_line(self):
        with tempfile.TemporaryDirectory() as d:
            with open(SAMPLE, encoding="utf-8") as src, open(os.path.join(d, "profile_export_aiperf.json"), "w") as dst:
                dst.write(src.read())
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(aiperf_run.main(["summary", d]), 0)
        lines = out.getvalue().splitlines()
        self.assertEqual(len(lines), 1)
        self.assertEqual(json.loads(lines[0])["failed"], 6)


class TraceTest(unittest.TestCase):
    def test_scale_to_qps_keeps_bursts(self):
        # As trace.ScaleToQPS's "double the rate, bursts kept" case.
        reqs = [{"timestamp": t} for t in (0, 0, 2000, 4000)]
        aiperf_run.scale_to_qps(reqs, 1.5)
        self.assertEqual([r["timestamp"] for r in reqs], [0, 0, 1000, 2000])

    def test_scale_to_qps_spreads_one_instant(self):
        reqs = [{"timestamp": 5} for _ in range(3)]
        aiperf_run.scale_to_qps(reqs, 4)
        self.assertEqual([r["timestamp"] for r in reqs], [5, 255, 505])

    def test_args_rescale_and_point_at_the_copy(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(HERE, "testdata", "aiperf-trace.jsonl")
            args = aiperf_run.aiperf_args(src, 2.0, d, 512)
            self.assertEqual(args[:2], ["--custom-dataset-type", "mooncake_trace"])
            self.assertIn("--fixed-schedule", args)
            self.assertEqual(args[args.index("--isl-block-size") + 1], "512")
            copy = args[args.index("--input-file") + 1]
            self.assertEqual(os.path.dirname(copy), d)
            with open(copy) as f:
                got = [json.loads(line) for line in f]
            with open(src) as f:
                orig = [json.loads(line) for line in f]
        # Three requests at one instant, spread 1/2 s apart; the rest unchanged.
        self.assertEqual([r["timestamp"] for r in got], [0, 500, 1000])
        for g, o in zip(got, orig):
            o.pop("timestamp"), g.pop("timestamp")
            self.assertEqual(g, o)

    def test_bad_traces(self):
        good = {"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]}
        cases = {
            "block count": ([dict(good, hash_ids=[1])], "want 2"),
            "out of order": ([dict(good, timestamp=5), good], "before the previous"),
            "negative time": ([dict(good, timestamp=-1)], "timestamp"),
            "no output": ([dict(good, output_length=0)], "output_length"),
            "float length": ([dict(good, input_length=600.5)], "input_length"),
            "not json": (["{"], "not JSON"),
            "empty": ([], "no requests"),
        }
        with tempfile.TemporaryDirectory() as d:
            for name, (lines, msg) in cases.items():
                with self.subTest(name):
                    path = write_lines(d, "t.jsonl", lines)
                    with self.assertRaisesRegex(aiperf_run.WorkloadError, msg):
                        aiperf_run.aiperf_args(path, 1.0, d, 512)

    def test_block_size_is_the_callers(self):
        with tempfile.TemporaryDirectory() as d:
            path = write_lines(d, "t.jsonl", [{"timestamp": 0, "input_length": 300, "output_length": 4, "hash_ids": [1, 2, 3]}])
            with self.assertRaisesRegex(aiperf_run.WorkloadError, "DUALMAP_AIPERF_BLOCK_SIZE"):
                aiperf_run.aiperf_args(path, 1.0, d, 512)
            self.assertIn("128", aiperf_run.aiperf_args(path, 1.0, d, 128))

    def test_bad_rate(self):
        for rate in (0, -1, float("inf"), float("nan")):
            with self.subTest(rate=rate), tempfile.TemporaryDirectory() as d:
                with self.assertRaisesRegex(aiperf_run.WorkloadError, "rate"):
                    aiperf_run.aiperf_args(os.path.join(HERE, "testdata", "aiperf-trace.jsonl"), rate, d, 512)


class SharedPrefixTest(unittest.TestCase):
    SPEC = os.path.join(HERE, "aiperf-shared-prefix.json")

    def test_args(self):
        with tempfile.TemporaryDirectory() as d:
            args = aiperf_run.aiperf_args(self.SPEC, 3.0, d, 512)
        with open(self.SPEC) as f:
            sp = json.load(f)["shared_prefix"]
        flag = lambda name: args[args.index(name) + 1]
        self.assertEqual(flag("--num-prefix-prompts"), str(sp["groups"]))
        self.assertEqual(flag("--prefix-prompt-length"), str(sp["prefix_tokens"]))
        self.assertEqual(flag("--isl"), str(sp["question_tokens"]))
        self.assertEqual(flag("--request-count"), str(sp["requests"]))
        self.assertEqual(flag("--num-dataset-entries"), str(sp["requests"]))
        self.assertEqual(flag("--request-rate"), "3.0")

    def test_bad_specs(self):
        cases = {
            "unknown key": ({"shared_prefix": {"groups": 1, "prefix_tokens": 1, "question_tokens": 1, "output_tokens": 1, "requests": 1, "seed": 0, "extra": 1}}, "unknown keys"),
            "missing key": ({"shared_prefix": {"groups": 1}}, "prefix_tokens"),
            "zero groups": ({"shared_prefix": {"groups": 0, "prefix_tokens": 1, "question_tokens": 1, "output_tokens": 1, "requests": 1, "seed": 0}}, "groups"),
            "not an object": ([1], "shared_prefix"),
        }
        with tempfile.TemporaryDirectory() as d:
            for name, (doc, msg) in cases.items():
                with self.subTest(name):
                    path = os.path.join(d, "w.json")
                    with open(path, "w") as f:
                        json.dump(doc, f)
                    with self.assertRaisesRegex(aiperf_run.WorkloadError, msg):
                        aiperf_run.aiperf_args(path, 1.0, d, 512)

    def test_trace_has_the_shape(self):
        with open(self.SPEC) as f:
            sp = json.load(f)["shared_prefix"]
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "sp.jsonl")
            aiperf_run.shared_prefix_trace(self.SPEC, out)
            reqs = aiperf_run.read_trace(out, 512)  # valid Mooncake lines
        self.assertEqual(len(reqs), sp["requests"])
        pblocks = -(-sp["prefix_tokens"] // 512)
        prefixes = {tuple(r["hash_ids"][:pblocks]) for r in reqs}
        own = [i for r in reqs for i in r["hash_ids"][pblocks:]]
        self.assertLessEqual(len(prefixes), sp["groups"])
        self.assertGreater(len(prefixes), sp["groups"] // 2)
        self.assertEqual(len(own), len(set(own)), "questions share no block")
        self.assertTrue(all(r["input_length"] == pblocks * 512 + sp["question_tokens"] for r in reqs))


class MainTest(unittest.TestCase):
    def test_usage_and_errors_exit_nonzero(self):
        err = io.StringIO()
        with redirect_stderr(err):
            self.assertEqual(aiperf_run.main([]), 2)
            self.assertEqual(aiperf_run.main(["args", "w.txt", "1", "/tmp", "512"]), 1)
            self.assertEqual(aiperf_run.main(["args", "w.jsonl", "fast", "/tmp", "512"]), 1)
        self.assertIn("want a Mooncake trace", err.getvalue())


if __name__ == "__main__":
    unittest.main()
