#!/usr/bin/python3
"""A [[source]] on an ALSA capture device (url = "alsa:DEVICE?..."), end to
end on the real `corepool serve`, without sound hardware: ALSA's `file` PCM
plugin, declared in an ~/.asoundrc of the server's own (HOME is a temp dir),
captures from a file of raw PCM (the 28 s demo, then 4 s of silence) over
the `null` plugin, which does not pace: the device delivers as fast as the
server tags. Past the file's end it keeps delivering whatever is in its
buffer, so only the events up to the file's end are compared.

- /v2/sources shows the device running, its audio past the file's end;
- a device ALSA does not know gets ALSA's reason in last_error and is
  retried after its back-off, the server unharmed;
- SIGTERM with the device open ends the server (exit 0, within 20 s; the
  time it took is printed), the device's last line being its summary
  (server_stop);
- the device's events in its JSONL sink are the events `corepool batch`
  writes for the same audio (same labels, each boundary within one hop; the
  last one, the trailing silence, by its label and start).

When this host's ALSA cannot open the file plugin at all (no alsa-lib
configuration, no arecord to check with), it says so and exits 77 (ctest:
skipped), listed by scripts/list-skipped-tests.sh.

Usage: alsa_source_e2e_test.py --corepool BIN --gen-audio BIN --model DIR [unittest args]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
import wave

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sources_e2e_test import HOP, same_events, source_table, wait_for  # noqa: E402

ARGS = None
PAD_S = 4  # seconds of silence after the demo in the device's file

ASOUNDRC = """pcm.corepooltest {
  type file
  slave.pcm "null"
  file "/dev/null"
  infile "%s"
  format "raw"
}
"""


def write_asoundrc(home, infile):
    with open(os.path.join(home, ".asoundrc"), "w") as f:
        f.write(ASOUNDRC % infile)


def alsa_unavailable(home):
    """Why this host's ALSA cannot capture from the file plugin, or None."""
    if not shutil.which("arecord"):
        return "no arecord (alsa-utils) to check ALSA with"
    run = subprocess.run(["arecord", "-q", "-D", "corepooltest", "-f", "S16_LE", "-r", "16000", "-c", "1", "-t", "raw",
                          "-s", "1600", "/dev/null"], env=dict(os.environ, HOME=home), capture_output=True, text=True,
                         timeout=30)
    if run.returncode != 0:
        return "arecord cannot capture from ALSA's file plugin here: " + (run.stderr.strip() or "exit %d" % run.returncode)
    return None


class AlsaSource(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        d = self.dir.name
        demo = os.path.join(d, "demo.wav")
        subprocess.run([ARGS.gen_audio, "--demo", "--out", demo], check=True, stdout=subprocess.DEVNULL)
        with wave.open(demo) as w:
            self.rate = w.getframerate()
            self.assertEqual((w.getnchannels(), w.getsampwidth()), (1, 2))
            pcm = w.readframes(w.getnframes()) + b"\x00\x00" * (self.rate * PAD_S)
        self.seconds = len(pcm) / 2 / self.rate
        self.raw = os.path.join(d, "in.raw")
        with open(self.raw, "wb") as f:
            f.write(pcm)
        padded = os.path.join(d, "padded.wav")  # the same audio as a file, for batch
        with wave.open(padded, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(self.rate)
            w.writeframes(pcm)
        batch = subprocess.run([ARGS.corepool, "--log-level", "warn", "batch", "--model", ARGS.model, "--format",
                                "jsonl", "--out", "-", padded], check=True, capture_output=True, text=True)
        self.batch = [e for e in map(json.loads, filter(str.strip, batch.stdout.splitlines())) if "label" in e]
        self.assertTrue(self.batch, "batch found no events in the padded demo")
        self.home = os.path.join(d, "home")
        os.mkdir(self.home)
        write_asoundrc(self.home, self.raw)
        self.events = os.path.join(d, "events")

    def start_serve(self, tables):
        config = os.path.join(self.dir.name, "corepool.toml")
        with open(config, "w") as f:
            f.write("[engine]\nworkers = 2\n[serve]\nallow_model_control = true\n\n" + "".join(tables))
        self.log_path = os.path.join(self.dir.name, "serve.log")
        log = open(self.log_path, "w")
        self.addCleanup(log.close)
        self.serve = subprocess.Popen([ARGS.corepool, "--log-level", "info", "--config", config, "serve",
                                       "--listen", "127.0.0.1:0", "--grpc-listen", "", "--model", ARGS.model],
                                      stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, HOME=self.home))
        self.addCleanup(self.kill_serve)

        def port():
            if self.serve.poll() is not None:
                raise AssertionError("serve exited:\n" + self.serve_log())
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", self.serve_log())
            return m and int(m.group(1))
        self.port = wait_for("serve to listen", port, 60)

    def kill_serve(self):
        if self.serve.poll() is None:
            self.serve.kill()
            self.serve.wait()

    def serve_log(self):
        with open(self.log_path) as f:
            return f.read()

    def sources(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/v2/sources" % self.port, timeout=10) as r:
            return {s["name"]: s for s in json.loads(r.read().decode())["sources"]}

    def lines(self, name):
        out = []
        for path in sorted(os.listdir(self.events)) if os.path.isdir(self.events) else []:
            if path.startswith(name + "-") and path.endswith(".jsonl"):
                with open(os.path.join(self.events, path)) as f:
                    out += [json.loads(line) for line in f if line.strip()]
        return out

    def test_a_device_source_gives_batchs_events_a_bad_device_backs_off_and_sigterm_is_prompt(self):
        self.start_serve([source_table("mic", "alsa:corepooltest?sample_rate=%d&channels=1" % self.rate, self.events),
                          source_table("nodevice", "alsa:corepool-no-such-device", self.events, timeout_s=1)])
        # Past the file's end (the demo and its padding) on the first connection.
        wait_for("the device's audio past the file's end", lambda: (
            lambda s: s if s["audio_seconds"] > self.seconds + 2 else None)(self.sources()["mic"]), seconds=90)
        mic = self.sources()["mic"]
        self.assertEqual(mic["state"], "running", mic)
        self.assertEqual(mic["connections"], 1, mic)
        self.assertIn('source "mic": connected to alsa:corepooltest?sample_rate=%d&channels=1 (%d Hz, 1 channels)'
                      % (self.rate, self.rate), self.serve_log())

        bad = wait_for("the unknown device to fail and be retried", lambda: (
            lambda s: s if s["reconnects"] >= 1 and s["last_error"] else None)(self.sources()["nodevice"]))
        self.assertIn(bad["state"], ("connecting", "backoff"), bad)
        self.assertIn("alsa:corepool-no-such-device: cannot open: ", bad["last_error"])
        self.assertIn("corepool-no-such-device", bad["last_error"].split("cannot open: ", 1)[1], bad)
        self.assertEqual(bad["events"], 0, bad)

        # SIGTERM with the device open: the server stops at once, flushing
        # the device's open event, then its summary.
        t0 = time.monotonic()
        self.serve.send_signal(signal.SIGTERM)
        self.assertEqual(self.serve.wait(timeout=20), 0, self.serve_log())
        print("SIGTERM to exit with a device source open: %.2f s" % (time.monotonic() - t0), file=sys.stderr)
        lines = self.lines("mic")
        self.assertEqual(lines[-1]["summary"]["end"], "server_stop", lines[-1])
        self.assertTrue(all(e["connection"] == 1 for e in lines), lines)
        got = [e for e in lines if "label" in e and e["start"] < self.seconds]
        # Every event of the demo; the last one (the padding's silence) goes on
        # into whatever the device delivers after the file, so only its label
        # and start are batch's.
        same_events(self, got[:-1], self.batch[:-1])
        self.assertEqual(got[-1]["label"], self.batch[-1]["label"], (got, self.batch))
        self.assertLessEqual(abs(got[-1]["start"] - self.batch[-1]["start"]), HOP, (got, self.batch))


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--corepool", required=True)
    parser.add_argument("--gen-audio", required=True)
    parser.add_argument("--model", required=True)
    ARGS, rest = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as home:
        with open(os.path.join(home, "in.raw"), "wb") as f:
            f.write(b"\x00\x00" * 1600)
        write_asoundrc(home, os.path.join(home, "in.raw"))
        why = alsa_unavailable(home)
    if why:
        # GoogleTest's form, so that scripts/list-skipped-tests.sh lists the reason.
        print("%s:1: Skipped\nALSA device sources not tested: %s\n[  SKIPPED ] AlsaSource" % (__file__, why))
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
