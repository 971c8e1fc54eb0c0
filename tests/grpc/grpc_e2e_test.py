#!/usr/bin/env python3
"""`corepool serve`'s gRPC endpoint end to end with a real gRPC client.

Debian's python3-grpcio, stubs generated at test time (python3-grpc-tools) from
the same .proto files the server is built from. Starts the real binary (HTTP and
gRPC on ephemeral ports, or with --socket-activate under systemd-socket-activate
with fds named http and grpc), drives every RPC, checks gRPC answers against the
HTTP API's for the same input, each bad input's error, and that the server stays
up. Run by ctest once per mode:
  grpc_e2e_test.py --corepool BIN --model DIR --proto DIR --mode thread|process
"""
import argparse
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

ARGS = None
SERVER = None  # the one Server of this run
pb = None      # grpc_service_pb2, generated in setUpModule
rpc = None     # grpc_service_pb2_grpc
grpc = None


def generate_stubs(proto_dir, out_dir):
    from grpc_tools import protoc
    rc = protoc.main(["protoc", "-I", proto_dir, "--python_out=" + out_dir, "--grpc_python_out=" + out_dir,
                      os.path.join(proto_dir, "model_config.proto"), os.path.join(proto_dir, "grpc_service.proto")])
    if rc != 0:
        raise RuntimeError("grpc_tools.protoc failed with %d" % rc)
    sys.path.insert(0, out_dir)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


class Server:
    """One `corepool serve`, HTTP and gRPC on ports it picked (or systemd-socket-activate's)."""

    def __init__(self, workdir, socket_activate, serve_extra=""):
        self.workdir = workdir
        self.config = os.path.join(workdir, "corepool.toml")
        with open(self.config, "w") as f:
            # hang_timeout_ms: Backlog SIGSTOPs the workers for a few seconds.
            f.write("[engine]\nmax_batch = 4\nqueue_depth = 512\nworkers = 2\nhang_timeout_ms = 60000\n"
                    "[serve]\ngrpc_max_message_mb = 4\nrequest_timeout_s = 60\ndrain_timeout_s = 20\n"
                    "allow_client_shm = true\nallow_model_control = true\n" + serve_extra)
        self.log_path = os.path.join(workdir, "serve.log")
        cmd = [ARGS.corepool, "--log-level", "info", "--config", self.config, "serve", "--mode", ARGS.mode,
               "--model", ARGS.model]
        if socket_activate:
            # A port free_port() saw free may be taken by a parallel test before
            # systemd-socket-activate binds it: it then exits, and we try others.
            for attempt in range(5):
                self.http_port, self.grpc_port = free_port(), free_port()
                activate = [ARGS.socket_activate, "-l", "127.0.0.1:%d" % self.http_port,
                            "-l", "127.0.0.1:%d" % self.grpc_port, "--fdname=http:grpc"]
                self.log = open(self.log_path, "w")
                self.proc = subprocess.Popen(activate + cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir)
                wait_for(lambda: "Listening on" in self.text() or self.proc.poll() is not None, 30,
                         "systemd-socket-activate to listen")
                if self.proc.poll() is None:
                    break
                self.log.close()
            # systemd-socket-activate execs serve on the first connection.
            wait_for(lambda: self.try_connect(), 60, "the first connection through systemd-socket-activate")
        else:
            cmd += ["--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"]
            self.log = open(self.log_path, "w")
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir)
        wait_for(lambda: "serving model" in self.text() or self.proc.poll() is not None, 120, "serve to start")
        if self.proc.poll() is not None:
            raise RuntimeError("serve exited %s:\n%s" % (self.proc.returncode, self.text()))
        if socket_activate and 'gRPC: serving on the "grpc" socket from systemd' not in self.text():
            raise RuntimeError("gRPC did not take the socket named grpc:\n" + self.text())
        if not socket_activate:
            self.http_port = int(re.search(r"on http://[^ ]*:([0-9]+)", self.text()).group(1))
            self.grpc_port = int(re.search(r"gRPC: serving on grpc://[^ ]*:([0-9]+)", self.text()).group(1))
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port,
                                             options=[("grpc.max_send_message_length", 16 << 20),
                                                      ("grpc.max_receive_message_length", 16 << 20)])
        self.stub = rpc.GRPCInferenceServiceStub(self.channel)

    def try_connect(self):
        import socket
        try:
            with socket.create_connection(("127.0.0.1", self.http_port), timeout=1) as s:
                s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return True
        except OSError:
            return False

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def http(self, path, body=None, headers=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.http_port, path), data=body,
                                     headers=headers or {}, method="POST" if body is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def metrics(self):
        return self.http("/metrics")[1].decode()

    def workers(self):
        kids = []
        for task in os.listdir("/proc/%d/task" % self.proc.pid):
            with open("/proc/%d/task/%s/children" % (self.proc.pid, task)) as f:
                kids += [int(p) for p in f.read().split()]
        return kids

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.channel.close()
        self.log.close()
        return self.proc.returncode


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric_sum(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^%s(\{[^}]*\})? ([-0-9.e+]+)$" % re.escape(name), line)
        if not m:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def item_floats():
    meta = json.loads(SERVER.http("/v2/models/%s" % SERVER.model)[1])
    n = 1
    for d in meta["inputs"][0]["shape"][1:]:
        n *= d
    return n, meta["inputs"][0]["shape"][1:]


def tensor(batch, seed=1):
    n, _ = item_floats()
    return [((i * 7919 + seed * 104729) % 1000) / 500.0 - 1.0 for i in range(batch * n)]


def infer_request(values, batch, typed=False, model=None, request_id="r1"):
    _, dims = item_floats()
    req = pb.ModelInferRequest(model_name=model or SERVER.model, id=request_id)
    inp = req.inputs.add(name="input", datatype="FP32", shape=[batch] + dims)
    if typed:
        inp.contents.fp32_contents.extend(values)
    else:
        req.raw_input_contents.append(struct.pack("<%df" % len(values), *values))
    return req


def scores_of(response):
    raw = response.raw_output_contents[0]
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


def http_infer_json(values, batch):
    _, dims = item_floats()
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [batch] + dims, "data": values}]})
    code, out = SERVER.http("/v2/models/%s/infer" % SERVER.model, body.encode(), {"Content-Type": "application/json"})
    assert code == 200, (code, out)
    return json.loads(out)["outputs"][0]["data"]


def http_infer_binary(values, batch):
    _, dims = item_floats()
    header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [batch] + dims,
                                     "parameters": {"binary_data_size": 4 * len(values)}}]}).encode()
    body = header + struct.pack("<%df" % len(values), *values)
    code, out = SERVER.http("/v2/models/%s/infer" % SERVER.model, body,
                            {"Inference-Header-Content-Length": str(len(header))})
    assert code == 200, (code, out[:200])
    return json.loads(out)["outputs"][0]["data"]


def setUpModule():
    global SERVER, pb, rpc, grpc
    stubs = tempfile.mkdtemp(prefix="corepool-grpc-stubs-")
    generate_stubs(ARGS.proto, stubs)
    import grpc as grpc_module
    import grpc_service_pb2
    import grpc_service_pb2_grpc
    grpc, pb, rpc = grpc_module, grpc_service_pb2, grpc_service_pb2_grpc
    workdir = tempfile.mkdtemp(prefix="corepool-grpc-e2e-")
    SERVER = Server(workdir, ARGS.socket_activate_mode)
    index = SERVER.stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=30)
    SERVER.model = index.models[0].name


def tearDownModule():
    if SERVER:
        rc = SERVER.stop()
        if rc != 0:
            print(SERVER.text(), file=sys.stderr)
            raise AssertionError("serve exited %s after SIGTERM" % rc)


class HealthAndMetadata(unittest.TestCase):
    def test_live_ready_and_model_ready(self):
        self.assertTrue(SERVER.stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live)
        self.assertTrue(SERVER.stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready)
        self.assertTrue(SERVER.stub.ModelReady(pb.ModelReadyRequest(name=SERVER.model), timeout=30).ready)

    def test_server_metadata_equals_http(self):
        meta = SERVER.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=30)
        http = json.loads(SERVER.http("/v2")[1])
        self.assertEqual(meta.name, http["name"])
        self.assertEqual(meta.version, http["version"])
        self.assertEqual(list(meta.extensions), http["extensions"])

    def test_model_metadata_equals_http(self):
        meta = SERVER.stub.ModelMetadata(pb.ModelMetadataRequest(name=SERVER.model), timeout=30)
        http = json.loads(SERVER.http("/v2/models/%s" % SERVER.model)[1])
        self.assertEqual(meta.name, http["name"])
        self.assertEqual(meta.inputs[0].name, "input")
        self.assertEqual(list(meta.inputs[0].shape), http["inputs"][0]["shape"])
        self.assertEqual(list(meta.outputs[0].shape), http["outputs"][0]["shape"])

    def test_model_config_is_tritons(self):
        config = SERVER.stub.ModelConfig(pb.ModelConfigRequest(name=SERVER.model), timeout=30).config
        self.assertEqual(config.name, SERVER.model)
        self.assertEqual(config.platform, "pytorch_libtorch")
        self.assertEqual(config.input[0].data_type, pb.model__config__pb2.TYPE_FP32)
        self.assertEqual(list(config.input[0].dims), item_floats()[1])
        self.assertEqual(config.instance_group[0].kind, pb.model__config__pb2.ModelInstanceGroup.KIND_CPU)
        self.assertEqual(config.instance_group[0].count, 2)
        self.assertGreaterEqual(config.max_batch_size, 1)

    def test_unknown_model_is_not_found(self):
        for call, req in [(SERVER.stub.ModelMetadata, pb.ModelMetadataRequest(name="nope")),
                          (SERVER.stub.ModelConfig, pb.ModelConfigRequest(name="nope")),
                          (SERVER.stub.ModelInfer, infer_request(tensor(1), 1, model="nope"))]:
            with self.assertRaises(grpc.RpcError) as e:
                call(req, timeout=30)
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND, e.exception.details())
            self.assertIn("nope", e.exception.details())

    def test_cuda_shared_memory_is_unimplemented(self):
        with self.assertRaises(grpc.RpcError) as e:
            SERVER.stub.CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest(), timeout=30)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)


def assert_same_scores(test, got, want):
    """Two answers to the same segments, equal up to float rounding: a
    request's segments may run as one batch or one per engine, and a batch's
    size can change the kernel (1e-7 apart on an AMX Xeon)."""
    test.assertEqual(len(got), len(want))
    for g, w in zip(got, want):
        test.assertAlmostEqual(g, w, places=5)


class Infer(unittest.TestCase):
    def test_raw_and_typed_contents_equal_http_json_and_binary(self):
        values = tensor(2, seed=3)
        raw = scores_of(SERVER.stub.ModelInfer(infer_request(values, 2), timeout=60))
        typed = scores_of(SERVER.stub.ModelInfer(infer_request(values, 2, typed=True), timeout=60))
        for other in (typed, http_infer_json(values, 2), http_infer_binary(values, 2)):
            assert_same_scores(self, other, raw)

    def test_response_names_the_model_id_and_shape(self):
        response = SERVER.stub.ModelInfer(infer_request(tensor(3), 3, request_id="abc"), timeout=60)
        self.assertEqual(response.model_name, SERVER.model)
        self.assertEqual(response.id, "abc")
        self.assertEqual(response.outputs[0].name, "scores")
        self.assertEqual(response.outputs[0].datatype, "FP32")
        self.assertEqual(response.outputs[0].shape[0], 3)
        self.assertEqual(len(scores_of(response)), 3 * response.outputs[0].shape[1])

    def test_bad_requests_are_invalid_argument_and_the_server_stays_up(self):
        values = tensor(1)
        wrong_shape = infer_request(values, 1)
        wrong_shape.inputs[0].shape[1] += 1
        wrong_type = infer_request(values, 1)
        wrong_type.inputs[0].datatype = "INT64"
        short = infer_request(values[:-1], 1)
        nan = infer_request([float("nan")] + values[1:], 1)
        no_data = infer_request(values, 1)
        del no_data.raw_input_contents[:]
        two_inputs = infer_request(values, 1)
        two_inputs.inputs.add(name="input", datatype="FP32", shape=[1])
        bad_output = infer_request(values, 1)
        bad_output.outputs.add(name="logits")
        for name, req, field in [("wrong shape", wrong_shape, "inputs[0].shape"),
                                 ("wrong datatype", wrong_type, "inputs[0].datatype"),
                                 ("too few bytes", short, "raw_input_contents[0]"),
                                 ("not finite", nan, "not finite"),
                                 ("no data", no_data, "no data"),
                                 ("two inputs", two_inputs, "inputs"),
                                 ("unknown output", bad_output, "outputs[0].name")]:
            with self.assertRaises(grpc.RpcError, msg=name) as e:
                SERVER.stub.ModelInfer(req, timeout=30)
            self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, name)
            self.assertIn(field, e.exception.details(), name)
        self.assertTrue(SERVER.stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live)
        self.assertEqual(len(scores_of(SERVER.stub.ModelInfer(infer_request(values, 1), timeout=60))) > 0, True)

    def test_garbage_bytes_are_not_a_message(self):
        garbage = SERVER.channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                             request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with self.assertRaises(grpc.RpcError) as e:
            garbage(b"\xff\xff\xff\xff\x0f not protobuf", timeout=30)
        self.assertIn(e.exception.code(), (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT))
        self.assertTrue(SERVER.stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live)

    def test_a_message_over_grpc_max_message_mb_is_resource_exhausted(self):
        req = infer_request(tensor(1), 1)
        req.id = "x" * (5 << 20)  # serve.grpc_max_message_mb = 4
        with self.assertRaises(grpc.RpcError) as e:
            SERVER.stub.ModelInfer(req, timeout=30)
        self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertTrue(SERVER.stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live)

    def test_grpc_requests_are_counted_by_protocol_in_metrics(self):
        before = metric_sum(SERVER.metrics(), "corepool_requests_total", protocol="grpc", endpoint="infer")
        for _ in range(3):
            SERVER.stub.ModelInfer(infer_request(tensor(1), 1), timeout=60)
        after = metric_sum(SERVER.metrics(), "corepool_requests_total", protocol="grpc", endpoint="infer")
        self.assertEqual(after - before, 3)

    def test_statistics_count_grpc_inferences(self):
        def count():
            stats = SERVER.stub.ModelStatistics(pb.ModelStatisticsRequest(name=SERVER.model), timeout=30)
            return stats.model_stats[0].inference_count
        before = count()
        SERVER.stub.ModelInfer(infer_request(tensor(2), 2), timeout=60)
        self.assertEqual(count() - before, 2)


class Backlog(unittest.TestCase):
    """Requests that wait behind others: process mode SIGSTOPs the workers too,
    so nothing runs until tearDown; thread mode relies on the blockers taking
    over a second of forward() on two engine threads. The workers' rings take
    64 segments each, so three blockers of 64 leave later requests in the queue.
    Every request is the one built here: building a request of 64 segments in
    Python takes about as long as the engines take to run one, so requests
    built one after the other let the blockers drain before the later ones
    arrived (thread mode, AMD EPYC Zen 5: no queue-full answer)."""

    BATCH = 64

    def setUp(self):
        self.request = infer_request(tensor(self.BATCH), self.BATCH)
        self.workers = SERVER.workers() if ARGS.mode == "process" else []
        for pid in self.workers:
            os.kill(pid, signal.SIGSTOP)
        self.blockers = [SERVER.stub.ModelInfer.future(self.request, timeout=120) for _ in range(3)]
        wait_for(lambda: metric_sum(SERVER.metrics(), "corepool_queue_depth") >= 2 * self.BATCH, 30, "the blockers")

    def tearDown(self):
        for f in self.blockers:
            f.cancel()
        for pid in self.workers:
            os.kill(pid, signal.SIGCONT)
        wait_for(lambda: metric_sum(SERVER.metrics(), "corepool_queue_depth") == 0, 60, "an empty queue")
        SERVER.stub.ModelInfer(infer_request(tensor(1), 1), timeout=60)  # the server still answers

    def cancelled(self):
        return metric_sum(SERVER.metrics(), "corepool_segments_cancelled_total")

    def test_client_deadline_is_deadline_exceeded_and_drops_the_queued_segments(self):
        before = self.cancelled()
        with self.assertRaises(grpc.RpcError) as e:
            SERVER.stub.ModelInfer(self.request, timeout=0.3)
        self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        wait_for(lambda: self.cancelled() >= before + self.BATCH, 30, "corepool_segments_cancelled_total to grow")

    def test_cancelled_call_drops_its_queued_segments(self):
        before = self.cancelled()
        requests_before = metric_sum(SERVER.metrics(), "corepool_requests_cancelled_total")
        depth = metric_sum(SERVER.metrics(), "corepool_queue_depth")
        victim = SERVER.stub.ModelInfer.future(self.request, timeout=120)
        wait_for(lambda: metric_sum(SERVER.metrics(), "corepool_queue_depth") > depth or victim.done(), 30,
                 "the victim to be queued")
        self.assertFalse(victim.done())
        victim.cancel()
        wait_for(lambda: self.cancelled() >= before + self.BATCH, 30, "corepool_segments_cancelled_total to grow")
        self.assertEqual(metric_sum(SERVER.metrics(), "corepool_requests_cancelled_total"), requests_before + 1)

    def test_full_queue_is_resource_exhausted(self):
        # engine.queue_depth = 512: with the blockers' 192, eight more of 64 cannot all fit.
        more = [SERVER.stub.ModelInfer.future(self.request, timeout=120) for _ in range(8)]
        self.blockers += more
        wait_for(lambda: any(f.done() for f in more), 30, "an answer to one of them")
        codes = [f.exception().code() for f in more if f.done() and f.exception() is not None]
        self.assertIn(grpc.StatusCode.RESOURCE_EXHAUSTED, codes)


class SharedMemory(unittest.TestCase):
    """Triton's system shared memory over gRPC: regions made with shm_open (/dev/shm), registered by key."""

    def region(self, suffix, size, data=b""):
        key = "/corepool-grpc-e2e-%d-%s" % (os.getpid(), suffix)
        fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
        os.ftruncate(fd, size)
        os.pwrite(fd, data, 0)
        os.close(fd)
        self.addCleanup(lambda: os.path.exists("/dev/shm" + key) and os.unlink("/dev/shm" + key))
        return key

    def test_infer_through_registered_regions_equals_the_raw_answer(self):
        values = tensor(2, seed=5)
        raw = scores_of(SERVER.stub.ModelInfer(infer_request(values, 2), timeout=60))
        data = struct.pack("<%df" % len(values), *values)
        in_key = self.region("in", 64 + len(data), b"\0" * 64 + data)
        out_key = self.region("out", 4 * len(raw))
        SERVER.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
            name="in", key=in_key, offset=0, byte_size=64 + len(data)), timeout=30)
        self.addCleanup(lambda: SERVER.stub.SystemSharedMemoryUnregister(
            pb.SystemSharedMemoryUnregisterRequest(name=""), timeout=30))
        SERVER.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
            name="out", key=out_key, offset=0, byte_size=4 * len(raw)), timeout=30)
        status = SERVER.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), timeout=30)
        self.assertEqual(sorted(status.regions.keys()), ["in", "out"])
        self.assertEqual(status.regions["in"].key, in_key)
        req = infer_request(values, 2)
        del req.raw_input_contents[:]
        params = req.inputs[0].parameters
        params["shared_memory_region"].string_param = "in"
        params["shared_memory_offset"].int64_param = 64
        params["shared_memory_byte_size"].int64_param = len(data)
        out = req.outputs.add(name="scores")
        out.parameters["shared_memory_region"].string_param = "out"
        out.parameters["shared_memory_byte_size"].int64_param = 4 * len(raw)
        response = SERVER.stub.ModelInfer(req, timeout=60)
        self.assertEqual(len(response.raw_output_contents), 0)
        self.assertEqual(response.outputs[0].parameters["shared_memory_region"].string_param, "out")
        with open("/dev/shm" + out_key, "rb") as f:
            got = list(struct.unpack("<%df" % len(raw), f.read()))
        assert_same_scores(self, got, raw)


class Doors(unittest.TestCase):
    """With serve.api_token, load, unload and shm registration need metadata
    authorization: Bearer TOKEN; none or a wrong one is UNAUTHENTICATED."""

    TOKEN = "grpc-door-7c1f"

    @classmethod
    def setUpClass(cls):
        cls.server = Server(tempfile.mkdtemp(prefix="corepool-grpc-doors-"), False,
                            'api_token = "%s"\n' % cls.TOKEN)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def refused(self, call, request, metadata=None):
        with self.assertRaises(grpc.RpcError) as e:
            call(request, timeout=60, metadata=metadata)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED, e.exception.details())
        return e.exception.details()

    def test_model_control_needs_the_bearer_token(self):
        stub, model = self.server.stub, SERVER.model
        self.assertIn("missing token", self.refused(stub.RepositoryModelUnload,
                                                    pb.RepositoryModelUnloadRequest(model_name=model)))
        self.refused(stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name=model))
        self.refused(stub.SystemSharedMemoryRegister, pb.SystemSharedMemoryRegisterRequest(name="r", key="/x"))
        self.assertIn("wrong token", self.refused(stub.RepositoryModelUnload,
                                                  pb.RepositoryModelUnloadRequest(model_name=model),
                                                  [("authorization", "Bearer nope")]))
        self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name=model), timeout=30).ready)
        right = [("authorization", "Bearer " + self.TOKEN)]
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name=model), timeout=60, metadata=right)
        self.assertFalse(stub.ModelReady(pb.ModelReadyRequest(name=model), timeout=30).ready)
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name=model), timeout=120, metadata=right)
        self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name=model), timeout=30).ready)
        self.assertEqual(metric_sum(self.server.metrics(), "corepool_model_control_refused_total",
                                    reason="unauthenticated"), 4)


class ZRepository(unittest.TestCase):
    """Runs last (Z): unload, load and reload change the generation."""

    def test_index_lists_the_model_ready(self):
        index = SERVER.stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True), timeout=30)
        self.assertEqual([(m.name, m.state) for m in index.models], [(SERVER.model, "READY")])

    def test_unload_then_load_as_a_new_generation(self):
        generation = metric_sum(SERVER.metrics(), "corepool_generation")
        SERVER.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name=SERVER.model), timeout=60)
        self.assertFalse(SERVER.stub.ModelReady(pb.ModelReadyRequest(name=SERVER.model), timeout=30).ready)
        with self.assertRaises(grpc.RpcError) as e:
            SERVER.stub.ModelInfer(infer_request(tensor(1), 1), timeout=30)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        SERVER.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name=SERVER.model), timeout=120)
        self.assertTrue(SERVER.stub.ModelReady(pb.ModelReadyRequest(name=SERVER.model), timeout=30).ready)
        self.assertGreater(metric_sum(SERVER.metrics(), "corepool_generation"), generation)
        self.assertTrue(scores_of(SERVER.stub.ModelInfer(infer_request(tensor(1), 1), timeout=60)))


class ZZDrain(unittest.TestCase):
    """Runs last (ZZ): SIGTERM lets a call in flight finish and refuses new ones."""

    def test_sigterm_finishes_the_call_in_flight_and_exits_0(self):
        values = tensor(64, seed=9)
        in_flight = SERVER.stub.ModelInfer.future(infer_request(values, 64), timeout=120)
        wait_for(lambda: metric_sum(SERVER.metrics(), "corepool_queue_depth") > 0 or in_flight.done(), 30,
                 "the call to be queued")
        SERVER.proc.send_signal(signal.SIGTERM)
        self.assertEqual(len(scores_of(in_flight.result())), 64 * 4)
        self.assertEqual(SERVER.proc.wait(60), 0)
        self.assertIn("stopped", SERVER.text())


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--corepool", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--proto", required=True, help="directory of grpc_service.proto and model_config.proto")
    p.add_argument("--mode", choices=["thread", "process"], required=True)
    p.add_argument("--socket-activate", default="", help="systemd-socket-activate: serve gets fds http and grpc")
    ARGS, rest = p.parse_known_args()
    ARGS.socket_activate_mode = bool(ARGS.socket_activate)
    ARGS.corepool, ARGS.model, ARGS.proto = (os.path.abspath(p) for p in (ARGS.corepool, ARGS.model, ARGS.proto))
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
