// Reads model.toml first (cheap, gives the clearest errors), then model.pt.
// Runs no LibTorch op: in process mode the supervisor loads before it forks.
#include "worker/model/model.h"

#include "worker/model/split_methods.h"
#include "worker/model/torch_module.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace corepool {
namespace {

void require_file(const std::string& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw ModelError(path + ": cannot open " + what + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw ModelError(path + ": " + what + " is not a regular file");
}

size_t count_weight_bytes(const torch::jit::Module& module) {
  size_t bytes = 0;
  for (const auto& p : module.parameters()) bytes += p.nbytes();
  for (const auto& b : module.buffers()) bytes += b.nbytes();
  return bytes;
}

}  // namespace

std::shared_ptr<const LoadedModel> load_model(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    throw ModelError(dir + ": model directory not found: " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) throw ModelError(dir + ": model path is not a directory");
  const std::string toml_path = dir + "/model.toml";
  const std::string pt_path = dir + "/model.pt";
  require_file(toml_path, "model.toml");
  require_file(pt_path, "model.pt");

  auto model = std::make_shared<LoadedModel>();
  model->dir = dir;
  try {
    model->config = load_model_config(toml_path);
  } catch (const ConfigError& e) {
    throw ModelError(e.what());
  }
  model->torch = std::make_shared<TorchModule>();
  torch::jit::Module& module = model->torch->module;
  try {
    module = torch::jit::load(pt_path, torch::kCPU);
  } catch (const c10::Error& e) {
    throw ModelError(pt_path + ": not a loadable TorchScript module: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw ModelError(pt_path + ": not a loadable TorchScript module: " + e.what());
  }
  module.eval();
  for (auto p : module.parameters()) p.set_requires_grad(false);
  if (!module.find_method("forward")) throw ModelError(pt_path + ": module has no forward()");
  if (model->config.is_stateful()) {
    torch::jit::Module method = stateful_method(module, model->config.stateful.method, dir);
    define_split_methods(method, model->config.stateful, dir);
  }
  model->weight_bytes = count_weight_bytes(module);
  return model;
}

torch::jit::Module& module_of(const LoadedModel& model) { return model.torch->module; }
TorchModule& torch_of(const LoadedModel& model) { return *model.torch; }

torch::jit::Module stateful_method(const torch::jit::Module& module, const std::string& path, const std::string& dir) {
  torch::jit::Module m = module;
  std::string rest = path;
  while (!rest.empty()) {
    const size_t dot = rest.find('.');
    const std::string name = rest.substr(0, dot);
    rest = dot == std::string::npos ? "" : rest.substr(dot + 1);
    if (!m.hasattr(name) || !m.attr(name).isModule()) {
      throw ModelError(dir + "/model.pt: [stateful] method = \"" + path + "\": no submodule " + name);
    }
    m = m.attr(name).toModule();
  }
  if (!m.find_method("forward")) throw ModelError(dir + "/model.pt: " + path + " has no forward()");
  return m;
}

}  // namespace corepool
