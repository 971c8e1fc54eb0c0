// The TorchScript source is generated for the block count of NetShape; the
// frequency axis is kept through the pooling (n_mels / 8 bands), since where
// the energy sits is half of what tells speech, music and noise apart.
#include "models/train/tagger_net.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace corepool::train {
namespace {

// The method `name`, one network's logits; its tensors are named with
// `prefix` (empty for a single network, "m0_", "m1_", ... in an ensemble).
std::string logits_source(size_t blocks, const std::string& name, const std::string& prefix) {
  const std::string self = "self." + prefix;
  std::string s = "def " + name + "(self, x):\n";
  s += "    x = (x - " + self + "in_mean) / " + self + "in_std\n";
  s += "    x = torch.avg_pool2d(x, [2, 2])\n";  // 64 x 101 -> 32 x 50: a quarter of the compute
  for (size_t b = 1; b <= blocks; ++b) {
    const std::string n = self + "c" + std::to_string(b);
    s += "    x = torch.relu(torch.conv2d(x, " + n + "_w, " + n + "_b, [1, 1], [1, 1]))\n";
    if (b < blocks) s += "    x = torch.max_pool2d(x, [2, 2])\n";
  }
  s += "    x = torch.cat([torch.amax(x, 3), torch.mean(x, 3)], 1)\n";  // over time: [B, 2C, bands]
  s += "    x = torch.flatten(x, 1)\n";
  s += "    return torch.addmm(" + self + "fc_b, x, " + self + "fc_w.t())\n";
  s += "\n";
  return s;
}

std::string source(size_t blocks) {
  return logits_source(blocks, "logits", "") + "def forward(self, x):\n    return torch.softmax(self.logits(x), 1)\n";
}

// The members' softmax outputs, averaged.
std::string ensemble_source(size_t blocks, size_t members) {
  std::string s;
  for (size_t k = 0; k < members; ++k) {
    s += logits_source(blocks, "logits_m" + std::to_string(k), "m" + std::to_string(k) + "_");
  }
  s += "def forward(self, x):\n";
  s += "    p = torch.softmax(self.logits_m0(x), 1)\n";
  for (size_t k = 1; k < members; ++k) s += "    p = p + torch.softmax(self.logits_m" + std::to_string(k) + "(x), 1)\n";
  s += "    return p / " + std::to_string(members) + ".0\n";
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

torch::jit::Module make_ensemble(const std::vector<torch::jit::Module>& members) {
  if (members.empty()) throw std::invalid_argument("an ensemble needs at least one member");
  std::vector<std::string> names;  // the first member's tensors, in its order
  for (const auto& b : members[0].named_buffers(false)) names.push_back(b.name);
  const size_t buffers = names.size();
  for (const auto& p : members[0].named_parameters(false)) names.push_back(p.name);
  size_t blocks = 0;
  while (members[0].hasattr("c" + std::to_string(blocks + 1) + "_w")) ++blocks;
  torch::jit::Module m("CorepoolTagger");
  for (size_t k = 0; k < members.size(); ++k) {
    const std::string prefix = "m" + std::to_string(k) + "_";
    for (size_t i = 0; i < names.size(); ++i) {
      if (!members[k].hasattr(names[i])) {
        throw std::invalid_argument("ensemble member " + std::to_string(k) + " has no " + names[i] +
                                    ": every member must be the same network");
      }
      const torch::Tensor t = members[k].attr(names[i]).toTensor();
      if (t.sizes() != members[0].attr(names[i]).toTensor().sizes()) {
        throw std::invalid_argument("ensemble member " + std::to_string(k) + ": " + names[i] +
                                    " differs in shape from member 0's");
      }
      if (i < buffers) m.register_buffer(prefix + names[i], t.clone());
      else m.register_parameter(prefix + names[i], t.clone(), false);
    }
  }
  m.define(ensemble_source(blocks, members.size()));
  return m;
}

std::vector<torch::Tensor> trainable(const torch::jit::Module& module) {
  std::vector<torch::Tensor> params;
  for (const auto& p : module.named_parameters(/*recurse=*/false)) params.push_back(p.value);
  return params;
}

}  // namespace corepool::train
