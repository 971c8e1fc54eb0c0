// corepool-gen-model: writes a model directory (model.pt + model.toml) that
// follows the corepool model contract, with deterministic weights. Builds the
// default model at build time and the large models the memory benchmarks need.
// The network is a small CNN over log-mel segments, written in TorchScript.
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>

#include "config/model_config.h"

namespace {

// The network is CNN10 from the audio-tagging literature (PANNs): four blocks
// of two 3x3 convolutions with ReLU, 2x2 average pooling between blocks,
// channels W, 2W, 4W, 8W; then mean over frequency, max + mean over time, a
// linear layer and a sigmoid. W = 64 is the published CNN10 (about 5.2 M
// parameters, 2.6 GFLOP per 1-s log-mel segment): the compute of a realistic
// tagger, which is what the serving layer must not waste. An optional wide
// hidden layer (--hidden) makes large models for the memory benchmarks.
// forward(): [B, 1, n_mels, frames] log-mel -> [B, n_labels] scores in (0, 1).
std::string forward_source(int blocks, bool hidden) {
  std::string src = "def forward(self, x):\n";
  for (int b = 1; b <= blocks; ++b) {
    for (int c = 1; c <= 2; ++c) {
      const std::string n = "b" + std::to_string(b) + "c" + std::to_string(c);
      src += "    x = torch.relu(torch.conv2d(x, self." + n + "_w, self." + n + "_b, [1, 1], [1, 1]))\n";
    }
    if (b < blocks) src += "    x = torch.avg_pool2d(x, [2, 2])\n";
  }
  src += "    x = torch.mean(x, 2)\n";                                  // over frequency
  src += "    x = torch.amax(x, 2) + torch.mean(x, 2)\n";              // over time
  if (hidden) src += "    x = torch.relu(torch.addmm(self.hidden_b, x, self.hidden_w.t()))\n";
  src += "    x = torch.addmm(self.fc_b, x, self.fc_w.t())\n";
  src += "    return torch.sigmoid(x)\n";
  return src;
}

// He-initialised weight with the given fan-in, drawn from the seeded global RNG.
torch::Tensor he_weight(at::IntArrayRef shape, int64_t fan_in) {
  return torch::randn(shape) * std::sqrt(2.0 / static_cast<double>(fan_in));
}

void add_conv(torch::jit::Module& m, const std::string& name, int64_t in, int64_t out) {
  m.register_parameter(name + "_w", he_weight({out, in, 3, 3}, in * 9), false);
  m.register_parameter(name + "_b", torch::zeros({out}), false);
}

constexpr int kBlocks = 4;

torch::jit::Module build_module(const corepool::ModelConfig& cfg, int64_t width, int64_t hidden) {
  torch::jit::Module m("CorepoolTagger");
  int64_t in = 1;
  for (int b = 1; b <= kBlocks; ++b) {
    const int64_t out = width << (b - 1);
    add_conv(m, "b" + std::to_string(b) + "c1", in, out);
    add_conv(m, "b" + std::to_string(b) + "c2", out, out);
    in = out;
  }
  const int64_t labels = static_cast<int64_t>(cfg.labels.size());
  int64_t fc_in = in;
  if (hidden > 0) {
    m.register_parameter("hidden_w", he_weight({hidden, in}, in), false);
    m.register_parameter("hidden_b", torch::zeros({hidden}), false);
    fc_in = hidden;
  }
  m.register_parameter("fc_w", he_weight({labels, fc_in}, fc_in) * 0.5, false);
  // Spread the biases so that the labels of an untrained model do not all sit at 0.5.
  m.register_parameter("fc_b", torch::linspace(-1.0, 1.0, labels), false);
  m.define(forward_source(kBlocks, hidden > 0));
  m.eval();
  return m;
}

corepool::ModelConfig default_config(const std::string& name) {
  corepool::ModelConfig cfg;
  cfg.name = name;
  cfg.input = corepool::InputKind::kLogMel;
  cfg.sample_rate = 16000;
  cfg.segment_seconds = 1.0;
  cfg.hop_seconds = 0.5;
  cfg.n_fft = 512;
  cfg.hop_length = 160;
  cfg.n_mels = 64;
  cfg.fmin = 0.0;
  cfg.fmax = 8000.0;
  cfg.labels = {"speech", "music", "noise", "silence"};
  cfg.thresholds = {0.5f, 0.5f, 0.5f, 0.5f};
  cfg.max_batch = 64;
  return cfg;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"corepool-gen-model: write a deterministic TorchScript tagger + model.toml"};
  std::string out;
  std::string name = "default";
  uint64_t seed = 1;
  int64_t hidden = 0;
  int64_t width = 64;
  app.add_option("--out", out, "model directory to write")->required();
  app.add_option("--name", name, "model name in model.toml");
  app.add_option("--seed", seed, "RNG seed for the weights");
  app.add_option("--width", width, "channels of the first block (64 = CNN10)")
      ->check(CLI::Range(int64_t{1}, int64_t{512}));
  app.add_option("--hidden", hidden, "width of an extra hidden layer (0 = none); "
                 "each unit adds 8 * width + 5 floats (~2 KB at width 64), so 150000 adds ~300 MB")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  CLI11_PARSE(app, argc, argv);

  try {
    at::set_num_threads(1);  // deterministic and quiet at build time
    torch::manual_seed(seed);
    const corepool::ModelConfig cfg = default_config(name);
    torch::jit::Module module = build_module(cfg, width, hidden);
    std::filesystem::create_directories(out);
    const std::string toml_path = out + "/model.toml";
    std::ofstream(toml_path) << corepool::to_toml(cfg);
    corepool::load_model_config(toml_path);  // what we wrote must read back
    module.save(out + "/model.pt");
    std::printf("wrote %s/model.pt (seed %llu, width %lld, hidden %lld)\n", out.c_str(),
                static_cast<unsigned long long>(seed), static_cast<long long>(width),
                static_cast<long long>(hidden));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corepool-gen-model: %s\n", e.what());
    return 1;
  }
  return 0;
}
