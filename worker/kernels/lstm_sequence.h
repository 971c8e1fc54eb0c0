// corepool::lstm: one single-layer, unidirectional LSTM over a whole sequence,
// run by a single call to oneDNN's LSTM primitive. torch.lstm in LibTorch 1.13
// dispatches every time step as its own handful of ops (two matrix products,
// the gate nonlinearities, the state update), and on this CPU that dispatch
// costs about 16 us per step for H = 128, more than the arithmetic. oneDNN runs
// the input projection of all steps as one product and the recurrence in one
// kernel. The maths are those of torch.lstm (torch.nn.LSTMCell step by step):
// PyTorch's gates i, f, g, o are oneDNN's i, f, c~, o, and oneDNN's one bias
// is b_ih + b_hh.
//
// Registered as the TorchScript operator
//   corepool::lstm(Tensor x, Tensor h0, Tensor c0, Tensor w_ih, Tensor w_hh,
//                  Tensor b_ih, Tensor b_hh) -> (Tensor, Tensor, Tensor)
// when this file's object is linked in (see link_lstm_sequence_op).
//
// Inference only: the outputs carry no autograd history. The weights are
// taken to be read-only model parameters: each thread keeps them reordered
// into oneDNN's layout, recognized by their storage, address and strides, and
// a weight changed in place afterwards would not be seen.
#pragma once

#include <cstddef>
#include <tuple>

#include <ATen/core/Tensor.h>

namespace corepool {

// x [T, N, C], h0 and c0 [N, H], w_ih [4H, C], w_hh [4H, H], b_ih and b_hh
// [4H], all fp32 on the CPU (non-contiguous ones are made contiguous). Returns
// (out [T, N, H], h_T [N, H], c_T [N, H]); for T == 0, an empty out and copies
// of h0 and c0. Throws c10::Error naming corepool::lstm and the wrong argument
// for any other shape or type, dnnl::error if this CPU's oneDNN has no kernel.
// Thread-safe: each thread has its own caches (primitives, reordered weights).
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_sequence(const at::Tensor& x, const at::Tensor& h0,
                                                             const at::Tensor& c0, const at::Tensor& w_ih,
                                                             const at::Tensor& w_hh, const at::Tensor& b_ih,
                                                             const at::Tensor& b_hh);

// How many primitives (one per (T, N, C, H)) a thread keeps, the least
// recently used going first: about 150 kB each.
constexpr size_t kLstmPrimitivesPerThread = 256;

// Does nothing. The operator is registered by a static initializer in
// lstm_sequence.cc, and a static linker drops an archive member nothing
// refers to, registration included: a caller that only runs corepool::lstm
// through TorchScript calls this once to keep the object file in its binary.
void link_lstm_sequence_op();

}  // namespace corepool
