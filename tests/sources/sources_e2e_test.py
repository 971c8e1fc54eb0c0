#!/usr/bin/python3
"""Serve's [[source]]s end to end on loopback, against the real binary:

- "mute" connects to a server that accepts and never answers: its open
  times out (timeout_s), it backs off and retries, and stalls nobody;
  "fifo" reads a FIFO nobody writes: it retries and never blocks a stop;
  "stall" gets 2 s of audio, then its server hangs with the connection
  open: after timeout_s its events are flushed and it reconnects;
- "radio" pulls the 28 s demo from a local HTTP server (this file in
  --serve-wav mode, a process of its own) at 4x real time, one pass a
  connection; "loop" pulls it from a second server that loops it forever;
  "file" reads the WAV itself and finishes, its events also POSTed to a
  webhook (a receiver on loopback here);
- the first connection's events in radio's JSONL sink and file's are the
  events `corepool batch` writes for the same file (same labels, each
  boundary within one hop); the sink's name carries the UTC date;
- the radio server killed: /v2/sources shows radio in backoff with its
  error while loop keeps producing events; restarted on the same port,
  radio reconnects (reconnects > 0) and writes new events;
- SIGHUP with file removed, "late" added and radio's table changed: late
  runs, file is gone, radio starts over, and loop is untouched (the same
  connection, its audio still growing);
- GET /v2/events (Server-Sent Events) carries the sources' events and ends
  and a WebSocket stream's, tagged with the source or the stream;
- /metrics has the per-source families; SIGTERM flushes: each sink ends
  with its connection's summary, and the event stream is closed;
- a source naming a model serve does not serve stops the start with the
  file, the line, the source and the key (exit 2), and fails a reload
  (every source keeps running).

Usage: sources_e2e_test.py --corepool BIN --gen-audio BIN --model DIR [unittest args]
       sources_e2e_test.py --serve-wav WAV --port N --speed X [--loop]   (the helper server)
"""
import argparse
import glob
import http.server
import json
import os
import re
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
import wave

ARGS = None
HOP = 0.5  # models/default/model.toml: hop_seconds


# ---- the helper: a slow HTTP audio server ---------------------------------

def serve_wav(path, port, speed, loop, stall_after=None):
    with wave.open(path) as w:
        rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
        pcm = w.readframes(w.getnframes())
    size = 0xFFFFFFFF if loop else len(pcm)  # a stream that never ends says so, as ffmpeg does on a pipe
    header = b"RIFF" + struct.pack("<I", min(size + 36, 0xFFFFFFFF)) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, channels, rate, rate * channels * width, channels * width, width * 8) + b"data" + \
        struct.pack("<I", size)
    piece = int(rate * 0.1) * channels * width  # 0.1 s of audio per write

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "audio/wav")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                self.wfile.write(header)
                t0, sent = time.monotonic(), 0
                while True:
                    for i in range(0, len(pcm), piece):
                        self.wfile.write(pcm[i:i + piece])
                        sent += 0.1
                        if stall_after is not None and sent >= stall_after:
                            self.wfile.flush()
                            time.sleep(3600)  # a server that hangs: the connection stays, nothing comes
                        ahead = t0 + sent / speed - time.monotonic()
                        if ahead > 0:
                            time.sleep(ahead)
                    if not loop:
                        break
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        allow_reuse_address = True
        daemon_threads = True

    Server(("127.0.0.1", port), Handler).serve_forever()


# ---- the test ----------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(what, check, seconds=30, every=0.05):
    """Polls check() until it returns something true; fails with `what` at the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(every)


class AudioServer:
    def __init__(self, wav, port, speed, loop=False, stall_after=None):
        self.args = [sys.executable, os.path.abspath(__file__), "--serve-wav", wav, "--port", str(port),
                     "--speed", str(speed)] + (["--loop"] if loop else []) + \
            (["--stall-after", str(stall_after)] if stall_after is not None else [])
        self.port = port
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.args)

        def listening():
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return self.proc.poll() is not None and (_ for _ in ()).throw(AssertionError("helper died"))
        wait_for("the audio server on port %d" % self.port, listening)

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def source_table(name, url, events_dir, webhook=None, timeout_s=3):
    sinks = '"jsonl:%s/%s.jsonl"' % (events_dir, name) + (', "webhook:%s"' % webhook if webhook else "")
    return ('[[source]]\nname = "%s"\nurl = "%s"\nevents = [%s]\n'
            "backoff_s = 0.2\nbackoff_max_s = 1\ntimeout_s = %g\n\n" % (name, url, sinks, timeout_s))


class WebhookReceiver:
    """Keeps the JSON body of every POST, answers 204."""

    def __init__(self):
        bodies = self.bodies = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/hook" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def same_events(test, got, want):
    """Same labels in the same order, each boundary within one hop."""
    test.assertEqual([e["label"] for e in got], [e["label"] for e in want], (got, want))
    for g, w in zip(got, want):
        test.assertLessEqual(abs(g["start"] - w["start"]), HOP, (g, w))
        test.assertLessEqual(abs(g["end"] - w["end"]), HOP, (g, w))


class EventFeed:
    """GET /v2/events read on a thread: every (event, data) message, in order."""

    def __init__(self, port):
        self.messages, self.subscribed, self.closed = [], threading.Event(), threading.Event()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.sendall(b"GET /v2/events HTTP/1.1\r\nHost: t\r\n\r\n")
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()
        assert self.subscribed.wait(10), "no ': subscribed' from /v2/events"

    def read(self):
        f = self.sock.makefile("rb")
        assert f.readline().startswith(b"HTTP/1.1 200"), "not a 200"
        while f.readline() not in (b"\r\n", b""):  # headers
            pass
        event = None
        for raw in f:
            line = raw.decode().rstrip("\n")
            if line == ": subscribed":
                self.subscribed.set()
            elif line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                self.messages.append((event, json.loads(line[6:])))
        self.closed.set()

    def of(self, event, key, value):
        return [m for e, m in list(self.messages) if e == event and m.get(key) == value]


def websocket_stream(port, pcm, rate):
    """Streams `pcm` (s16le mono) over a WebSocket, then ends; returns its events."""
    import asyncio
    import websockets

    async def run():
        url = "ws://127.0.0.1:%d/v2/models/default/audio/stream?sample_rate=%d" % (port, rate)
        events = []
        async with websockets.connect(url) as ws:
            await ws.send(pcm)
            await ws.send(json.dumps({"end": True}))
            async for message in ws:
                events.append(json.loads(message))
        return [e for e in events if "label" in e]
    return asyncio.run(run())


class Sources(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        self.wav = os.path.join(d, "demo.wav")
        subprocess.run([ARGS.gen_audio, "--demo", "--out", self.wav], check=True, stdout=subprocess.DEVNULL)
        batch = subprocess.run([ARGS.corepool, "--log-level", "warn", "batch", "--model", ARGS.model, "--format",
                                "jsonl", "--out", "-", self.wav], check=True, capture_output=True, text=True)
        self.batch = [e for e in map(json.loads, filter(str.strip, batch.stdout.splitlines())) if "label" in e]
        self.events = os.path.join(d, "events")
        self.radio = AudioServer(self.wav, free_port(), speed=4)
        self.looping = AudioServer(self.wav, free_port(), speed=4, loop=True)
        self.stalling = AudioServer(self.wav, free_port(), speed=4, stall_after=2)
        self.webhook = WebhookReceiver()
        self.fifo = os.path.join(d, "fifo")
        os.mkfifo(self.fifo)
        self.mute = socket.socket()  # listens, never accepts: connects succeed, no answer ever comes
        self.mute.bind(("127.0.0.1", 0))
        self.mute.listen(64)
        self.config = os.path.join(d, "corepool.toml")
        self.write_config([
            source_table("radio", "http://127.0.0.1:%d/demo.wav" % self.radio.port, self.events),
            source_table("loop", "http://127.0.0.1:%d/live.wav" % self.looping.port, self.events),
            source_table("file", self.wav, self.events, self.webhook.url),
            source_table("mute", "http://127.0.0.1:%d/x.wav" % self.mute.getsockname()[1], self.events, timeout_s=1),
            source_table("stall", "http://127.0.0.1:%d/x.wav" % self.stalling.port, self.events, timeout_s=1),
            source_table("fifo", self.fifo, self.events, timeout_s=1)])
        self.log_path = os.path.join(d, "serve.log")
        self.log = open(self.log_path, "w")
        self.serve = subprocess.Popen([ARGS.corepool, "--log-level", "info", "--config", self.config, "serve",
                                       "--listen", "127.0.0.1:0", "--grpc-listen", "", "--model", ARGS.model],
                                      stdout=self.log, stderr=subprocess.STDOUT)

        def port():
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", self.serve_log())
            if self.serve.poll() is not None:
                raise AssertionError("serve exited:\n" + self.serve_log())
            return m and int(m.group(1))
        self.port = wait_for("serve to listen", port, 60)
        self.feed = EventFeed(self.port)

    def tearDown(self):
        for p in (self.radio, self.looping, self.stalling):
            if p.proc.poll() is None:
                p.kill()
        if self.serve.poll() is None:
            self.serve.kill()
            self.serve.wait()
        self.log.close()
        self.webhook.stop()
        self.mute.close()
        self.dir.cleanup()

    def serve_log(self):
        with open(self.log_path) as f:
            return f.read()

    def write_config(self, tables):
        with open(self.config, "w") as f:
            f.write("[engine]\nworkers = 2\n[serve]\nallow_model_control = true\n\n" + "".join(tables))

    def get(self, path):
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path), timeout=10) as r:
            return r.read().decode()

    def sources(self):
        return {s["name"]: s for s in json.loads(self.get("/v2/sources"))["sources"]}

    def lines(self, name):
        """Every line of the source's sinks (one file a UTC day)."""
        out = []
        for path in sorted(glob.glob(os.path.join(self.events, name + "-*.jsonl"))):
            with open(path) as f:
                out += [json.loads(line) for line in f if line.strip()]
        return out

    def labelled(self, name, connection=None):
        return [e for e in self.lines(name) if "label" in e and (connection is None or e["connection"] == connection)]

    def summaries(self, name):
        return [e for e in self.lines(name) if "summary" in e]

    def test_pulled_sources_match_batch_reconnect_with_backoff_and_reload_alone(self):
        self.assertTrue(self.batch, "batch found no events in the demo")
        # The file source finishes with batch's events; radio's first pass (7 s) gives them too.
        wait_for("file to finish", lambda: self.sources()["file"]["state"] == "finished")
        same_events(self, self.labelled("file"), self.batch)
        posted = wait_for("file's events at the webhook", lambda: [b for b in self.webhook.bodies if "summary" in b]
                          and self.webhook.bodies)
        self.assertEqual(posted, self.lines("file"), "the webhook got other lines than the JSONL sink")
        wait_for("radio's first connection to end", lambda: any(s["connection"] == 1 for s in self.summaries("radio")))
        same_events(self, self.labelled("radio", 1), self.batch)
        today = time.strftime("%Y-%m-%d", time.gmtime())
        self.assertTrue(glob.glob(os.path.join(self.events, "radio-*.jsonl")), os.listdir(self.events))
        self.assertIn(today, " ".join(os.listdir(self.events)))

        # Radio's server dies: radio backs off, loop keeps going.
        self.radio.kill()
        radio = wait_for("radio in backoff", lambda: (lambda s: s if s["state"] == "backoff" else None)(
            self.sources()["radio"]))
        self.assertTrue(radio["last_error"], radio)
        down_at = self.sources()
        loop_events = len(self.labelled("loop"))
        wait_for("loop to keep producing while radio is down",
                 lambda: len(self.labelled("loop")) > loop_events and
                 self.sources()["loop"]["audio_seconds"] > down_at["loop"]["audio_seconds"] + 4)
        self.assertEqual(self.sources()["radio"]["state"], "backoff")
        self.assertGreater(self.sources()["radio"]["reconnects"], down_at["radio"]["reconnects"],
                           "no reconnect attempt while the server was down")

        # Back: radio reconnects and writes new events.
        connections = self.sources()["radio"]["connections"]
        self.radio.start()
        wait_for("radio to run again", lambda: self.sources()["radio"]["state"] == "running")
        wait_for("radio's new events",
                 lambda: [e for e in self.labelled("radio") if e["connection"] > connections], seconds=20)
        self.assertGreater(self.sources()["radio"]["reconnects"], 0)

        # The mute server never answered: timed out, retried, stalled nobody.
        mute = wait_for("mute to time out and retry", lambda: (lambda s: s if s["reconnects"] >= 1 and s["last_error"]
                                                                else None)(self.sources()["mute"]))
        self.assertIn(mute["state"], ("connecting", "backoff"), mute)
        self.assertEqual(mute["events"], 0, mute)
        self.assertIn("no answer within timeout_s (1 s)", mute["last_error"])
        fifo = self.sources()["fifo"]
        self.assertIn("nothing to read", fifo["last_error"], fifo)
        self.assertGreaterEqual(fifo["reconnects"], 1, fifo)
        stall = wait_for("stall to time out mid-stream and reconnect",
                         lambda: (lambda s: s if s["reconnects"] >= 1 and s["last_error"] else None)(self.sources()["stall"]))
        self.assertIn("no audio for timeout_s (1 s)", stall["last_error"])
        first = wait_for("stall's first connection flushed", lambda: [
            e for e in self.summaries("stall") if e["connection"] == 1])
        self.assertAlmostEqual(first[0]["summary"]["duration"], 2, delta=0.2)
        self.assertEqual([e["label"] for e in self.labelled("stall", 1)], ["speech"])

        # SIGHUP: file removed, late added, radio changed (restarted), loop untouched.
        before = self.sources()
        self.write_config([
            source_table("radio", "http://127.0.0.1:%d/demo.wav" % self.radio.port, self.events, timeout_s=2),
            source_table("loop", "http://127.0.0.1:%d/live.wav" % self.looping.port, self.events),
            source_table("late", self.wav, self.events),
            source_table("fifo", self.fifo, self.events, timeout_s=1),
            source_table("mute", "http://127.0.0.1:%d/x.wav" % self.mute.getsockname()[1], self.events, timeout_s=1)])
        self.serve.send_signal(signal.SIGHUP)
        now = wait_for("late to appear and file to go",
                       lambda: (lambda s: s if "late" in s and "file" not in s else None)(self.sources()))
        self.assertEqual(now["loop"]["connections"], before["loop"]["connections"], "loop was restarted")
        self.assertLess(now["radio"]["connections"], before["radio"]["connections"], "radio changed, yet kept running")
        wait_for("loop's audio to keep growing after the reload",
                 lambda: self.sources()["loop"]["audio_seconds"] > now["loop"]["audio_seconds"] + 2)
        self.assertEqual(self.sources()["loop"]["connections"], before["loop"]["connections"])
        wait_for("late to finish", lambda: self.sources()["late"]["state"] == "finished")
        same_events(self, self.labelled("late"), self.batch)

        # The event feed: the sources' lines, a WebSocket stream's events.
        self.assertTrue(self.feed.of("event", "source", "loop"), "no loop event on /v2/events")
        late = self.feed.of("event", "source", "late")
        self.assertEqual([e["label"] for e in late], [e["label"] for e in self.labelled("late")])
        self.assertTrue(self.feed.of("end", "source", "late"), "no end of late on /v2/events")
        with wave.open(self.wav) as w:
            rate, pcm = w.getframerate(), w.readframes(w.getframerate() * 3)
        streamed = websocket_stream(self.port, pcm, rate)
        self.assertTrue(streamed, "the WebSocket stream gave no event")
        stream_ends = wait_for("the stream's end on /v2/events", lambda: self.feed.of("end", "model", "default"))
        tapped = self.feed.of("event", "stream", stream_ends[0]["stream"])
        self.assertEqual([e["label"] for e in tapped], [e["label"] for e in streamed])

        # /metrics, one TYPE line per family.
        metrics = self.get("/metrics")
        self.assertRegex(metrics, r'corepool_source_state\{source="loop",state="running"\} 1')
        self.assertRegex(metrics, r'corepool_source_reconnects_total\{source="mute"\} [1-9]')
        self.assertRegex(metrics, r'corepool_source_audio_seconds_total\{source="loop"\} [1-9]')
        self.assertEqual(metrics.count("# TYPE corepool_source_events_total "), 1)
        self.assertRegex(metrics, r"corepool_event_subscribers 1")
        self.assertRegex(metrics, r"corepool_events_published_total [1-9]")

        # A reload whose new source names another model fails; every source keeps running.
        before = self.sources()
        with open(self.config, "a") as f:
            f.write(source_table("other", self.wav, self.events).replace("[[source]]\n", '[[source]]\nmodel = "x"\n'))
        self.serve.send_signal(signal.SIGHUP)
        wait_for("the reload to fail", lambda: re.search(r"corepool_reloads_failed_total 1", self.get("/metrics")))
        self.assertIn('source[5].model: source "other": "x" is not served', self.serve_log())
        after = self.sources()
        self.assertEqual(sorted(after), sorted(before))
        self.assertEqual(after["loop"]["connections"], before["loop"]["connections"])

        # SIGTERM: each running source flushes; its last line is its summary.
        loop_connection = self.sources()["loop"]["connections"]
        self.serve.terminate()
        self.assertEqual(self.serve.wait(timeout=60), 0, self.serve_log())
        last = self.lines("loop")[-1]
        self.assertEqual(last.get("connection"), loop_connection, last)
        self.assertEqual(last["summary"]["end"], "server_stop", last)
        self.assertTrue(self.feed.closed.wait(10), "/v2/events was not closed at SIGTERM")


class BadSourceModel(unittest.TestCase):
    def test_a_source_naming_another_model_stops_the_start_naming_file_line_source_and_key(self):
        with tempfile.TemporaryDirectory() as d:
            config = os.path.join(d, "corepool.toml")
            with open(config, "w") as f:
                f.write("[serve]\n\n" + source_table("r", "x.wav", d).replace('[[source]]\n', '[[source]]\nmodel = "other"\n'))
            run = subprocess.run([ARGS.corepool, "--config", config, "serve", "--listen", "127.0.0.1:0",
                                  "--grpc-listen", "", "--model", ARGS.model], capture_output=True, text=True, timeout=120)
            self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
            self.assertIn(config + ':3: source[0].model: source "r": "other" is not served: corepool serve serves '
                          'one model, "default"', run.stdout + run.stderr)


def main():
    global ARGS
    if "--serve-wav" in sys.argv:
        p = argparse.ArgumentParser()
        p.add_argument("--serve-wav", required=True)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--speed", type=float, default=1)
        p.add_argument("--loop", action="store_true")
        p.add_argument("--stall-after", type=float)
        a = p.parse_args()
        return serve_wav(a.serve_wav, a.port, a.speed, a.loop, a.stall_after)
    parser = argparse.ArgumentParser()
    parser.add_argument("--corepool", required=True)
    parser.add_argument("--gen-audio", required=True)
    parser.add_argument("--model", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
