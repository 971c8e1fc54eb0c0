// The TorchScript source is generated for the block count of NetShape; the
// frequency axis is kept through the pooling (n_mels / 8 bands), since where
// the energy sits is half of what tells speech, music and noise apart.
#include "models/train/tagger_net.h"

#include <cmath>
#include <string>

namespace corepool::train {
namespace {

std::string source(size_t blocks) {
  std::string s = "def logits(self, x):\n";
  s += "    x = (x - self.in_mean) / self.in_std\n";
  s += "    x = torch.avg_pool2d(x, [2, 2])\n";  // 64 x 101 -> 32 x 50: a quarter of the compute
  for (size_t b = 1; b <= blocks; ++b) {
    const std::string n = "c" + std::to_string(b);
    s += "    x = torch.relu(torch.conv2d(x, self." + n + "_w, self." + n + "_b, [1, 1], [1, 1]))\n";
    if (b < blocks) s += "    x = torch.max_pool2d(x, [2, 2])\n";
  }
  s += "    x = torch.cat([torch.amax(x, 3), torch.mean(x, 3)], 1)\n";  // over time: [B, 2C, bands]
  s += "    x = torch.flatten(x, 1)\n";
  s += "    return torch.addmm(self.fc_b, x, self.fc_w.t())\n";
  s += "\n";
  s += "def forward(self, x):\n";
  s += "    return torch.softmax(self.logits(x), 1)\n";
  return s;
}

torch::Tensor he(at::IntArrayRef shape, int64_t fan_in) {
  return torch::randn(shape) * std::sqrt(2.0 / double(fan_in));
}

}  // namespace

torch::jit::Module make_tagger(const NetShape& shape, double mean, double std) {
  torch::jit::Module m("CorepoolTagger");
  m.register_buffer("in_mean", torch::full({1}, mean));
  m.register_buffer("in_std", torch::full({1}, std));
  int64_t in = 1, bands = shape.n_mels / 2;
  for (size_t b = 0; b < shape.channels.size(); ++b) {
    const int64_t out = shape.channels[b];
    const std::string n = "c" + std::to_string(b + 1);
    m.register_parameter(n + "_w", he({out, in, 3, 3}, in * 9), false);
    m.register_parameter(n + "_b", torch::zeros({out}), false);
    in = out;
    if (b + 1 < shape.channels.size()) bands /= 2;
  }
  const int64_t features = 2 * in * bands;
  m.register_parameter("fc_w", he({shape.labels, features}, features) * 0.5, false);
  m.register_parameter("fc_b", torch::zeros({shape.labels}), false);
  m.define(source(shape.channels.size()));
  return m;
}

std::vector<torch::Tensor> trainable(const torch::jit::Module& module) {
  std::vector<torch::Tensor> params;
  for (const auto& p : module.named_parameters(/*recurse=*/false)) params.push_back(p.value);
  return params;
}

}  // namespace corepool::train
