#include "worker/model/ops_resolver.h"

#include <string>

#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>

namespace corepool {
namespace {

// torch.ops.<namespace>: the operators registered under that namespace.
struct OpNamespaces : torch::jit::SugaredValue {
  std::string kind() const override { return "torch.ops"; }
  std::shared_ptr<torch::jit::SugaredValue> attr(const torch::jit::SourceRange&, torch::jit::GraphFunction&,
                                                 const std::string& name) override {
    return std::make_shared<torch::jit::BuiltinModule>(name);
  }
};

// torch: aten, as LibTorch's resolver has it, plus torch.ops.
struct Torch : torch::jit::BuiltinModule {
  Torch() : BuiltinModule("aten") {}
  std::shared_ptr<torch::jit::SugaredValue> attr(const torch::jit::SourceRange& loc, torch::jit::GraphFunction& m,
                                                 const std::string& field) override {
    if (field == "ops") return std::make_shared<OpNamespaces>();
    return BuiltinModule::attr(loc, m, field);
  }
};

struct OpsResolver : torch::jit::Resolver {
  std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string& name, torch::jit::GraphFunction&,
                                                         const torch::jit::SourceRange&) override {
    return name == "torch" ? std::make_shared<Torch>() : nullptr;
  }
  c10::TypePtr resolveType(const std::string&, const torch::jit::SourceRange&) override { return nullptr; }
};

}  // namespace

std::shared_ptr<torch::jit::Resolver> ops_resolver() { return std::make_shared<OpsResolver>(); }

}  // namespace corepool
