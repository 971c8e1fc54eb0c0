#!/usr/bin/python3
"""The WebSocket audio stream of `corepool serve` (/v2/models/NAME/audio/stream)
with Debian's python3-websockets, on loopback against the real binary:

- the 28 s demo streamed in bursts gives the events `corepool batch` writes
  for the same file (same labels, each boundary within one hop), then a
  summary, then close 1000; streamed in real time, the first event arrives
  long before the stream ends;
- a stereo f32le stream at 44.1 kHz (mixed and resampled by the server) gives
  the same labels;
- an idle stream is flushed and closed with its reason; one stream over
  serve.max_streams is refused 503 before the upgrade; a bad query is 400;
- bad frames (unmasked, unknown opcode, oversized) close 1002 / 1009, PCM that
  is not whole frames closes 1007, stray text closes 1003, each with a reason;
- /metrics counts audio seconds and streams;
- a stream whose last audio takes longer than two idle timeouts to tag
  (process mode, its workers stopped) still gets its summary and close 1000.

Usage: stream_e2e_test.py --corepool BIN --gen-audio BIN --model DIR [unittest args]
"""
import argparse
import asyncio
import base64
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import tomllib
import unittest
import urllib.request
import wave

import websockets

ARGS = None
# The default model's segment and hop (models/default/model.toml), which the
# counts and tolerances below follow.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../models/default/model.toml"), "rb") as f:
    MODEL = tomllib.load(f)["model"]
HOP = MODEL["hop_seconds"]
SEGMENT = MODEL["segment_seconds"]


def segments_in(seconds):
    """Segments the server cuts from `seconds` of audio (a whole number of hops past one segment)."""
    return 1 + round((seconds - SEGMENT) / HOP)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """One `corepool serve` on a free port with the given [serve] lines."""

    def __init__(self, workdir, serve_lines, mode="thread"):
        config = os.path.join(workdir, "serve-%d.toml" % free_port())
        with open(config, "w") as f:
            f.write("[engine]\nworkers = 2\n[serve]\n" + serve_lines + "\n")
        self.log_path = config + ".log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([ARGS.corepool, "--log-level", "info", "--config", config, "serve",
                                      "--mode", mode, "--listen", "127.0.0.1:0", "--grpc-listen", "",
                                      "--model", ARGS.model],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(self.log_path) as log:
                m = re.search(r"on http://127\.0\.0\.1:(\d+)", log.read())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError("serve did not start:\n" + open(self.log_path).read())

    def url(self, query="sample_rate=16000&channels=1&format=s16le", model="default"):
        return "ws://127.0.0.1:%d/v2/models/%s/audio/stream?%s" % (self.port, model, query)

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port, timeout=10) as r:
            return r.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout=60)
        self.log.close()
        assert code == 0, "serve exited %d:\n%s" % (code, open(self.log_path).read())


def read_wav(path):
    with wave.open(path) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, path
        return w.getframerate(), w.readframes(w.getnframes())


async def stream(url, pieces, seconds_per_piece=0.0, end="text"):
    """Sends the pieces (pacing each by seconds_per_piece), then the end; returns
    (events, summary, close code, close reason, seconds from open to the first
    event, seconds from open to the end of sending)."""
    events, summary, first_at = [], None, None
    async with websockets.connect(url, max_size=2 ** 20) as ws:
        t0 = time.monotonic()

        async def receive():
            nonlocal summary, first_at
            async for message in ws:
                item = json.loads(message)
                if "summary" in item:
                    summary = item["summary"]
                else:
                    if first_at is None:
                        first_at = time.monotonic() - t0
                    events.append(item)

        reader = asyncio.ensure_future(receive())
        for piece in pieces:
            await ws.send(piece)
            if seconds_per_piece:
                await asyncio.sleep(seconds_per_piece)
        sent_at = time.monotonic() - t0
        if end == "text":
            await ws.send(json.dumps({"end": True}))
        else:
            await ws.close()
        await asyncio.wait_for(reader, 60)
        return events, summary, ws.close_code, ws.close_reason, first_at, sent_at


def chunks(data, size):
    return [data[i:i + size] for i in range(0, len(data), size)]


def same_events(test, got, want):
    """Same labels in the same order, each boundary within one hop."""
    test.assertEqual([e["label"] for e in got], [e["label"] for e in want], (got, want))
    for g, w in zip(got, want):
        test.assertLessEqual(abs(g["start"] - w["start"]), HOP, (g, w))
        test.assertLessEqual(abs(g["end"] - w["end"]), HOP, (g, w))


class Stream(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.wav = os.path.join(cls.dir.name, "demo.wav")
        subprocess.run([ARGS.gen_audio, "--demo", "--out", cls.wav], check=True, stdout=subprocess.DEVNULL)
        batch = subprocess.run([ARGS.corepool, "--log-level", "warn", "batch", "--model", ARGS.model, "--format",
                                "jsonl", "--out", "-", cls.wav], check=True, capture_output=True, text=True)
        cls.batch = [json.loads(line) for line in batch.stdout.splitlines() if line.strip()]
        cls.batch = [e for e in cls.batch if "label" in e]
        cls.rate, cls.pcm = read_wav(cls.wav)
        cls.server = Server(cls.dir.name, "stream_idle_s = 5\nmax_streams = 4")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def test_a_burst_gives_batchs_events_then_a_summary_and_close_1000(self):
        self.assertTrue(self.batch, "batch found no events in the demo")
        events, summary, code, reason, _, _ = asyncio.run(stream(self.server.url(), chunks(self.pcm, 8000)))
        same_events(self, events, self.batch)
        self.assertEqual(code, 1000, reason)
        self.assertEqual(summary["events"], len(events))
        self.assertEqual(summary["end"], "end")
        self.assertAlmostEqual(summary["duration"], len(self.pcm) / 2 / self.rate, delta=0.01)
        self.assertEqual(summary["dropped"], 0)
        metrics = self.server.metrics()
        self.assertRegex(metrics, r'corepool_stream_audio_seconds\{stream="all"\} [1-9]')
        self.assertRegex(metrics, r"corepool_streams_total [1-9]")
        # Every segment's decision time is observed (the demo's 28 s: 53 segments of 2 s).
        self.assertRegex(metrics, r"corepool_stream_decision_seconds_count ([5-9][0-9]|[1-9][0-9]{2,})\n")

    def test_the_client_closing_ends_the_stream_like_end(self):
        events, summary, code, reason, _, _ = asyncio.run(
            stream(self.server.url(), chunks(self.pcm[:2 * self.rate * 6], 16000), end="close"))
        self.assertEqual(code, 1000, reason)

    def test_real_time_sends_the_first_event_long_before_the_stream_ends(self):
        # Seconds 6..12 of the demo at real time in 0.1 s pieces: its speech
        # section ends 2.5 s in, and that event must come seconds before the
        # last piece is sent.
        offset, seconds, piece = 6, 6, int(self.rate * 0.1) * 2
        pcm = self.pcm[offset * self.rate * 2:(offset + seconds) * self.rate * 2]
        events, summary, code, reason, first_at, sent_at = asyncio.run(
            stream(self.server.url(), chunks(pcm, piece), 0.1))
        self.assertEqual(code, 1000, reason)
        self.assertIsNotNone(first_at, "no event at all")
        self.assertLess(first_at, sent_at - 1.0, "the first event came only at the end")
        speech = [e for e in self.batch if e["label"] == "speech"][0]
        self.assertEqual(events[0]["label"], "speech")
        self.assertLessEqual(abs(events[0]["end"] - (speech["end"] - offset)), HOP, (events[0], speech))
        print("real time: the first event %.2f s after opening, the audio sent by %.2f s" % (first_at, sent_at))

    def test_stereo_float_at_44k1_is_mixed_and_resampled(self):
        samples = struct.unpack("<%dh" % (len(self.pcm) // 2), self.pcm)
        # 16 kHz -> 44.1 kHz by repeating samples, the two channels equal.
        rate = 44100
        stereo = bytearray()
        for i in range(int(len(samples) * rate / self.rate)):
            v = samples[int(i * self.rate / rate)] / 32768.0
            stereo += struct.pack("<ff", v, v)
        events, summary, code, reason, _, _ = asyncio.run(
            stream(self.server.url("sample_rate=44100&channels=2&format=f32le"), chunks(bytes(stereo), 44100 * 8)))
        self.assertEqual(code, 1000, reason)
        # The same bytes through `corepool batch --raw` (its mixing and
        # resampling): the stream must hear what batch hears. Repeating samples
        # also dulls the top octave, which moves the default model's music
        # scores in the demo's 13-16 s (the tagger's robustness is
        # tests/e2e/batch_formats_test.cc's subject, not this endpoint's).
        batch = subprocess.run([ARGS.corepool, "--log-level", "warn", "batch", "--model", ARGS.model, "--raw",
                                "f32le:44100:2", "--format", "jsonl", "--out", "-", "-"],
                               input=bytes(stereo), check=True, capture_output=True)
        want = [json.loads(line) for line in batch.stdout.decode().splitlines() if line.strip()]
        want = [e for e in want if "label" in e]
        self.assertTrue(want, "batch found no events in the 44.1 kHz stereo demo")
        same_events(self, events, want)

    def test_a_bad_query_or_model_is_refused_before_the_upgrade(self):
        for query, status, says in [("sample_rate=0", 400, "sample_rate"), ("sample_rate=16000&format=mp3", 400, "format"),
                                    ("channels=2", 400, "sample_rate: missing"), ("sample_rate=16000&x=1", 400, "unknown")]:
            with self.assertRaises(websockets.exceptions.InvalidStatusCode) as caught:
                asyncio.run(stream(self.server.url(query), []))
            self.assertEqual(caught.exception.status_code, status, query)
        with self.assertRaises(websockets.exceptions.InvalidStatusCode) as caught:
            asyncio.run(stream(self.server.url(model="nope"), []))
        self.assertEqual(caught.exception.status_code, 404)
        # The reason is in the body, for a client that reads it.
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        conn.request("GET", "/v2/models/default/audio/stream?sample_rate=5",
                     headers={"Upgrade": "websocket", "Connection": "Upgrade",
                              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"})
        reply = conn.getresponse()
        self.assertEqual(reply.status, 400)
        self.assertEqual(json.loads(reply.read())["error"], "query: sample_rate: \"5\" is not in 1000..384000")
        conn.close()

    def raw_close(self, frames):
        """Handshake by hand, send `frames` as bytes, return the close frame's (code, reason)."""
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(("GET /v2/models/default/audio/stream?sample_rate=16000 HTTP/1.1\r\nHost: x\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n" % key).encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(4096)
        head, data = data.split(b"\r\n\r\n", 1)
        self.assertIn(b"101", head.split(b"\r\n")[0])
        s.sendall(frames)
        while True:  # frames until the close frame
            while len(data) < 2:
                more = s.recv(4096)
                self.assertTrue(more, "connection closed without a close frame")
                data += more
            n = data[1] & 0x7F
            while len(data) < 2 + n:
                data += s.recv(4096)
            opcode, payload, data = data[0] & 0x0F, data[2:2 + n], data[2 + n:]
            if opcode == 8:
                s.close()
                return struct.unpack(">H", payload[:2])[0], payload[2:].decode()

    @staticmethod
    def frame(first, payload, masked=True):
        mask = b"\x01\x02\x03\x04"
        if len(payload) < 126:
            head = bytes([first, (0x80 if masked else 0) | len(payload)])
        else:
            head = bytes([first, (0x80 if masked else 0) | 127]) + struct.pack(">Q", len(payload))
        if not masked:
            return head + payload
        return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

    def test_bad_frames_close_with_the_rfcs_code_and_a_reason(self):
        cases = [(self.frame(0x82, b"\x00\x00", masked=False), 1002, "not masked"),
                 (self.frame(0x83, b"x"), 1002, "unknown opcode 3"),
                 (self.frame(0x82, b"\x00" * (2 ** 20 + 2)), 1009, "message over"),
                 (self.frame(0x82, b"\x00\x00\x00"), 1007, "not whole frames"),
                 (self.frame(0x81, b"hello"), 1003, "only {\"end\": true}")]
        for frames, code, says in cases:
            got_code, got_reason = self.raw_close(frames)
            self.assertEqual(got_code, code, got_reason)
            self.assertIn(says, got_reason)
        # The server is still fine.
        events, _, code, _, _, _ = asyncio.run(stream(self.server.url(), chunks(self.pcm[:2 * self.rate * 3], 8000)))
        self.assertEqual(code, 1000)


class Reload(unittest.TestCase):
    """SIGHUP while a stream is open: the stream keeps its generation to its
    end (same events), and the old generation is retired once it has ended."""

    def test_a_stream_open_across_a_reload_keeps_its_events_and_then_lets_the_old_generation_go(self):
        workdir = tempfile.TemporaryDirectory()
        self.addCleanup(workdir.cleanup)
        server = Server(workdir.name, "stream_idle_s = 30")
        self.addCleanup(server.stop)
        wav = os.path.join(workdir.name, "demo.wav")
        subprocess.run([ARGS.gen_audio, "--demo", "--out", wav], check=True, stdout=subprocess.DEVNULL)
        rate, pcm = read_wav(wav)
        first, second = chunks(pcm[:rate * 2 * 12], 16000), chunks(pcm[rate * 2 * 12:], 16000)

        async def across_a_reload():
            async with websockets.connect(server.url()) as ws:
                for piece in first:
                    await ws.send(piece)
                server.proc.send_signal(signal.SIGHUP)
                deadline = time.monotonic() + 60
                while "reload done" not in open(server.log_path).read():
                    self.assertLess(time.monotonic(), deadline, "no reload")
                    await asyncio.sleep(0.05)
                for piece in second:
                    await ws.send(piece)
                await ws.send(json.dumps({"end": True}))
                return [json.loads(m) async for m in ws], ws.close_code

        messages, code = asyncio.run(across_a_reload())
        self.assertEqual(code, 1000)
        self.assertEqual([m["label"] for m in messages[:-1]], ["speech", "music", "noise", "silence"])
        deadline = time.monotonic() + 30
        while "generation 1 retired" not in open(server.log_path).read():
            self.assertLess(time.monotonic(), deadline, "the old generation was never retired")
            time.sleep(0.05)


class Limits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.server = Server(cls.dir.name, "stream_idle_s = 1\nmax_streams = 1")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def test_an_idle_stream_is_flushed_and_closed_with_its_reason(self):
        async def idle():
            async with websockets.connect(self.server.url()) as ws:
                await ws.send(b"\x00\x00" * 16000)  # 1 s of silence, then nothing
                t0 = time.monotonic()
                messages = [json.loads(m) async for m in ws]
                return messages, ws.close_code, ws.close_reason, time.monotonic() - t0

        messages, code, reason, waited = asyncio.run(idle())
        self.assertEqual(code, 1000)
        self.assertIn("idle: no audio for 1 s", reason)
        self.assertEqual(messages[-1]["summary"]["end"], "idle")
        self.assertLess(waited, 10)

    def test_one_stream_over_max_streams_is_refused_503_before_the_upgrade(self):
        async def open_first():  # the previous test's stream may still be finishing its slot
            deadline = time.monotonic() + 10
            while True:
                try:
                    return await websockets.connect(self.server.url())
                except websockets.exceptions.InvalidStatusCode:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.05)

        async def two():
            first = await open_first()
            try:
                with self.assertRaises(websockets.exceptions.InvalidStatusCode) as caught:
                    async with websockets.connect(self.server.url()):
                        pass
                self.assertEqual(caught.exception.status_code, 503)
                await first.send(json.dumps({"end": True}))
                return [m async for m in first], first.close_code
            finally:
                await first.close()

        _, code = asyncio.run(two())
        self.assertEqual(code, 1000)
        self.assertRegex(self.server.metrics(), r"corepool_streams_refused_total [1-9]")


class SlowFlush(unittest.TestCase):
    """A stream whose last audio takes the server longer than two idle
    timeouts to tag (both workers stopped meanwhile) still gets its summary
    and close 1000: after the client's end, the connection's idle timer waits
    for the server instead of closing the socket (which, before, left the
    client with no summary and no close frame)."""

    def test_the_end_of_a_stream_waits_for_a_slow_server_past_the_idle_timeout(self):
        workdir = tempfile.TemporaryDirectory()
        self.addCleanup(workdir.cleanup)
        server = Server(workdir.name, "stream_idle_s = 1", mode="process")
        self.addCleanup(server.stop)  # also when the stream fails: no server left behind
        wav = os.path.join(workdir.name, "demo.wav")
        subprocess.run([ARGS.gen_audio, "--demo", "--out", wav], check=True, stdout=subprocess.DEVNULL)
        _, pcm = read_wav(wav)
        workers = [int(p) for p in subprocess.check_output(["pgrep", "-P", str(server.proc.pid)]).split()]
        self.assertEqual(len(workers), 2, workers)

        async def slow_end():
            async with websockets.connect(server.url(), max_size=2 ** 20) as ws:
                for pid in workers:
                    os.kill(pid, signal.SIGSTOP)
                try:
                    await ws.send(pcm[:16000 * 2 * 4])  # 4 s: its segments wait for a worker
                    await ws.send(json.dumps({"end": True}))
                    await asyncio.sleep(3.5)  # past two idle timeouts of 1 s
                finally:
                    for pid in workers:
                        os.kill(pid, signal.SIGCONT)
                messages = [json.loads(m) async for m in ws]
                return messages, ws.close_code

        messages, code = asyncio.run(slow_end())
        self.assertEqual(code, 1000, messages)
        self.assertIn("summary", messages[-1], messages)
        self.assertEqual(messages[-1]["summary"]["end"], "end")
        self.assertEqual(messages[-1]["summary"]["segments"], segments_in(4), messages[-1])


class ZShutdown(unittest.TestCase):
    """SIGTERM with a stream open: its events and summary, then close 1001 with the reason."""

    def test_sigterm_flushes_an_open_stream_and_closes_it_1001(self):
        workdir = tempfile.TemporaryDirectory()
        self.addCleanup(workdir.cleanup)
        server = Server(workdir.name, "stream_idle_s = 30")

        async def open_then_sigterm():
            async with websockets.connect(server.url()) as ws:
                await ws.send(b"\x00\x00" * 16000 * 3)  # 3 s of silence
                await asyncio.sleep(0.5)
                server.proc.terminate()
                messages = [json.loads(m) async for m in ws]
                return messages, ws.close_code, ws.close_reason

        messages, code, reason = asyncio.run(open_then_sigterm())
        self.assertEqual(code, 1001)
        self.assertEqual(reason, "the server is shutting down")
        self.assertEqual(messages[-1]["summary"]["end"], "server_stop")
        self.assertEqual([m["label"] for m in messages[:-1]], ["silence"])
        # Already signalled once: wait for the exit (a second SIGTERM after the
        # drain may meet the default action, as after any service's exit).
        self.assertEqual(server.proc.wait(timeout=60), 0)
        server.log.close()


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--corepool", required=True)
    parser.add_argument("--gen-audio", required=True)
    parser.add_argument("--model", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
