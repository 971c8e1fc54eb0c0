#!/usr/bin/env python3
"""A stateful model (Silero VAD, [model] kind = "stateful") through serve's live
audio streams, on loopback against the real binary, in --mode thread|process:

- a WebSocket stream of the 28 s demo gives the speech events `corepool batch
  --model build/models/silero-vad` writes for the same file (each boundary
  within one chunk, 32 ms), then a summary, then close 1000; an event goes
  out once it closes, before the stream ends;
- two files streamed over two WebSockets at once (interleaved, paced) each get
  their own events, those of batch on that file: no state or event mixed;
- the same two files as two sequences interleaved on one gRPC ModelStreamInfer
  call (as tritonclient.grpc drives it) each get their own events;
- a whole-body or tensor infer request is refused with a message naming the stream routes;
- /metrics has corepool_stream_decision_seconds, each sample under its own TYPE;
- process mode: a worker SIGKILLed while streams run loses no event (the chunk
  it held is re-dispatched with its state); with every worker stopped, a
  stream whose audio waits more than 30 s for its chunks is closed 1008.

Without build/models/silero-vad/model.pt it says so and exits 77 (ctest: skipped).

Usage: silero_stream_e2e_test.py --corepool BIN --gen-audio BIN --model DIR --proto DIR --mode thread|process
"""
import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "grpc")]

ARGS = None
CHUNK = 512 / 16000  # models/silero-vad/model.toml: chunk_samples at 16 kHz
MODEL = "silero-vad"


def same_speech(test, got, want, what):
    """The same events in the same order, each boundary within one chunk."""
    test.assertEqual([e["label"] for e in got], [e["label"] for e in want], "%s: %s vs %s" % (what, got, want))
    for g, w in zip(got, want):
        test.assertLessEqual(abs(g["start"] - w["start"]), CHUNK + 1e-6, "%s: %s vs %s" % (what, g, w))
        test.assertLessEqual(abs(g["end"] - w["end"]), CHUNK + 1e-6, "%s: %s vs %s" % (what, g, w))


def batch_events(path):
    out = subprocess.run([ARGS.corepool, "--log-level", "warn", "batch", "--model", ARGS.model, "--format", "jsonl",
                          "--out", "-", path], check=True, capture_output=True, text=True).stdout
    return [e for e in (json.loads(line) for line in out.splitlines() if line.strip()) if "label" in e]


def send_sequence(stream, seq, pieces, start_at=0, stop_at=None, end=True):
    """Pieces [start_at:stop_at] of sequence `seq`; the last piece of all ends it (if `end`)."""
    for i in range(start_at, len(pieces) if stop_at is None else stop_at):
        stream.async_stream_infer(MODEL, pieces[i], request_id="%s-%d" % (seq, i), sequence_id=seq,
                                  sequence_start=i == 0, sequence_end=end and i == len(pieces) - 1,
                                  parameters={"sample_rate": 16000} if i == 0 else None)


class Files:
    """The demo (speech in its first 8 s) and a second file made of it: 2 s of
    silence, the demo's first 9 s, 3 s of silence, its first 9 s again; and
    batch's events for each."""

    def __init__(self, workdir):
        self.a = os.path.join(workdir, "demo.wav")
        subprocess.run([ARGS.gen_audio, "--demo", "--out", self.a], check=True, stdout=subprocess.DEVNULL)
        self.rate, self.pcm_a = gs.read_wav(self.a)
        speech = self.pcm_a[:9 * self.rate * 2]
        self.pcm_b = bytes(2 * self.rate * 2) + speech + bytes(3 * self.rate * 2) + speech
        self.b = os.path.join(workdir, "twice.wav")
        gs.write_wav(self.b, self.rate, self.pcm_b)
        self.want_a, self.want_b = batch_events(self.a), batch_events(self.b)


class SileroStreams(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.files = Files(cls.dir.name)
        cls.server = gs.Server(cls.dir.name)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def url(self):
        return "ws://127.0.0.1:%d/v2/models/%s/audio/stream?sample_rate=16000&channels=1&format=s16le" % (
            self.server.http_port, MODEL)

    def test_a_websocket_stream_gives_batchs_speech_events(self):
        f = self.files
        self.assertTrue(f.want_a, "batch found no speech in the demo")
        events, summary, code, reason, _, _ = asyncio.run(ws.stream(self.url(), ws.chunks(f.pcm_a, 3200)))
        self.assertEqual(code, 1000, reason)
        same_speech(self, events, f.want_a, "demo")
        self.assertEqual(summary["events"], len(events))
        self.assertEqual(summary["end"], "end")
        self.assertEqual(summary["segments"], -(-len(f.pcm_a) // 2 // 512))  # chunks, the last zero-padded
        self.assertAlmostEqual(summary["duration"], len(f.pcm_a) / 2 / f.rate, delta=0.001)

    def test_an_event_goes_out_as_it_closes_before_the_stream_ends(self):
        # The demo's speech ends by 8 s: with 12 s sent and nothing more, its
        # event must come (min_silence and two pads later), not wait for the end.
        f = self.files
        first = f.pcm_a[:12 * f.rate * 2]

        async def run():
            async with ws.websockets.connect(self.url()) as sock:
                for piece in ws.chunks(first, 3200):
                    await sock.send(piece)
                early = json.loads(await asyncio.wait_for(sock.recv(), 60))
                for piece in ws.chunks(f.pcm_a[len(first):], 3200):
                    await sock.send(piece)
                await sock.send(json.dumps({"end": True}))
                rest = [json.loads(m) async for m in sock]
                return early, rest

        early, rest = asyncio.run(run())
        self.assertNotIn("summary", early, "the summary came first: no event went out before the end")
        # Not flushed by the idle timeout (serve.stream_idle_s) while the client waited: ended by the client.
        self.assertEqual(rest[-1]["summary"]["end"], "end")
        events = [early] + [e for e in rest if "summary" not in e]
        same_speech(self, events, f.want_a, "demo, 12 s then the rest")

    def test_bad_audio_closes_1007_with_the_reason(self):
        async def run():
            async with ws.websockets.connect(self.url()) as sock:
                await sock.send(self.files.pcm_a[:3200])
                await sock.send(b"\x00\x00\x00")  # not whole s16le frames
                await asyncio.wait_for(sock.wait_closed(), 60)
                return sock.close_code, sock.close_reason

        code, reason = asyncio.run(run())
        self.assertEqual(code, 1007, reason)
        self.assertIn("not whole frames", reason)

    def test_two_websockets_at_once_each_get_their_own_events(self):
        f = self.files
        self.assertGreaterEqual(len(f.want_b), 2, "batch found fewer than two speech events in the second file")

        async def both():
            # 0.1 s pieces, 10 ms apart: the two streams' chunks reach the executor together.
            return await asyncio.gather(ws.stream(self.url(), ws.chunks(f.pcm_a, 3200), 0.01),
                                        ws.stream(self.url(), ws.chunks(f.pcm_b, 3200), 0.01))

        (ev_a, sum_a, code_a, reason_a, _, _), (ev_b, sum_b, code_b, reason_b, _, _) = asyncio.run(both())
        self.assertEqual((code_a, code_b), (1000, 1000), (reason_a, reason_b))
        same_speech(self, ev_a, f.want_a, "stream A (the demo)")
        same_speech(self, ev_b, f.want_b, "stream B (its speech twice)")

    def test_two_grpc_sequences_on_one_call_each_get_their_own_events(self):
        f = self.files
        got = gs.Collector()
        stream = gs.Stream(self.server.stub, got)
        a, b = gs.chunks(f.pcm_a, 8000), gs.chunks(f.pcm_b, 8000)
        for i in range(max(len(a), len(b))):  # interleaved, request by request
            if i < len(a):
                send_sequence(stream, 1, a, start_at=i, stop_at=i + 1)
            if i < len(b):
                send_sequence(stream, 2, b, start_at=i, stop_at=i + 1)
        stream.stop_stream()
        self.assertEqual(got.errors, [])
        same_speech(self, got.events.get(1, []), f.want_a, "sequence 1 (the demo)")
        same_speech(self, got.events.get(2, []), f.want_b, "sequence 2 (its speech twice)")
        self.assertEqual(got.finals[1]["events"], len(f.want_a))
        self.assertEqual(got.finals[2]["events"], len(f.want_b))

    def test_a_whole_body_request_names_the_stream_routes(self):
        with open(self.files.a, "rb") as wav:
            request = urllib.request.Request("http://127.0.0.1:%d/v1/audio:tag" % self.server.http_port,
                                             data=wav.read(), method="POST")
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=60)
        self.assertEqual(caught.exception.code, 400)
        self.assertIn("/v2/models/silero-vad/audio/stream", caught.exception.read().decode())

    def test_a_tensor_infer_request_names_the_stream_routes(self):
        # One item of the task's own layout (context + chunk + state: 64 + 512 + 256 floats).
        body = json.dumps({"inputs": [{"name": "input", "shape": [1, 832], "datatype": "FP32",
                                       "data": [0.0] * 832}]}).encode()
        request = urllib.request.Request("http://127.0.0.1:%d/v2/models/%s/infer" % (self.server.http_port, MODEL),
                                         data=body, method="POST", headers={"Content-Type": "application/json"})
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=60)
        self.assertEqual(caught.exception.code, 400)
        self.assertIn("is stateful", caught.exception.read().decode())

    def test_metrics_have_the_decision_histogram_under_its_own_type(self):
        asyncio.run(ws.stream(self.url(), ws.chunks(self.files.pcm_a[:3 * 16000 * 2], 3200)))
        metrics = self.server.metrics()
        gs.check_exposition(self, metrics)
        self.assertIn("# TYPE corepool_stream_decision_seconds histogram", metrics)
        self.assertGreater(gs.metric(metrics, "corepool_stream_decision_seconds_count"), 90)  # 3 s: 94 chunks
        self.assertRegex(metrics, r'corepool_stream_decision_seconds_bucket\{le="0.1"\} [1-9]')


class WorkerKilled(unittest.TestCase):
    """Process mode: a worker SIGKILLed while streams run loses no event."""

    def test_a_worker_killed_mid_stream_loses_no_event(self):
        if ARGS.mode != "process":
            self.skipTest("workers are processes in process mode only")
        workdir = tempfile.TemporaryDirectory()
        self.addCleanup(workdir.cleanup)
        f = Files(workdir.name)
        server = gs.Server(workdir.name)
        self.addCleanup(server.stop)
        got = gs.Collector()
        stream = gs.Stream(server.stub, got)
        seqs = {1: gs.chunks(f.pcm_a, 8000), 2: gs.chunks(f.pcm_b, 8000), 3: gs.chunks(f.pcm_a, 8000)}
        for seq, pieces in seqs.items():
            send_sequence(stream, seq, pieces, stop_at=10)
        gs.wait_for(lambda: gs.metric(server.metrics(), "corepool_segments_total") > 50, 60, "chunks decided")
        # Stop a worker: the chunks it takes are never answered, and those
        # streams wait for their state. Then kill it: what it held must run
        # again elsewhere, with the state it was sent with.
        victim = server.workers()[0]
        ran_before = gs.metric(server.metrics(), "corepool_segments_total")
        os.kill(victim, signal.SIGSTOP)
        for seq, pieces in seqs.items():
            send_sequence(stream, seq, pieces, start_at=10)
        gs.wait_for(lambda: gs.metric(server.metrics(), "corepool_segments_total") > ran_before + 4
                    and gs.metric(server.metrics(), "corepool_queue_depth") > 0, 60, "chunks held by the stopped worker")
        os.kill(victim, signal.SIGKILL)
        stream.stop_stream()
        self.assertEqual(got.errors, [])
        for seq, want in ((1, f.want_a), (2, f.want_b), (3, f.want_a)):
            same_speech(self, got.events.get(seq, []), want, "sequence %d" % seq)
            self.assertEqual(got.finals[seq]["events"], len(want))
        self.assertGreater(gs.metric(server.metrics(), "corepool_segments_redispatched_total"), 0,
                           "the killed worker held no chunk: the test did not test it")


class ChunksWaiting(unittest.TestCase):
    """Process mode: audio waiting for its chunks' decisions is bounded like the queue."""

    def test_a_stream_whose_chunks_wait_more_than_30_s_is_ended_queue_full(self):
        if ARGS.mode != "process":
            self.skipTest("workers are processes in process mode only")
        workdir = tempfile.TemporaryDirectory()
        self.addCleanup(workdir.cleanup)
        f = Files(workdir.name)
        server = gs.Server(workdir.name)
        self.addCleanup(server.stop)
        workers = server.workers()
        for pid in workers:  # no chunk is decided while they are stopped
            os.kill(pid, signal.SIGSTOP)
        self.addCleanup(lambda: [os.kill(pid, signal.SIGCONT) for pid in workers if os.path.exists("/proc/%d" % pid)])
        url = "ws://127.0.0.1:%d/v2/models/%s/audio/stream?sample_rate=16000&channels=1&format=s16le" % (
            server.http_port, MODEL)

        async def flood():
            async with ws.websockets.connect(url) as sock:
                try:
                    for piece in ws.chunks(f.pcm_a + f.pcm_a[:8 * 16000 * 2], 16000):  # 36 s of audio
                        await sock.send(piece)
                except ws.websockets.ConnectionClosed:
                    pass
                await asyncio.wait_for(sock.wait_closed(), 60)
                return sock.close_code, sock.close_reason

        code, reason = asyncio.run(flood())
        self.assertEqual(code, 1008, reason)
        self.assertIn("stream queue full", reason)


def main():
    global ARGS, gs, ws
    parser = argparse.ArgumentParser()
    parser.add_argument("--corepool", required=True)
    parser.add_argument("--gen-audio", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--proto", required=True)
    parser.add_argument("--mode", default="thread")
    ARGS, rest = parser.parse_known_args()
    if not os.path.exists(os.path.join(ARGS.model, "model.pt")):
        print("Silero VAD skipped: %s/model.pt not found (the build copies it from "
              "../shared/models/silero-vad/silero_vad.jit when that file exists; see models/README.md)" % ARGS.model)
        sys.exit(77)
    import grpc_stream_e2e_test as gs_module
    import stream_e2e_test as ws_module
    import grpc as grpc_module
    from grpc_e2e_test import generate_stubs
    gs, ws = gs_module, ws_module
    gs.ARGS = ARGS  # its Server starts `corepool serve --mode ARGS.mode --model ARGS.model`
    stubs = tempfile.TemporaryDirectory()
    generate_stubs(ARGS.proto, stubs.name)
    import grpc_service_pb2
    import grpc_service_pb2_grpc
    gs.pb, gs.rpc, gs.grpc = grpc_service_pb2, grpc_service_pb2_grpc, grpc_module
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


gs = ws = None

if __name__ == "__main__":
    main()
