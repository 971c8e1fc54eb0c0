// Why a request with a whole body or tensor is refused for a stateful model
// ([model] kind = "stateful"): its chunks need a stream's state carried
// between them, which only the audio streams do (supervisor/serve/
// stateful_session.h). Said the same by /v1/audio:tag and both wires' infer.
#pragma once

#include <string>

namespace corepool {

inline std::string stateful_refusal(const std::string& model) {
  return "model \"" + model + "\" is stateful ([model] kind = \"stateful\"): send its audio as a stream "
         "(WebSocket /v2/models/" + model + "/audio/stream or gRPC ModelStreamInfer), not as one request";
}

}  // namespace corepool
