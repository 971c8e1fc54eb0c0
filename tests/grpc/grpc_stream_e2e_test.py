#!/usr/bin/env python3
"""Triton's ModelStreamInfer on the real `corepool serve`, driven the way
tritonclient.grpc's start_stream / async_stream_infer / stop_stream drive it
(tritonclient is not in Debian): one bidirectional call fed from a queue by a
request iterator, a thread reading the responses into a callback(result,
error), requests carrying sequence_id / sequence_start / sequence_end in
ModelInferRequest.parameters and the audio as input "AUDIO" (INT16) in
raw_input_contents. Stubs are generated at test time (python3-grpc-tools) from
the server's own protos.

- the 28 s demo gives the events `corepool batch` writes for the same file
  (same labels, each boundary within one hop), the first one while the
  sequence is still open, then a final response (triton_final_response);
- two sequences interleaved on one call get their own events, each those of
  `corepool batch` on its own half of the demo;
- bad requests get an error_message naming what and where, and the call goes on;
- process mode: SIGKILL of a worker mid-stream loses no event, and /metrics
  shows the stream's lag while it is open;
- a client that sends a long sequence and reads nothing stalls nobody, costs
  at most serve.grpc_stream_backlog responses waiting (past that its events are
  dropped and counted), and when it reads at last gets the events that were not
  dropped, then a final response whose `dropped` is the count it missed.

Usage: grpc_stream_e2e_test.py --corepool BIN --gen-audio BIN --model DIR --proto DIR --mode thread|process
"""
import argparse
import json
import os
import queue
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
import wave

# The stubs' generation and the comparison with batch are the other e2e tests'.
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stream")]
from grpc_e2e_test import generate_stubs  # noqa: E402
from stream_e2e_test import HOP, read_wav, same_events  # noqa: E402  (same labels, each boundary within one hop)

ARGS = None
pb = rpc = grpc = None


def wait_for(predicate, timeout, what):
    """Polls predicate() until it returns something true, and returns that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(0.01)


class Server:
    """One `corepool serve` with HTTP and gRPC on ports it picked."""

    def __init__(self, workdir, serve_lines="", idle_s=20):
        self.config = os.path.join(workdir, "serve-%d.toml" % idle_s)
        with open(self.config, "w") as f:
            f.write("[engine]\nworkers = 2\n[serve]\nstream_idle_s = %d\n%s\n" % (idle_s, serve_lines))
        self.log_path = self.config + ".log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([ARGS.corepool, "--log-level", "info", "--config", self.config, "serve",
                                      "--mode", ARGS.mode, "--model", ARGS.model, "--listen", "127.0.0.1:0",
                                      "--grpc-listen", "127.0.0.1:0"], stdout=self.log, stderr=subprocess.STDOUT)
        # Both doors log their port, in either order: wait for both lines.
        wait_for(lambda: ("gRPC: serving on" in self.text() and re.search(r"on http://[^ ]*:[0-9]+", self.text()))
                 or self.proc.poll() is not None, 120, "serve to start")
        if self.proc.poll() is not None:
            raise RuntimeError("serve exited %s:\n%s" % (self.proc.returncode, self.text()))
        self.http_port = int(re.search(r"on http://[^ ]*:([0-9]+)", self.text()).group(1))
        self.grpc_port = int(re.search(r"gRPC: serving on grpc://[^ ]*:([0-9]+)", self.text()).group(1))
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port)
        self.stub = rpc.GRPCInferenceServiceStub(self.channel)

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.http_port, timeout=10) as r:
            return r.read().decode()

    def workers(self):
        kids = []
        for task in os.listdir("/proc/%d/task" % self.proc.pid):
            try:
                with open("/proc/%d/task/%s/children" % (self.proc.pid, task)) as f:
                    kids += [int(p) for p in f.read().split()]
            except FileNotFoundError:  # a thread that ended since the listing
                pass
        return kids

    def stop(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self.log.close()
        assert code == 0, "serve exited %d:\n%s" % (code, self.text())


class Stream:
    """What tritonclient.grpc.InferenceServerClient does for start_stream(callback),
    async_stream_infer(...) and stop_stream(): requests go into a queue that a
    request iterator feeds to ModelStreamInfer; a thread reads the responses
    and calls callback(result, error) for each, `error` being the
    error_message when there is one."""

    def __init__(self, stub, callback, reading=True):
        self.requests = queue.Queue()
        self.callback = callback
        self.responses = stub.ModelStreamInfer(iter(self.requests.get, None))
        self.reader = threading.Thread(target=self.read)
        if reading:  # else a client that reads nothing until reader.start()
            self.reader.start()

    def read(self):
        try:
            for response in self.responses:
                if response.error_message:
                    self.callback(None, response.error_message)
                else:
                    self.callback(response.infer_response, None)
        except grpc.RpcError as e:
            self.callback(None, "rpc: %s" % e.code())

    def async_stream_infer(self, model_name, pcm, request_id="", sequence_id=0, sequence_start=False,
                           sequence_end=False, parameters=None, datatype="INT16", width=2):
        # tritonclient's _get_inference_request: the sequence triple and the
        # custom parameters in request.parameters, the input's data (from
        # set_data_from_numpy) in raw_input_contents.
        request = pb.ModelInferRequest(model_name=model_name, id=request_id)
        if sequence_id != 0 and sequence_id != "":
            if isinstance(sequence_id, str):
                request.parameters["sequence_id"].string_param = sequence_id
            else:
                request.parameters["sequence_id"].int64_param = sequence_id
            request.parameters["sequence_start"].bool_param = sequence_start
            request.parameters["sequence_end"].bool_param = sequence_end
        for key, value in (parameters or {}).items():
            request.parameters[key].int64_param = value
        tensor = request.inputs.add(name="AUDIO", datatype=datatype)
        tensor.shape.append(len(pcm) // width)
        request.raw_input_contents.append(pcm)
        self.requests.put(request)

    def stop_stream(self):
        self.requests.put(None)
        self.reader.join(60)
        assert not self.reader.is_alive(), "the call did not end"


def bytes_output(response, name):
    """An output of Triton's BYTES type, one element: what InferResult.as_numpy(name)[0] gives."""
    for i, out in enumerate(response.outputs):
        if out.name == name:
            raw = response.raw_output_contents[i]
            n = struct.unpack("<I", raw[:4])[0]
            return raw[4:4 + n].decode()
    return None


class Collector:
    """The callback: events and final responses by sequence, errors in order."""

    def __init__(self):
        self.lock = threading.Lock()
        self.events, self.finals, self.errors = {}, {}, []

    def __call__(self, result, error):
        with self.lock:
            if error is not None:
                self.errors.append(error)
                return
            params = result.parameters
            seq = params["sequence_id"].int64_param or params["sequence_id"].string_param
            if params["triton_final_response"].bool_param:
                self.finals[seq] = json.loads(bytes_output(result, "SUMMARY"))
            else:
                self.events.setdefault(seq, []).append(json.loads(bytes_output(result, "EVENT")))

    def count(self, seq):
        with self.lock:
            return len(self.events.get(seq, []))


def write_wav(path, rate, pcm):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)


def batch_events(path):
    out = subprocess.run([ARGS.corepool, "--log-level", "warn", "batch", "--model", ARGS.model, "--format", "jsonl",
                          "--out", "-", path], check=True, capture_output=True, text=True).stdout
    return [e for e in (json.loads(line) for line in out.splitlines() if line.strip()) if "label" in e]


def chunks(data, size):
    return [data[i:i + size] for i in range(0, len(data), size)]


def send_sequence(stream, seq, pieces, start_at=0, end=True):
    """Pieces [start_at:] of sequence `seq` (sample_rate on its first request)."""
    for i, piece in enumerate(pieces[start_at:], start_at):
        last = end and i == len(pieces) - 1
        stream.async_stream_infer("default", piece, request_id="%s-%d" % (seq, i), sequence_id=seq,
                                  sequence_start=i == 0, sequence_end=last,
                                  parameters={"sample_rate": 16000} if i == 0 else None)


class StreamInfer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.wav = os.path.join(cls.dir.name, "demo.wav")
        subprocess.run([ARGS.gen_audio, "--demo", "--out", cls.wav], check=True, stdout=subprocess.DEVNULL)
        cls.rate, cls.pcm = read_wav(cls.wav)
        assert cls.rate == 16000
        cls.batch = batch_events(cls.wav)
        assert cls.batch, "batch found no events in the demo"
        cls.server = Server(cls.dir.name, "max_streams = 3")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def test_the_demo_gives_batchs_events_the_first_while_open_then_a_final_response(self):
        got = Collector()
        stream = Stream(self.server.stub, got)
        pieces = chunks(self.pcm, 8000)  # 0.25 s each
        # The first 10 s, then wait for an event with the sequence still open.
        send_sequence(stream, 1, pieces[:40], end=False)
        wait_for(lambda: got.count(1) > 0, 60, "an event before the sequence's end")
        self.assertNotIn(1, got.finals)
        send_sequence(stream, 1, pieces, start_at=40)
        stream.stop_stream()
        self.assertEqual(got.errors, [])
        same_events(self, got.events[1], self.batch)
        summary = got.finals[1]
        self.assertEqual(summary["events"], len(got.events[1]))
        self.assertEqual(summary["end"], "end")
        self.assertAlmostEqual(summary["duration"], len(self.pcm) / 2 / self.rate, delta=0.01)
        self.assertRegex(self.server.metrics(), r"corepool_streams_closed_total\{how=\"end\"\} [1-9]")

    def test_two_sequences_interleaved_on_one_call_get_their_own_events(self):
        half = len(self.pcm) // 4 * 2  # 14 s, whole samples
        halves = [self.pcm[:half], self.pcm[half:]]
        want = []
        for i, pcm in enumerate(halves):
            path = os.path.join(self.dir.name, "half%d.wav" % i)
            write_wav(path, self.rate, pcm)
            want.append(batch_events(path))
            self.assertTrue(want[-1], "batch found no events in half %d" % i)
        got = Collector()
        stream = Stream(self.server.stub, got)
        a, b = chunks(halves[0], 8000), chunks(halves[1], 8000)
        for i in range(max(len(a), len(b))):  # 11 and "mic-2", chunk by chunk
            for seq, pieces in ((11, a), ("mic-2", b)):
                if i < len(pieces):
                    stream.async_stream_infer("default", pieces[i], sequence_id=seq, sequence_start=i == 0,
                                              sequence_end=i == len(pieces) - 1,
                                              parameters={"sample_rate": 16000} if i == 0 else None)
        stream.stop_stream()
        self.assertEqual(got.errors, [])
        same_events(self, got.events[11], want[0])
        same_events(self, got.events["mic-2"], want[1])
        self.assertEqual(set(got.finals), {11, "mic-2"})

    def test_bad_requests_get_an_error_message_naming_what_and_where_and_the_call_goes_on(self):
        got = Collector()
        stream = Stream(self.server.stub, got)
        pcm = self.pcm[:16000]
        stream.async_stream_infer("default", pcm, sequence_id=5)  # no sequence_start
        stream.async_stream_infer("default", pcm, sequence_id=6, sequence_start=True, parameters={"sample_rate": 16000},
                                  datatype="INT32", width=4)
        stream.async_stream_infer("default", pcm[:3], request_id="odd", sequence_id=7, sequence_start=True,
                                  parameters={"sample_rate": 16000}, width=1)
        stream.async_stream_infer("nope", pcm, sequence_id=8, sequence_start=True, parameters={"sample_rate": 16000})
        stream.async_stream_infer("default", pcm, sequence_id=9, sequence_start=True)  # no sample_rate
        # max_streams = 3: three open, the fourth refused.
        for seq in (21, 22, 23, 24):
            stream.async_stream_infer("default", pcm, sequence_id=seq, sequence_start=True,
                                      parameters={"sample_rate": 16000})
        wait_for(lambda: len(got.errors) >= 6, 30, "six errors")
        for seq in (21, 22, 23):
            stream.async_stream_infer("default", pcm, sequence_id=seq, sequence_end=True)
        stream.stop_stream()
        expected = ["sequence 5: no such sequence open",
                    "sequence 6: inputs[0].datatype: \"INT32\"",
                    "sequence 7, request \"odd\": raw_input_contents[0]: 3 bytes are not whole INT16 samples",
                    "sequence 8: no model \"nope\"",
                    "sequence 9: parameters: sample_rate: missing",
                    "sequence 24: too many streams: serve.max_streams (3)"]
        self.assertEqual(len(got.errors), len(expected), got.errors)
        for error, says in zip(got.errors, expected):
            self.assertIn(says, error)
        self.assertEqual(set(got.finals), {21, 22, 23})  # the call went on


class Ends(unittest.TestCase):
    """A sequence the client leaves open ends at the idle timeout or at the
    server's stop, each with its final response saying so."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.pcm = b"\x00\x00" * 16000  # 1 s of silence

    def open_sequence(self, server):
        got = Collector()
        stream = Stream(server.stub, got)
        stream.async_stream_infer("default", self.pcm, sequence_id=1, sequence_start=True,
                                  parameters={"sample_rate": 16000})
        return got, stream

    def test_an_idle_sequence_gets_its_final_response_and_the_call_goes_on(self):
        server = Server(self.dir.name, idle_s=1)
        self.addCleanup(server.stop)
        got, stream = self.open_sequence(server)
        wait_for(lambda: 1 in got.finals, 10, "the idle sequence's final response")
        self.assertEqual(got.finals[1]["end"], "idle")
        self.assertEqual([e["label"] for e in got.events[1]], ["silence"])
        send_sequence(stream, 2, [self.pcm])  # the call is still good for another sequence
        stream.stop_stream()
        self.assertEqual(got.errors, [])
        self.assertEqual(got.finals[2]["end"], "end")

    def test_sigterm_flushes_an_open_sequence_and_ends_the_call(self):
        server = Server(self.dir.name)
        got, stream = self.open_sequence(server)
        wait_for(lambda: "corepool_streams_open 1" in server.metrics(), 10, "the sequence to open")
        server.proc.terminate()
        stream.reader.join(60)  # the call ends without the client ending it
        self.assertFalse(stream.reader.is_alive(), "the call did not end at the server's stop")
        self.assertEqual(got.errors, [])
        self.assertEqual(got.finals[1]["end"], "server_stop")
        self.assertEqual([e["label"] for e in got.events[1]], ["silence"])
        # The server is exiting of its own accord: wait for it rather than
        # have stop() send a second SIGTERM into its last moments (seen under
        # load: killed by that signal, -15, after it had logged "stopped").
        self.assertEqual(server.proc.wait(60), 0, server.text())
        server.stop()
        stream.requests.put(None)


class WorkerKilled(unittest.TestCase):
    """Process mode: a worker SIGKILLed while a sequence streams loses no event."""

    def test_a_worker_killed_mid_stream_loses_no_event_and_metrics_show_the_lag(self):
        if ARGS.mode != "process":
            self.skipTest("workers are processes in process mode only")
        workdir = tempfile.TemporaryDirectory()
        self.addCleanup(workdir.cleanup)
        wav = os.path.join(workdir.name, "demo.wav")
        subprocess.run([ARGS.gen_audio, "--demo", "--out", wav], check=True, stdout=subprocess.DEVNULL)
        rate, pcm = read_wav(wav)
        want = batch_events(wav)
        self.assertTrue(want, "batch found no events in the demo")
        server = Server(workdir.name)
        self.addCleanup(server.stop)
        got = Collector()
        stream = Stream(server.stub, got)
        pieces = chunks(pcm, 8000)
        send_sequence(stream, 1, pieces[:40], end=False)
        wait_for(lambda: got.count(1) > 0, 60, "the first event")
        metrics = server.metrics()
        self.assertRegex(metrics, r'corepool_stream_lag_seconds\{stream="[0-9]+"\} [0-9.e+-]+\n')
        check_exposition(self, metrics)
        # Stop a worker, send the rest: the dispatcher gives it segments
        # (the least loaded worker first) that it never answers, while the
        # other worker runs its share. Then kill it: what it held must run
        # again elsewhere.
        victim = server.workers()[0]
        ran_before = metric(metrics, "corepool_segments_total")
        os.kill(victim, signal.SIGSTOP)
        send_sequence(stream, 1, pieces, start_at=40)
        wait_for(lambda: metric(server.metrics(), "corepool_segments_total") > ran_before + 4
                 and metric(server.metrics(), "corepool_queue_depth") > 0, 60, "segments held by the stopped worker")
        os.kill(victim, signal.SIGKILL)
        stream.stop_stream()
        self.assertEqual(got.errors, [])
        same_events(self, got.events[1], want)
        self.assertEqual(got.finals[1]["events"], len(want))
        self.assertGreater(metric(server.metrics(), "corepool_segments_redispatched_total"), 0,
                           "the killed worker held no segment: the test did not test it")
        wait_for(lambda: victim not in server.workers() and len(server.workers()) == 2, 60, "the worker's respawn")


class SlowReader(unittest.TestCase):
    """A client that sends a long sequence as fast as the server takes it and
    reads none of its responses (a tritonclient whose callback is stuck). Its
    HTTP/2 window fills, the server's writes stop completing, and responses
    queue on its call: at most serve.grpc_stream_backlog (BACKLOG here), past
    that its events are dropped and counted. The audio alternates noise and
    silence every 2 s (the default model's segment: shorter sections all
    come out noise): five minutes of it give 150 events, more than the slow
    client's small window (SLOW_WINDOW) and the backlog hold; batch on the
    same file counts them independently. With the cap gone
    (--slow-backlog 1000000) nothing is dropped and this fails."""

    BACKLOG = 8

    def test_a_client_that_reads_nothing_stalls_nobody_costs_a_bounded_backlog_and_learns_what_it_lost(self):
        workdir = tempfile.TemporaryDirectory()
        self.addCleanup(workdir.cleanup)
        wav = os.path.join(workdir.name, "busy.wav")
        subprocess.run([ARGS.gen_audio, "--sections", "noise:2,silence:2", "--repeat", str(ARGS.slow_repeat),
                        "--out", wav], check=True, stdout=subprocess.DEVNULL)
        rate, pcm = read_wav(wav)
        want = batch_events(wav)
        demo = os.path.join(workdir.name, "demo.wav")
        subprocess.run([ARGS.gen_audio, "--demo", "--out", demo], check=True, stdout=subprocess.DEVNULL)
        demo_pcm = read_wav(demo)[1]
        demo_want = batch_events(demo)
        # No idle close: on a loaded machine the sender may wait longer than
        # the default 20 s for the lag to fall, and an idle close would end the
        # sequence (and its per-stream metrics) before anything was dropped.
        server = Server(workdir.name, "grpc_stream_backlog = %d" % ARGS.slow_backlog, idle_s=600)
        self.addCleanup(server.stop)

        slow_got = Collector()
        slow_channel = grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port, options=SLOW_OPTIONS)
        self.addCleanup(slow_channel.close)
        slow = Stream(rpc.GRPCInferenceServiceStub(slow_channel), slow_got, reading=False)
        pieces = chunks(pcm, rate * 2)  # 1 s each
        send_sequence(slow, 1, pieces[:1], end=False)
        stream_id = wait_for(lambda: re.search(r'corepool_stream_lag_seconds\{stream="([0-9]+)"\}',
                                                     server.metrics()), 30, "the slow sequence to open").group(1)

        def of_slow(name):
            m = re.search(r'^%s\{stream="%s"\} ([0-9.e+-]+)$' % (name, stream_id), server.metrics(), re.M)
            return float(m.group(1)) if m else None

        # As fast as the server takes it: never more than 10 s of audio
        # waiting to be tagged (30 s would end the sequence, queue_full).
        for i in range(1, len(pieces) - 1):
            send_sequence(slow, 1, pieces[:i + 1], start_at=i, end=False)
            if i % 5 == 0:
                wait_for(lambda: (of_slow("corepool_stream_lag_seconds") or 0) < 10, 60, "the slow sequence's lag")
        try:
            wait_for(lambda: (of_slow("corepool_stream_dropped") or 0) > 0, 60,
                     "the slow sequence to drop events (its backlog full)")
        except AssertionError:
            print([m for m in server.metrics().splitlines() if re.match(r"corepool_stream(s_|_dropped|_events)", m)],
                  file=sys.stderr)
            raise

        # Meanwhile, on another connection: events and the final response as usual.
        channel = grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port)
        self.addCleanup(channel.close)
        fast_got = Collector()
        fast = Stream(rpc.GRPCInferenceServiceStub(channel), fast_got)
        send_sequence(fast, 2, chunks(demo_pcm, 8000))
        wait_for(lambda: 2 in fast_got.finals, 60, "the other client's final response")
        fast.stop_stream()
        self.assertEqual(fast_got.errors, [])
        same_events(self, fast_got.events[2], demo_want)
        with urllib.request.urlopen("http://127.0.0.1:%d/v2/health/ready" % server.http_port, timeout=10) as r:
            self.assertEqual(r.status, 200)

        # The slow sequence's end; once it has closed on the server, read at last.
        send_sequence(slow, 1, pieces, start_at=len(pieces) - 1)
        wait_for(lambda: of_slow("corepool_stream_events") is None, 60, "the slow sequence to close")
        slow.reader.start()
        wait_for(lambda: 1 in slow_got.finals, 30, "the slow client's final response")
        slow.stop_stream()
        self.assertEqual(slow_got.errors, [])
        got, summary = slow_got.events.get(1, []), slow_got.finals[1]
        self.assertEqual(summary["end"], "end")
        self.assertEqual(summary["events"], len(want), "the server made other events than batch")
        self.assertGreater(summary["dropped"], 0, "nothing was dropped: the backlog was not bounded")
        self.assertEqual(summary["dropped"], len(want) - len(got), "dropped is not the count the client missed")
        self.assertGreaterEqual(len(got), ARGS.slow_backlog, "fewer events than the backlog holds")
        self.assertLessEqual(len(got), ARGS.slow_backlog + SLOW_WINDOW // 100,
                             "more events than the backlog and the client's window hold")
        # What came is batch's, in order, with holes where events were dropped.
        at = 0
        for event in got:
            while at < len(want) and not (want[at]["label"] == event["label"] and
                                          abs(want[at]["start"] - event["start"]) <= HOP and
                                          abs(want[at]["end"] - event["end"]) <= HOP):
                at += 1
            self.assertLess(at, len(want), "%s is none of batch's events (in order)" % event)
            at += 1
        print("slow reader: %d events, %d received, %d dropped (backlog %d)" %
              (len(want), len(got), summary["dropped"], ARGS.slow_backlog), file=sys.stderr)


# The slow client's HTTP/2 receive window: 8 KiB, not grown by BDP probes.
# With gRPC's default (64 KiB, growing) a few hundred events fit in the
# window before the server's writes stop completing; this keeps the audio
# needed short. An event's response is over 100 bytes: at most 82 fit.
SLOW_WINDOW = 8192
SLOW_OPTIONS = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", SLOW_WINDOW)]


def metric(text, name):
    m = re.search(r"^%s ([0-9.e+-]+)$" % name, text, re.M)
    assert m, "no %s in /metrics" % name
    return float(m.group(1))


def check_exposition(test, text):
    """Each sample belongs to the family whose # TYPE line came last (the text format's rule)."""
    family = None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            family = line.split()[2]
        elif line and not line.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            test.assertTrue(name == family or name.startswith(family + "_"), "%s under # TYPE %s" % (line, family))


def main():
    global ARGS, pb, rpc, grpc
    parser = argparse.ArgumentParser()
    parser.add_argument("--corepool", required=True)
    parser.add_argument("--gen-audio", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--proto", required=True)
    parser.add_argument("--mode", default="thread")
    # SlowReader: serve.grpc_stream_backlog, and how many 4 s noise/silence pairs it sends.
    parser.add_argument("--slow-backlog", type=int, default=SlowReader.BACKLOG)
    parser.add_argument("--slow-repeat", type=int, default=75)
    ARGS, rest = parser.parse_known_args()
    import grpc as grpc_module
    grpc = grpc_module
    stubs = tempfile.TemporaryDirectory()
    generate_stubs(ARGS.proto, stubs.name)
    import grpc_service_pb2
    import grpc_service_pb2_grpc
    pb, rpc = grpc_service_pb2, grpc_service_pb2_grpc
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
