// corepool-train-tagger: trains the default model (speech / music / noise /
// silence) from audio it synthesizes (tools/sound_classes.h) and, with --real,
// from real recordings out of Debian packages (models/data/), and saves it as
// TorchScript next to the model.toml contract it reads from the same directory.
// Deterministic: fixed seeds, one thread. `make train` runs it; the result is
// committed, so an ordinary build never trains. Exit: 0 saved, 1 failed, 2 usage.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "config/model_config.h"
#include "models/train/real_clips.h"
#include "models/train/tagger_data.h"
#include "models/train/tagger_net.h"

namespace {

using corepool::train::Dataset;

struct Options {
  std::string out = "models/default";
  uint64_t seed = 1;
  int per_class = 2000;
  int held_out_per_class = 100;
  int epochs = 14;
  int batch = 64;
  double lr = 3e-3;
  std::string real;  // DEST of models/data/fetch-sources.sh; empty: synthesis only
  corepool::train::RealOptions real_options;
  std::vector<int64_t> channels = {16, 32, 48};
  double codec_share = 0.3;  // of the synthesized training segments, through a lossy codec
  std::vector<std::string> members;  // --members: combine these trained model.pt files, train nothing
};

Dataset concat(const Dataset& a, const Dataset& b) {
  return {torch::cat({a.x, b.x}), torch::cat({a.y, b.y})};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The real validation segments: up to 1,000 per label from the train files
// the trainer keeps out (one in ten by path hash), drawn with --seed.
Dataset real_validation(const corepool::ModelConfig& cfg, const Options& o) {
  corepool::train::RealOptions v = o.real_options;
  v.per_class = 1000;
  return corepool::train::real_dataset(cfg, o.real, corepool::train::RealSplit::kValidation, v);
}

void set_lr(torch::optim::Adam& opt, double lr) {
  for (auto& group : opt.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
}

// One pass over the training set in a seeded random order, with a cosine learning rate.
double train_epoch(torch::jit::Module& net, torch::optim::Adam& opt, const Dataset& data, const Options& o,
                   int64_t& step, int64_t total_steps) {
  torch::jit::Method logits = net.get_method("logits");
  const torch::Tensor order = torch::randperm(data.x.size(0), torch::kLong);
  double loss_sum = 0;
  int64_t batches = 0;
  for (int64_t at = 0; at < order.size(0); at += o.batch, ++step, ++batches) {
    set_lr(opt, o.lr * 0.5 * (1 + std::cos(M_PI * double(step) / double(total_steps))));
    const torch::Tensor idx = order.slice(0, at, std::min(at + o.batch, order.size(0)));
    const torch::Tensor out = logits({data.x.index_select(0, idx)}).toTensor();
    torch::Tensor loss = torch::nn::functional::cross_entropy(out, data.y.index_select(0, idx));
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_sum += loss.item<double>();
  }
  return loss_sum / double(std::max<int64_t>(batches, 1));
}

int run(const Options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  at::set_num_threads(1);  // deterministic, and the contract says "under 3 minutes on 2 cores" of wall time
  torch::manual_seed(o.seed);
  const corepool::ModelConfig cfg = corepool::train::tagger_contract(o.out + "/model.toml");

  Dataset train =
      corepool::train::make_dataset(cfg, corepool::synth::Split::kTrain, o.seed, o.per_class, o.codec_share);
  const Dataset held = corepool::train::make_dataset(cfg, corepool::synth::Split::kHeldOutVoices, o.seed + 1000,
                                                     o.held_out_per_class);
  Dataset validation;
  if (!o.real.empty()) {
    using corepool::train::RealSplit;
    train = concat(train, corepool::train::real_dataset(cfg, o.real, RealSplit::kTrain, o.real_options));
    validation = real_validation(cfg, o);
  }
  std::printf("data: %lld train and %lld held-out segments in %.1f s\n", (long long)train.x.size(0),
              (long long)held.x.size(0), seconds_since(t0));

  const double mean = train.x.mean().item<double>(), std = train.x.std().item<double>();
  torch::jit::Module net =
      corepool::train::make_tagger({cfg.n_mels, int64_t(cfg.labels.size()), o.channels}, mean, std);
  std::vector<torch::Tensor> params = corepool::train::trainable(net);
  for (torch::Tensor& p : params) p.set_requires_grad(true);
  torch::optim::Adam opt(params, torch::optim::AdamOptions(o.lr));
  int64_t step = 0;
  const int64_t total = o.epochs * ((train.x.size(0) + o.batch - 1) / o.batch);
  for (int e = 1; e <= o.epochs; ++e) {
    net.train();
    const double loss = train_epoch(net, opt, train, o, step, total);
    net.eval();
    std::printf("epoch %2d: loss %.4f, synthetic held-out accuracy %.3f", e, loss,
                corepool::train::accuracy(net, held, cfg));
    if (validation.x.defined()) std::printf(", real validation %.3f", corepool::train::accuracy(net, validation, cfg));
    std::printf(", %.1f s\n", seconds_since(t0));
    std::fflush(stdout);
  }
  for (torch::Tensor& p : params) p.set_requires_grad(false);
  net.eval();
  std::printf("synthetic held-out voices (rows: truth, columns: argmax):\n");
  corepool::train::print_confusion(net, held, cfg);
  if (validation.x.defined()) {
    std::printf("real validation (one train file in ten, never trained on):\n");
    corepool::train::print_confusion(net, validation, cfg);
  }
  net.save(o.out + "/model.pt");
  std::printf("wrote %s/model.pt in %.1f s\n", o.out.c_str(), seconds_since(t0));
  return 0;
}

// --members: the trained networks' softmax outputs averaged in one module
// (tagger_net.h). One training to the next moves a label's validation figure
// by up to three points; their average was better than each of them
// (models/README.md, "Five networks averaged").
// With --real, each member and the average are scored on the same real
// validation segments (sampled with --seed), so that members can be compared.
int combine(const Options& o) {
  at::set_num_threads(1);
  std::vector<torch::jit::Module> members;
  for (const std::string& path : o.members) members.push_back(torch::jit::load(path));
  torch::jit::Module net = corepool::train::make_ensemble(members);
  net.eval();
  if (!o.real.empty()) {
    const corepool::ModelConfig cfg = corepool::train::tagger_contract(o.out + "/model.toml");
    const Dataset validation = real_validation(cfg, o);
    for (size_t k = 0; k <= members.size(); ++k) {
      torch::jit::Module& m = k < members.size() ? members[k] : net;
      const std::string name = k < members.size() ? o.members[k] : "the average";
      std::printf("real validation of %s: %.3f\n", name.c_str(), corepool::train::accuracy(m, validation, cfg));
      corepool::train::print_confusion(m, validation, cfg);
    }
  }
  net.save(o.out + "/model.pt");
  std::printf("wrote %s/model.pt: the average of %zu networks\n", o.out.c_str(), members.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"corepool-train-tagger: train the default speech/music/noise/silence tagger"};
  Options o;
  app.add_option("--out", o.out, "model directory holding model.toml; model.pt is written there")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the audio and the weights")->capture_default_str();
  app.add_option("--per-class", o.per_class, "training segments per label")->check(CLI::Range(10, 100000))->capture_default_str();
  app.add_option("--held-out-per-class", o.held_out_per_class, "held-out segments per label")
      ->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--epochs", o.epochs, "passes over the training set")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--batch", o.batch, "segments per step")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--lr", o.lr, "peak learning rate (Adam, cosine decay)")->capture_default_str();
  app.add_option("--real", o.real, "also train on the real recordings that models/data/fetch-sources.sh put in this directory");
  app.add_option("--real-per-class", o.real_options.per_class, "real training segments per label")
      ->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--real-per-file", o.real_options.per_file, "at most this many segments of one recording")
      ->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--codec-share", o.codec_share, "share of synthesized training segments through a lossy codec")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--real-codec-share", o.real_options.codec_share,
                 "share of the real recordings' variants through a lossy codec")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--channels", o.channels, "output channels of each 3x3 convolution block")->delimiter(',')
      ->capture_default_str();
  app.add_option("--members", o.members,
                 "train nothing: write the average of these trained networks (model.pt files) to --out")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  o.real_options.seed = o.seed;
  try {
    return o.members.empty() ? run(o) : combine(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corepool-train-tagger: %s\n", e.what());
    return 1;
  }
}
